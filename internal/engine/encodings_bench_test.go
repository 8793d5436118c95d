package engine

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// emptyAnswer is a sync hook as a webhook is one, that encodes its
// request as the webhook client does and answers nothing.
type emptyAnswer struct{}

func (emptyAnswer) SyncSent(_ context.Context, req *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, []byte, error) {
	body, err := req.MarshalJSON()
	return &hookapi.SyncHookResponse{}, body, err
}

// b2Input is a B2 parent's sync by the loop: 10 observed ConfigMaps, as the
// informer holds them, and a webhook.
func b2Input() Input {
	var children Claimed
	for i := range 10 {
		child := owned(cm(fmt.Sprintf("p-%d", i), "blue"))
		child.SetResourceVersion(fmt.Sprint(1000 + i))
		children.Owned = append(children.Owned, child)
	}
	in := newInput(newController(), newParent(), children, nil)
	in.Hooks.Sync = emptyAnswer{}
	return in
}

// benchmarkHookRequest is the hook request of one sync of in's parent:
// what desire builds, encodes and sends to the webhook (the answer, empty,
// costs next to nothing).
func benchmarkHookRequest(b *testing.B, in Input, before func(*Input)) {
	b.ReportAllocs()
	for b.Loop() {
		before(&in)
		c := &computation{in: in, plan: &Plan{}, gvrs: map[schema.GroupVersionKind]resolved{}}
		if _, _, err := c.desire(context.Background(), c.chooseHook(), in.Parent); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkHookRequest is a B2 parent's hook request, from its observed
// children to the bytes sent: "no-encodings" as a /sync preview makes it
// (and, with the objects copied first, as every sync did before issue 34),
// "unchanged-children" a sync of the loop whose children did not change
// since the parent's last.
func BenchmarkHookRequest(b *testing.B) {
	b.Run("no-encodings", func(b *testing.B) {
		benchmarkHookRequest(b, b2Input(), func(*Input) {})
	})
	b.Run("unchanged-children", func(b *testing.B) {
		var cache hookapi.EncodingCache
		in := b2Input()
		in.Encodings = cache.Parent("ns/p")
		if _, err := Compute(context.Background(), in); err != nil {
			b.Fatal(err)
		}
		benchmarkHookRequest(b, in, func(in *Input) { in.Encodings = cache.Parent("ns/p") })
	})
}

// BenchmarkValidateAnswer is the check of a B2 hook's answer, as the loop
// makes it for each sync: 10 ConfigMaps decoded from JSON, without a
// namespace or the controller-uid label, which generateSelector adds.
func BenchmarkValidateAnswer(b *testing.B) {
	in := b2Input()
	in.Definition = compile(newController(withGenerateSelector))
	resp := &hookapi.SyncHookResponse{}
	for i := range 10 {
		child := &unstructured.Unstructured{}
		if err := child.UnmarshalJSON(fmt.Appendf(nil, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"p-%d"},"data":{"index":"%d"}}`, i, i)); err != nil {
			b.Fatal(err)
		}
		resp.Children = append(resp.Children, child)
	}
	b.ReportAllocs()
	for b.Loop() {
		c := &computation{in: in, plan: &Plan{}, gvrs: map[schema.GroupVersionKind]resolved{}}
		if desired, err := c.validate(definition.HookSync, resp); err != nil || len(desired) != 10 {
			b.Fatal(len(desired), err)
		}
	}
}
