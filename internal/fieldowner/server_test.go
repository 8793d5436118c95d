package fieldowner

import (
	"encoding/json"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/openapi/openapitest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// The test's field manager and Metacontroller's.
const ours = "metacontroller.k8s.io/demo"

var (
	coreOnce sync.Once
	coreTC   managedfields.TypeConverter
	coreErr  error
)

// coreV1 is the converter of core/v1 from a real OpenAPI v3 document
// (client-go's test copy of kube-apiserver's), through Schemas as in
// production.
func coreV1(t *testing.T) managedfields.TypeConverter {
	t.Helper()
	coreOnce.Do(func() {
		coreTC, coreErr = NewSchemas(openapitest.NewEmbeddedFileClient()).TypeConverter(schema.GroupVersion{Version: "v1"})
	})
	if coreErr != nil {
		t.Fatal(coreErr)
	}
	return coreTC
}

// fakeServer keeps one object the way kube-apiserver does as far as
// managedFields go: the real managedfields.FieldManager on creates,
// updates and applies, defaulting (decoded requests before tracking, the
// merged object of an apply after), status kept from the stored object,
// and no write when nothing but managedFields timestamps would change.
type fakeServer struct {
	t        *testing.T
	gvk      schema.GroupVersionKind
	fm       *managedfields.FieldManager
	defaults func(map[string]interface{})
	// encode is what serialising the stored object does to it.
	encode func(map[string]interface{})
	live   *unstructured.Unstructured
	writes int
}

func newServer(t *testing.T, tc managedfields.TypeConverter, gvk schema.GroupVersionKind, defaults func(map[string]interface{})) *fakeServer {
	t.Helper()
	if defaults == nil {
		defaults = func(map[string]interface{}) {}
	}
	s := &fakeServer{t: t, gvk: gvk, defaults: defaults}
	reset := map[fieldpath.APIVersion]fieldpath.Filter{
		fieldpath.APIVersion(gvk.GroupVersion().String()): fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie("status"))),
	}
	fm, err := managedfields.NewDefaultFieldManager(tc, noConversion{}, s, s, gvk, gvk.GroupVersion(), "", reset)
	if err != nil {
		t.Fatal(err)
	}
	s.fm = fm
	return s
}

// Default implements runtime.ObjectDefaulter.
func (s *fakeServer) Default(obj runtime.Object) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		s.defaults(u.Object)
	}
}

// New implements runtime.ObjectCreater.
func (s *fakeServer) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{Object: map[string]interface{}{}}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

type noConversion struct{}

func (noConversion) Convert(in, out, context interface{}) error { return nil }
func (noConversion) ConvertToVersion(in runtime.Object, _ runtime.GroupVersioner) (runtime.Object, error) {
	return in, nil
}
func (noConversion) ConvertFieldLabel(_ schema.GroupVersionKind, l, v string) (string, string, error) {
	return l, v, nil
}

// wire is obj as the server or an informer decodes it from JSON.
func wire(t *testing.T, obj *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	b, err := json.Marshal(obj.Object)
	if err != nil {
		t.Fatal(err)
	}
	out := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal(b, &out.Object); err != nil {
		t.Fatal(err)
	}
	return out
}

// create creates obj with a plain request of manager.
func (s *fakeServer) create(obj *unstructured.Unstructured, manager string) {
	s.t.Helper()
	obj = wire(s.t, obj)
	s.defaults(obj.Object)
	empty, _ := s.New(s.gvk)
	out, err := s.fm.Update(empty, obj, manager)
	if err != nil {
		s.t.Fatal(err)
	}
	u := out.(*unstructured.Unstructured)
	u.SetUID("3f2f7a8e-0000-4000-8000-000000000001")
	u.SetCreationTimestamp(metav1.Now())
	s.store(u)
}

// update replaces the object with a plain request of manager (PUT or
// PATCH).
func (s *fakeServer) update(obj *unstructured.Unstructured, manager string) bool {
	s.t.Helper()
	obj = wire(s.t, obj)
	if rv := obj.GetResourceVersion(); rv != "" && rv != s.live.GetResourceVersion() {
		s.t.Fatalf("conflict: resourceVersion %s, stored %s", rv, s.live.GetResourceVersion())
	}
	s.defaults(obj.Object)
	out, err := s.fm.Update(s.live.DeepCopy(), obj, manager)
	if err != nil {
		s.t.Fatal(err)
	}
	return s.store(out.(*unstructured.Unstructured))
}

// apply server-side applies obj as manager, with force, and tells
// whether that wrote.
func (s *fakeServer) apply(obj *unstructured.Unstructured, manager string) bool {
	s.t.Helper()
	obj = wire(s.t, obj)
	var live runtime.Object
	if s.live != nil {
		live = s.live.DeepCopy()
	} else {
		live, _ = s.New(s.gvk)
	}
	out, err := s.fm.Apply(live, obj, manager, true)
	if err != nil {
		s.t.Fatal(err)
	}
	u := out.(*unstructured.Unstructured)
	if s.live != nil {
		// The status subresource's strategy: status is not written here.
		if st, ok := s.live.Object["status"]; ok {
			u.Object["status"] = st
		} else {
			delete(u.Object, "status")
		}
	}
	return s.store(u)
}

// store writes obj unless it equals the stored object but for
// managedFields timestamps (apiserver's
// IgnoreManagedFieldsTimestampsTransformer), and tells whether it wrote.
func (s *fakeServer) store(obj *unstructured.Unstructured) bool {
	obj = wire(s.t, obj)
	if s.encode != nil {
		s.encode(obj.Object)
	}
	if s.live != nil && reflect.DeepEqual(withoutTimes(s.live), withoutTimes(obj)) {
		return false
	}
	s.writes++
	obj.SetResourceVersion(strconv.Itoa(100 + s.writes))
	s.live = obj
	return true
}

func withoutTimes(obj *unstructured.Unstructured) map[string]interface{} {
	c := obj.DeepCopy()
	c.SetResourceVersion("")
	mf := c.GetManagedFields()
	for i := range mf {
		mf[i].Time = nil
	}
	c.SetManagedFields(mf)
	return c.Object
}

// observed is the object as an informer has it.
func (s *fakeServer) observed() *unstructured.Unstructured {
	if s.live == nil {
		return nil
	}
	return wire(s.t, s.live)
}

// jsonPatch applies an RFC 6902 patch of add, replace and remove on
// object members, which is all TakeoverPatch uses.
func jsonPatch(t *testing.T, obj *unstructured.Unstructured, patch []byte) *unstructured.Unstructured {
	t.Helper()
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		t.Fatal(err)
	}
	out := obj.DeepCopy()
	for _, op := range ops {
		keys := strings.Split(strings.TrimPrefix(op.Path, "/"), "/")
		for i, k := range keys {
			keys[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(k)
		}
		parent := out.Object
		for _, k := range keys[:len(keys)-1] {
			next, ok := parent[k].(map[string]interface{})
			if !ok {
				t.Fatalf("patch %s %s: no %s", op.Op, op.Path, k)
			}
			parent = next
		}
		last := keys[len(keys)-1]
		_, exists := parent[last]
		switch op.Op {
		case "add", "replace":
			if op.Op == "replace" && !exists {
				t.Fatalf("patch replace %s: nothing there", op.Path)
			}
			var v interface{}
			if err := utiljson.Unmarshal(op.Value, &v); err != nil {
				t.Fatal(err)
			}
			parent[last] = v
		case "remove":
			if !exists {
				t.Fatalf("patch remove %s: nothing there", op.Path)
			}
			delete(parent, last)
		default:
			t.Fatalf("patch op %q", op.Op)
		}
	}
	return out
}

// object parses a JSON object.
func object(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := utiljson.Unmarshal([]byte(s), &u.Object); err != nil {
		t.Fatalf("%v in %s", err, s)
	}
	return u
}
