package hookapi

import (
	"encoding/json"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// b2Request is a B2 parent's sync request: its controller, the parent and
// its 10 observed ConfigMaps (b2Children).
func b2Request() *SyncHookRequest {
	parent := obj("example.com/v1", "Hello", "bench-0", "p1")
	parent.SetUID("6b2c3d4e-0000-4000-8000-000000000001")
	parent.SetResourceVersion("1200")
	parent.Object["spec"] = map[string]interface{}{"children": int64(10)}
	return &SyncHookRequest{
		Controller: b2Controller(),
		Parent:     parent,
		Children:   b2Children(),
		Related:    RelativeObjectMap{},
	}
}

// b2Controller is B2's CompositeController as the loop sends it: as
// stored, with its status.
func b2Controller() *v1alpha1.CompositeController {
	cc := &v1alpha1.CompositeController{}
	err := json.Unmarshal([]byte(`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"CompositeController",
		"metadata":{"name":"bench-tracking","uid":"5a2c3d4e-0000-4000-8000-000000000001","resourceVersion":"1100","generation":1,
			"creationTimestamp":"2026-12-02T16:00:00Z"},
		"spec":{"generateSelector":true,
			"parentResource":{"apiVersion":"example.com/v1","resource":"hellos"},
			"childResources":[{"apiVersion":"v1","resource":"configmaps","updateStrategy":{"method":"InPlace"}}],
			"hooks":{"sync":{"webhook":{"url":"http://127.0.0.1:41234/bench-tracking/sync","timeout":"30s"}}}},
		"status":{"observedGeneration":1,"parents":1,"children":10,"lastSyncTime":"2026-12-02T16:00:01Z","conditions":[
			{"type":"Ready","status":"True","observedGeneration":1,"lastTransitionTime":"2026-12-02T16:00:00Z","reason":"Running","message":"the loop runs"},
			{"type":"HookReachable","status":"True","observedGeneration":1,"lastTransitionTime":"2026-12-02T16:00:01Z","reason":"Answered","message":"the sync hook answered"}]}}`), cc)
	if err != nil {
		panic(err)
	}
	return cc
}

// plainRequest is SyncHookRequest without its MarshalJSON: what
// encoding/json writes for its fields.
type plainRequest SyncHookRequest

// marshalsAsWithout returns req's MarshalJSON with encodings, failing
// the test when it is not, byte for byte, what encoding/json writes for
// req's fields.
func marshalsAsWithout(t *testing.T, what string, req *SyncHookRequest, encodings *Encodings) string {
	t.Helper()
	want, err := json.Marshal((*plainRequest)(req))
	if err != nil {
		t.Fatal(err)
	}
	cached := *req
	cached.Encodings = encodings
	got, err := cached.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Fatalf("%s: with Encodings\n%s\nwithout\n%s", what, got, want)
	}
	return string(got)
}

// SyncHookRequest's MarshalJSON writes what encoding/json writes for its
// fields, nil ones and HTML-escaped strings included, compact: the hook
// client sends its bytes as they are, not through json.Marshal.
func TestSyncHookRequestMarshalJSONIsEncodingJSONs(t *testing.T) {
	odd := b2Request()
	odd.Parent.Object["spec"] = map[string]interface{}{"x": "<script>&\u2028", "f": 1.5, "l": []interface{}{true, nil}}
	odd.Related.Insert(v1alpha1.HookVersionV2, obj("v1", "Secret", "other", "a<b>"))
	odd.Finalizing = true
	for name, req := range map[string]*SyncHookRequest{
		"B2's":            b2Request(),
		"odd":             odd,
		"empty":           {},
		"no parent's map": {Parent: &unstructured.Unstructured{}, Children: RelativeObjectMap{"Nil.v1": nil}},
	} {
		got, err := req.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal((*plainRequest)(req))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s request: got\n%s\nwant\n%s", name, got, want)
		}
	}
}

// A request with Encodings is, byte for byte, the request without them,
// on the parent's first sync and on the next ones, which take the
// unchanged children from the cache and encode again only a child with
// a new resourceVersion.
func TestEncodingsReuseOnlyUnchangedChildren(t *testing.T) {
	var cache EncodingCache
	req := b2Request()
	sameBytes := func(sync string, encodings *Encodings) string {
		t.Helper()
		return marshalsAsWithout(t, sync, req, encodings)
	}

	first := cache.Parent("bench-0/p1")
	sameBytes("first sync", first)
	if first.Encoded != 10 || first.Reused != 0 {
		t.Errorf("first sync: %d encoded, %d reused; want 10, 0", first.Encoded, first.Reused)
	}
	// A rolling update's second hook call in the same sync.
	sameBytes("second call of the first sync", first)
	if first.Encoded != 10 || first.Reused != 10 {
		t.Errorf("second call: %d encoded, %d reused; want 10, 10", first.Encoded, first.Reused)
	}

	// p1-3 changes, with a new resourceVersion; p1-9 is deleted.
	changed := req.Children["ConfigMap.v1"]["p1-3"].DeepCopy()
	changed.SetResourceVersion("99999")
	changed.Object["data"] = map[string]interface{}{"index": "changed"}
	req.Children["ConfigMap.v1"]["p1-3"] = changed
	delete(req.Children["ConfigMap.v1"], "p1-9")
	second := cache.Parent("bench-0/p1")
	body := sameBytes("second sync", second)
	if second.Encoded != 1 || second.Reused != 8 {
		t.Errorf("second sync: %d encoded, %d reused; want 1 (the changed child), 8", second.Encoded, second.Reused)
	}
	if !strings.Contains(body, `"index":"changed"`) {
		t.Errorf("the changed child's new content is not sent: %s", body)
	}
	if _, kept := second.used[types.UID("7c2c3d4e-0000-4000-8000-000000000009")]; kept || len(second.used) != 9 {
		t.Errorf("after the second sync the parent keeps %d encodings (the deleted child's: %v), want the 9 it sent", len(second.used), kept)
	}

	// An object without a UID or resourceVersion (an inline preview's)
	// is encoded each time and kept nowhere.
	bare := obj("v1", "ConfigMap", "bench-0", "bare")
	req.Children.Insert(v1alpha1.HookVersionV1, bare)
	third := cache.Parent("bench-0/p1")
	sameBytes("third sync", third)
	sameBytes("third sync again", third)
	if third.Encoded != 2 || len(third.used) != 9 {
		t.Errorf("third sync: %d encoded, %d kept; want 2 (the bare object twice), 9", third.Encoded, len(third.used))
	}

	cache.Forget("bench-0/p1")
	if len(cache.parents) != 0 {
		t.Errorf("a forgotten parent's encodings are kept: %v", cache.parents)
	}
	if fresh := cache.Parent("bench-0/p1"); fresh.last != nil {
		t.Errorf("a forgotten parent's next sync starts from %d encodings", len(fresh.last))
	}
}

// The controller's encoding is kept for the loop's next requests, of any
// parent, and written again when the controller is another object or
// was changed: every request is, byte for byte, encoding/json's.
func TestEncodingsKeepTheControllersEncodingUntilItChanges(t *testing.T) {
	var cache EncodingCache
	req := b2Request()
	sameBytes := func(what string) string {
		t.Helper()
		return marshalsAsWithout(t, what, req, cache.Parent(req.Parent.GetNamespace()+"/"+req.Parent.GetName()))
	}
	sameBytes("first request")
	if cache.controller != req.Controller || len(cache.controllerJSON) == 0 {
		t.Fatalf("the controller's encoding is not kept after the first request")
	}
	kept := cache.controllerJSON
	req.Parent.SetName("p2")
	sameBytes("another parent's request")
	if &cache.controllerJSON[0] != &kept[0] {
		t.Errorf("the same controller was encoded again for another parent")
	}

	// The controller changed: a new object, as the informer gives.
	changed := req.Controller.DeepCopy()
	changed.ResourceVersion = "1300"
	changed.Spec.Hooks.Sync.Webhook.URL = ptr.To("http://127.0.0.1:41234/changed")
	req.Controller = changed
	if body := sameBytes("after the controller changed"); !strings.Contains(body, "/changed") {
		t.Errorf("the changed controller is not sent: %s", body)
	}
	// The same object at another resourceVersion is not trusted either.
	changed.ResourceVersion = "1301"
	changed.Spec.Hooks.Sync.Webhook.URL = ptr.To("http://127.0.0.1:41234/changed-again")
	if body := sameBytes("the same object at another resourceVersion"); !strings.Contains(body, "/changed-again") {
		t.Errorf("the controller changed in place is not sent: %s", body)
	}
	req.Controller = nil
	sameBytes("no controller")
}

// BenchmarkSyncHookRequestMarshalJSON is the encoding of a B2 parent's
// sync request as the hook client encodes it (MarshalJSON, its bytes sent
// as they are): "encoding-json" as encoding/json wrote it before
// SyncHookRequest had a MarshalJSON, "uncached" as a sync without
// Encodings (a /sync preview) writes it, "unchanged-children" a loop's
// sync of the parent whose children did not change since its last, and
// "unchanged-children-through-json.Marshal" the same as the hook client
// encoded it before it called MarshalJSON itself.
func BenchmarkSyncHookRequestMarshalJSON(b *testing.B) {
	b.Run("encoding-json", func(b *testing.B) {
		req := b2Request()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal((*plainRequest)(req)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("uncached", func(b *testing.B) {
		req := b2Request()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := req.MarshalJSON(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, c := range []struct {
		name    string
		marshal func(*SyncHookRequest) ([]byte, error)
	}{
		{"unchanged-children", (*SyncHookRequest).MarshalJSON},
		{"unchanged-children-through-json.Marshal", func(r *SyncHookRequest) ([]byte, error) { return json.Marshal(r) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			req := b2Request()
			var cache EncodingCache
			req.Encodings = cache.Parent("bench-0/p1")
			if _, err := c.marshal(req); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				req.Encodings = cache.Parent("bench-0/p1")
				if _, err := c.marshal(req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
