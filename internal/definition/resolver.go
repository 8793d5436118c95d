package definition

import (
	"errors"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// KindResolver maps a kind to its resource and scope, and a resource back
// to its kind. KindFor fails (ErrNoKinds) where no discovery can tell: then
// the engine sends the hook groups only for the kinds of the objects at
// hand (Metacontroller sends an empty group for every declared child
// resource), and a definition leaves kinds and scopes unknown.
type KindResolver interface {
	ResourceFor(gvk schema.GroupVersionKind) (gvr schema.GroupVersionResource, namespaced bool, err error)
	KindFor(gvr schema.GroupVersionResource) (schema.GroupVersionKind, error)
}

// ErrNoKinds is KindFor's answer where there is no discovery to ask.
var ErrNoKinds = errors.New("no discovery to map a resource to its kind")

// RESTMapperResolver adapts a meta.RESTMapper (cluster discovery).
func RESTMapperResolver(m meta.RESTMapper) KindResolver {
	return restMapperResolver{mapper: m}
}

type restMapperResolver struct {
	mapper meta.RESTMapper
}

var (
	_ KindResolver = restMapperResolver{}
	_ KindResolver = guessingResolver{}
)

func (r restMapperResolver) ResourceFor(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, error) {
	mapping, err := r.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	return mapping.Resource, mapping.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

func (r restMapperResolver) KindFor(gvr schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return r.mapper.KindFor(gvr)
}

// GuessingResolver is for when no cluster is reachable (a /sync preview with
// an inline parent): the resource is meta.UnsafeGuessKindToResource's guess
// and the scope comes from a static list of well-known cluster-scoped
// built-in kinds; every other kind, including every custom resource, is
// taken to be namespaced. It never fails, so a preview never rejects a child
// only because its kind is unknown here.
func GuessingResolver() KindResolver {
	return guessingResolver{}
}

type guessingResolver struct{}

// clusterScopedKinds are the built-in kinds that are not namespaced. Matched
// by group and kind, so that a custom "Node" kind in another group still
// counts as namespaced.
var clusterScopedKinds = map[schema.GroupKind]bool{
	{Group: "", Kind: "Namespace"}:                                                    true,
	{Group: "", Kind: "Node"}:                                                         true,
	{Group: "", Kind: "PersistentVolume"}:                                             true,
	{Group: "", Kind: "ComponentStatus"}:                                              true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRole"}:                         true,
	{Group: "rbac.authorization.k8s.io", Kind: "ClusterRoleBinding"}:                  true,
	{Group: "storage.k8s.io", Kind: "StorageClass"}:                                   true,
	{Group: "storage.k8s.io", Kind: "CSIDriver"}:                                      true,
	{Group: "storage.k8s.io", Kind: "CSINode"}:                                        true,
	{Group: "storage.k8s.io", Kind: "VolumeAttachment"}:                               true,
	{Group: "storage.k8s.io", Kind: "VolumeAttributesClass"}:                          true,
	{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}:                 true,
	{Group: "scheduling.k8s.io", Kind: "PriorityClass"}:                               true,
	{Group: "apiregistration.k8s.io", Kind: "APIService"}:                             true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}:     true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}:   true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}:        true,
	{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}: true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}:          true,
	{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}:   true,
	{Group: "networking.k8s.io", Kind: "IngressClass"}:                                true,
	{Group: "networking.k8s.io", Kind: "IPAddress"}:                                   true,
	{Group: "networking.k8s.io", Kind: "ServiceCIDR"}:                                 true,
	{Group: "node.k8s.io", Kind: "RuntimeClass"}:                                      true,
	{Group: "certificates.k8s.io", Kind: "CertificateSigningRequest"}:                 true,
	{Group: "certificates.k8s.io", Kind: "ClusterTrustBundle"}:                        true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "FlowSchema"}:                       true,
	{Group: "flowcontrol.apiserver.k8s.io", Kind: "PriorityLevelConfiguration"}:       true,
	{Group: "resource.k8s.io", Kind: "DeviceClass"}:                                   true,
	{Group: "resource.k8s.io", Kind: "ResourceSlice"}:                                 true,
}

func (guessingResolver) KindFor(schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return schema.GroupVersionKind{}, ErrNoKinds
}

func (guessingResolver) ResourceFor(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool, error) {
	plural, _ := meta.UnsafeGuessKindToResource(gvk)
	return plural, !clusterScopedKinds[gvk.GroupKind()], nil
}
