package apiserver

import (
	"mime"
	"net/http"
	"strings"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/endpoints/handlers/negotiation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
)

// Protobuf, kube-controller-manager and the types of this server.
//
// The generic API server offers every media type of the codec factory for
// every resource, protobuf included, and only finds out when it encodes an
// answer that a type of ours has no protobuf form. kube-controller-manager's
// namespace, garbage-collector and quota controllers talk to every API with
// the metadata client, which asks for protobuf first and JSON second: its
// lists and watches ask for PartialObjectMetadata (which has protobuf), but
// its deletes and deletecollections take the deleted objects back as they
// are, and those failed to encode, so no namespace could be deleted while
// the server served a namespaced resource.
//
// CustomResourceDefinitions, which have no protobuf either, are served the
// way this file serves our resources: kube-apiserver's RequestScope has a
// StandardSerializers list for them (JSON, YAML) that negotiation consults
// when an answer is not transformed, while PartialObjectMetadata and Table
// transforms keep every media type of their own. The generic installer
// gives no way to set that list, so a filter does the same before the
// handler negotiates: for a resource whose types cannot be encoded in
// protobuf it takes protobuf out of the Accept header unless the clause
// asks for a transform (as=...), answers 406 when nothing acceptable is
// left, and 415 for a protobuf body that would have to decode into one of
// our types. A client asking protobuf with a JSON fallback gets JSON; a
// metadata list or watch keeps protobuf.

// protobufMediaType is Kubernetes' protobuf media type, for objects and,
// with ;stream=watch, for watch events.
const protobufMediaType = "application/vnd.kubernetes.protobuf"

// withoutProtobuf are the media types served for resources without
// protobuf, as a 406 or 415 answer lists them.
var withoutProtobuf = []string{"application/json", "application/yaml"}

// protobufless holds the resources (and subresources) of the server whose
// objects have no protobuf form. It is filled once the API group is
// installed, before the server serves; until then nothing is filtered.
type protobufless struct {
	resources atomic.Pointer[map[string]bool]
}

// learn records, for every resource of the group, whether its object and
// list types can be encoded in protobuf.
func (p *protobufless) learn(group string, storage map[string]map[string]rest.Storage) {
	without := map[string]bool{}
	for version, resources := range storage {
		for path, s := range resources {
			objs := []runtime.Object{s.New()}
			if lister, ok := s.(rest.Lister); ok {
				objs = append(objs, lister.NewList())
			}
			for _, obj := range objs {
				if !encodableInProtobuf(obj) {
					without[resourceKey(group, version, path)] = true
				}
			}
		}
	}
	p.resources.Store(&without)
}

// lacksProtobuf tells whether the resource a request is for has objects
// without a protobuf form.
func (p *protobufless) lacksProtobuf(info *request.RequestInfo) bool {
	without := p.resources.Load()
	if without == nil || !info.IsResourceRequest {
		return false
	}
	path := info.Resource
	if info.Subresource != "" {
		path += "/" + info.Subresource
	}
	return (*without)[resourceKey(info.APIGroup, info.APIVersion, path)]
}

func resourceKey(group, version, path string) string {
	return group + "/" + version + "/" + path
}

// encodableInProtobuf tells whether the protobuf serializer can encode obj:
// it takes the generated marshallers Kubernetes' own types have, and
// nothing else.
func encodableInProtobuf(obj runtime.Object) bool {
	switch obj.(type) {
	case runtime.ProtobufMarshaller, interface{ Marshal() ([]byte, error) }:
		return true
	}
	return false
}

// withProtobufWhereEncodable is the filter described at the top of this
// file. It runs inside the handler chain, where the request's RequestInfo
// is known.
func withProtobufWhereEncodable(handler http.Handler, p *protobufless) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		info, ok := request.RequestInfoFrom(req.Context())
		if !ok || !p.lacksProtobuf(info) {
			handler.ServeHTTP(w, req)
			return
		}
		gv := schema.GroupVersion{Group: info.APIGroup, Version: info.APIVersion}
		// Only creates and updates decode a body into the resource's
		// own type; a delete's body is DeleteOptions, which has
		// protobuf, and a patch names its own patch media type.
		if (req.Method == http.MethodPost || req.Method == http.MethodPut) && isPlainProtobuf(req.Header.Get("Content-Type")) {
			responsewriters.ErrorNegotiated(negotiation.NewUnsupportedMediaTypeError(withoutProtobuf), Codecs, gv, w, req)
			return
		}
		if accept, changed := dropPlainProtobuf(req.Header.Get("Accept")); changed {
			if accept == "" {
				responsewriters.ErrorNegotiated(negotiation.NewNotAcceptableError(withoutProtobuf), Codecs, gv, w, req)
				return
			}
			req.Header.Set("Accept", accept)
		}
		handler.ServeHTTP(w, req)
	})
}

// dropPlainProtobuf removes from an Accept header every protobuf clause that
// asks for the object as it is (no as= transform), and tells whether it
// removed any. A clause it cannot parse is kept for negotiation to judge.
func dropPlainProtobuf(accept string) (string, bool) {
	if !strings.Contains(accept, protobufMediaType) {
		return accept, false
	}
	clauses := strings.Split(accept, ",")
	kept := clauses[:0]
	for _, clause := range clauses {
		if isPlainProtobuf(clause) {
			continue
		}
		kept = append(kept, clause)
	}
	if len(kept) == len(clauses) {
		return accept, false
	}
	return strings.TrimSpace(strings.Join(kept, ",")), true
}

// isPlainProtobuf tells whether a media type is protobuf without an as=
// transform.
func isPlainProtobuf(mediaType string) bool {
	typ, params, err := mime.ParseMediaType(strings.TrimSpace(mediaType))
	if err != nil || typ != protobufMediaType {
		return false
	}
	_, transform := params["as"]
	return !transform
}
