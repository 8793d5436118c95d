package engine

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// encodingHook is a sync hook as a webhook is one: it encodes its request,
// says the bytes it sent and answers the children it was given back.
type encodingHook struct{ sent [][]byte }

func (h *encodingHook) SyncSent(_ context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, []byte, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, nil, err
	}
	h.sent = append(h.sent, body)
	return &hookapi.SyncHookResponse{Children: []*unstructured.Unstructured{cm("a", "blue"), cm("b", "blue")}}, body, nil
}

// The loop's syncs send the observed children themselves, not copies, and
// through the parent's Encodings: its second sync sends the same bytes as
// its first without encoding the children again, a child with a new
// resourceVersion is encoded again, and nothing of the input (an informer
// cache's objects) is modified.
func TestComputeEncodesObservedChildrenOnce(t *testing.T) {
	children := Claimed{Owned: []*unstructured.Unstructured{owned(cm("a", "blue")), owned(cm("b", "blue"))}}
	for _, obj := range children.Owned {
		obj.SetResourceVersion("10")
	}
	parent := newParent()
	cc := newController()
	before := []interface{}{children.Owned[0].DeepCopy(), children.Owned[1].DeepCopy(), parent.DeepCopy(), cc.DeepCopy()}
	hook := &encodingHook{}
	var cache hookapi.EncodingCache
	sync := func() (*Plan, *hookapi.Encodings) {
		t.Helper()
		in := newInput(cc, parent, children, nil)
		in.Hooks.Sync = hook
		in.Encodings = cache.Parent("ns/p")
		plan, err := Compute(context.Background(), in)
		if err != nil {
			t.Fatal(err)
		}
		return plan, in.Encodings
	}

	first, enc := sync()
	if enc.Encoded != 2 || enc.Reused != 0 {
		t.Errorf("first sync: %d children encoded, %d reused; want 2, 0", enc.Encoded, enc.Reused)
	}
	if first.HookRequest.Children["ConfigMap.v1"]["a"] != children.Owned[0] {
		t.Errorf("the hook request holds a copy of the observed child")
	}
	second, enc := sync()
	if enc.Encoded != 0 || enc.Reused != 2 {
		t.Errorf("second sync: %d children encoded, %d reused; want 0, 2", enc.Encoded, enc.Reused)
	}
	if string(hook.sent[1]) != string(hook.sent[0]) || string(second.HookRequestJSON) != string(hook.sent[1]) {
		t.Errorf("second sync sent\n%s\nfirst\n%s", hook.sent[1], hook.sent[0])
	}
	after := []interface{}{children.Owned[0], children.Owned[1], parent, cc}
	if !reflect.DeepEqual(before, after) {
		t.Errorf("input modified")
	}

	changed := children.Owned[1].DeepCopy()
	changed.SetResourceVersion("11")
	unstructured.SetNestedField(changed.Object, "green", "data", "color")
	children.Owned[1] = changed
	third, enc := sync()
	if enc.Encoded != 1 || enc.Reused != 1 {
		t.Errorf("a child changed: %d children encoded, %d reused; want 1, 1", enc.Encoded, enc.Reused)
	}
	var sent hookapi.SyncHookRequest
	if err := json.Unmarshal(third.HookRequestJSON, &sent); err != nil {
		t.Fatal(err)
	}
	if color, _, _ := unstructured.NestedString(sent.Children["ConfigMap.v1"]["b"].Object, "data", "color"); color != "green" {
		t.Errorf("the changed child was sent with color %q, want its new one, green", color)
	}
}
