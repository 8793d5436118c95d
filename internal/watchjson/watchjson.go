// Package watchjson is the dynamic client the loop's informers list and
// watch through, and the one each identity gets and writes with. It finds
// where each JSON watch event ends by its brackets alone and decodes it in
// one pass into the Unstructured object an informer's cache holds; a get's
// or a write's answer is decoded in the same one pass. client-go's dynamic
// client decodes the same objects after scanning each event about a dozen
// times (to frame it, read the envelope's kind, copy out its object, read
// the object's kind, tell a list from an object, validate and unmarshal
// it), and an informer of every child's every change spends most of its
// time there.
package watchjson

import (
	"bytes"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/composite-apiserver/composite-apiserver/internal/jsonobject"
)

// Config is dynamic.ConfigFor(in) with this package's JSON decoding of
// watch events and objects, the informers': what it decodes shares values
// with the objects decoded before it (jsonobject.DecodeShared), so it must
// be read and never changed. Every other media type, and every decoding
// into anything but an Unstructured object, is the dynamic client's own.
func Config(in *rest.Config) *rest.Config {
	return config(in, jsonobject.DecodeShared)
}

// decodeFunc decodes a JSON object's bytes into its map: the informers'
// jsonobject.DecodeShared, or jsonobject.Decode for maps of the caller's
// own.
type decodeFunc func(data []byte) (map[string]interface{}, error)

func config(in *rest.Config, decode decodeFunc) *rest.Config {
	config := dynamic.ConfigFor(in)
	config.NegotiatedSerializer = newNegotiatedSerializer(config.NegotiatedSerializer, decode)
	return config
}

// NewForConfig returns a dynamic client of config whose watches decode
// each JSON event in one pass, for the informers (Config). It lists, gets
// and writes as dynamic.NewForConfig's does.
func NewForConfig(in *rest.Config) (dynamic.Interface, error) {
	config := Config(in)
	httpClient, err := rest.HTTPClientFor(config)
	if err != nil {
		return nil, err
	}
	return newClient(config, httpClient)
}

// NewForConfigAndClient returns a dynamic client of config over
// httpClient, as dynamic.NewForConfigAndClient does, that decodes each
// JSON object it reads (a get's, an update's, an apply's answer) in one
// pass into maps of the caller's own (jsonobject.Decode), which it may
// change: unlike the informers' client, it shares no value with other
// objects. A status write's answer decoded by client-go's decoder was a
// third of what writing a parent's status cost the loop.
func NewForConfigAndClient(in *rest.Config, httpClient *http.Client) (dynamic.Interface, error) {
	return newClient(config(in, jsonobject.Decode), httpClient)
}

func newClient(config *rest.Config, httpClient *http.Client) (dynamic.Interface, error) {
	// As dynamic.NewForConfigAndClient does: its requests name their
	// whole path, so none is configured.
	config.GroupVersion = nil
	config.APIPath = "/if-you-see-this-search-for-the-break"
	client, err := rest.UnversionedRESTClientForConfigAndClient(config, httpClient)
	if err != nil {
		return nil, err
	}
	return dynamic.New(client), nil
}

// negotiatedSerializer is the dynamic client's, with the JSON media type's
// object and stream decoders and its stream's frame reader replaced. A
// rest client asks it for its media types on every request, so they are
// made once.
type negotiatedSerializer struct {
	runtime.NegotiatedSerializer
	mediaTypes []runtime.SerializerInfo
}

func newNegotiatedSerializer(dynamicSerializer runtime.NegotiatedSerializer, decode decodeFunc) negotiatedSerializer {
	var mediaTypes []runtime.SerializerInfo
	for _, info := range dynamicSerializer.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeJSON && info.StreamSerializer != nil {
			stream := *info.StreamSerializer
			stream.Serializer = eventDecoder{stream.Serializer}
			stream.Framer = framer{stream.Framer}
			info.StreamSerializer = &stream
			info.Serializer = objectDecoder{Serializer: info.Serializer, decode: decode}
		}
		mediaTypes = append(mediaTypes, info)
	}
	return negotiatedSerializer{NegotiatedSerializer: dynamicSerializer, mediaTypes: mediaTypes}
}

func (s negotiatedSerializer) SupportedMediaTypes() []runtime.SerializerInfo {
	return s.mediaTypes
}

// metaKinds are the kinds the dynamic client decodes into typed metav1
// objects when it is not told what to decode into (a watch's Status event
// among them), as its scheme registers them; objectDecoder leaves them to
// it.
var metaKinds = func() *runtime.Scheme {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	return scheme
}()

// objectDecoder decodes a JSON object into an Unstructured in one pass
// over its bytes (decode), into the same map the dynamic client's decoder
// makes of them (unstructured.UnstructuredJSONScheme's: strings
// case-sensitively keyed, whole numbers int64), its recurring strings
// shared. Whatever else it is asked to decode, and anything its one pass
// can't, goes to the dynamic client's decoder, which says what is wrong
// with it.
type objectDecoder struct {
	runtime.Serializer
	decode decodeFunc
}

func (d objectDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	u, isUnstructured := into.(*unstructured.Unstructured)
	if defaults != nil || (into != nil && !isUnstructured) {
		return d.Serializer.Decode(data, defaults, into)
	}
	content, err := d.decode(data)
	if err != nil {
		return d.Serializer.Decode(data, defaults, into)
	}
	if u == nil {
		u = &unstructured.Unstructured{}
	}
	u.Object = content
	gvk := u.GroupVersionKind()
	if gvk.Kind == "" || (into == nil && metaKinds.Recognizes(gvk)) {
		return d.Serializer.Decode(data, defaults, into)
	}
	return u, &gvk, nil
}

// eventDecoder decodes a watch event's envelope without reading its
// object: kube-apiserver writes each event as metav1.WatchEvent encodes to
// JSON, {"type":"MODIFIED","object":{...}}, so the object is the bytes
// between the type and the envelope's last brace, which the object
// decoder then unmarshals (and so validates) once. An envelope in any other
// layout (another field order, spaces) goes to the dynamic client's
// decoder.
type eventDecoder struct {
	runtime.Serializer
}

var (
	eventPrefix = []byte(`{"type":"`)
	eventObject = []byte(`","object":`)
	// watchEventKind is what the dynamic client's decoder answers an
	// envelope's kind is.
	watchEventKind = schema.GroupVersionKind{Version: "v1", Kind: metav1.WatchEventKind}
)

func (d eventDecoder) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	event, ok := into.(*metav1.WatchEvent)
	if !ok || defaults != nil {
		return d.Serializer.Decode(data, defaults, into)
	}
	eventType, object, ok := splitEvent(data)
	if !ok {
		return d.Serializer.Decode(data, defaults, into)
	}
	// object is a slice of the stream's buffer, which its next event
	// overwrites: the watch decodes the object before it reads on, and
	// the object decoder copies what it keeps.
	event.Type = eventType
	event.Object = runtime.RawExtension{Raw: object}
	gvk := watchEventKind
	return event, &gvk, nil
}

// splitEvent is the type and the object of an event in kube-apiserver's
// layout, or false.
func splitEvent(data []byte) (string, []byte, bool) {
	data = bytes.TrimSpace(data)
	rest, ok := bytes.CutPrefix(data, eventPrefix)
	if !ok || len(rest) == 0 || rest[len(rest)-1] != '}' {
		return "", nil, false
	}
	end := bytes.IndexByte(rest, '"')
	if end <= 0 {
		return "", nil, false
	}
	eventType := rest[:end]
	for _, c := range eventType {
		if c < 'A' || c > 'Z' {
			return "", nil, false
		}
	}
	object, ok := bytes.CutPrefix(rest[end:], eventObject)
	if !ok || len(object) < 2 || object[0] != '{' {
		return "", nil, false
	}
	return string(eventType), object[:len(object)-1], true
}
