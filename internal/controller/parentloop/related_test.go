package parentloop

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

var secrets = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

func hello(name, uid string, generation int64) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.com/v1")
	u.SetKind("Hello")
	u.SetNamespace("ns")
	u.SetName(name)
	u.SetUID(types.UID(uid))
	u.SetGeneration(generation)
	return u
}

func secret(ns, name string, l map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("Secret")
	u.SetNamespace(ns)
	u.SetName(name)
	u.SetLabels(l)
	return u
}

// teamRule answers, for a parent named team-X, a rule selecting Secrets
// labelled team=X, and counts its calls.
type teamRule struct{ calls int }

func (h *teamRule) Customize(_ context.Context, req *hookapi.CustomizeHookRequest) (*hookapi.CustomizeHookResponse, error) {
	h.calls++
	team := req.Parent.GetName()[len("team-"):]
	return &hookapi.CustomizeHookResponse{RelatedResourceRules: []*hookapi.RelatedResourceRule{{
		APIVersion: "v1", Resource: "secrets",
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": team}},
	}}}, nil
}

func TestCustomizeAnswersAreCachedPerParentGeneration(t *testing.T) {
	hook := &teamRule{}
	c := newCustomizeCache(hook, v1alpha1.HookVersionV1)
	ctx := context.Background()
	for _, p := range []*unstructured.Unstructured{hello("team-a", "a", 1), hello("team-a", "a", 1), hello("team-a", "a", 2), hello("team-b", "b", 1)} {
		if _, err := c.Customize(ctx, &hookapi.CustomizeHookRequest{Parent: p}); err != nil {
			t.Fatal(err)
		}
	}
	if hook.calls != 3 {
		t.Errorf("customize hook called %d times, want 3: once per parent UID and generation", hook.calls)
	}
	now := time.Now()
	c.now = func() time.Time { return now.Add(customizeTTL + time.Second) }
	if _, err := c.Customize(ctx, &hookapi.CustomizeHookRequest{Parent: hello("team-a", "a", 2)}); err != nil {
		t.Fatal(err)
	}
	if hook.calls != 4 {
		t.Errorf("an expired answer was served (%d calls)", hook.calls)
	}
}

func TestRelatedChangeFindsExactlyTheParentsWhoseRulesSelectIt(t *testing.T) {
	c := newCustomizeCache(&teamRule{}, v1alpha1.HookVersionV1)
	for _, p := range []*unstructured.Unstructured{hello("team-a", "a", 1), hello("team-b", "b", 1)} {
		if _, err := c.Customize(context.Background(), &hookapi.CustomizeHookRequest{Parent: p}); err != nil {
			t.Fatal(err)
		}
	}
	noNamespaces := func(string) (labels.Set, bool) { return nil, false }
	for _, tc := range []struct {
		name string
		obj  *unstructured.Unstructured
		want []parentRef
	}{
		{"a Secret of team a", secret("ns", "s", map[string]string{"team": "a"}), []parentRef{{"ns", "team-a"}}},
		{"a Secret of no team", secret("ns", "s", nil), nil},
		{"a Secret of team a in another namespace, which a v1 hook does not see", secret("other", "s", map[string]string{"team": "a"}), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := c.selecting(secrets, tc.obj, true, noNamespaces)
			if len(got) != len(tc.want) || (len(got) == 1 && got[0] != tc.want[0]) {
				t.Errorf("parents %v, want %v", got, tc.want)
			}
		})
	}
	c.forget("a")
	if got := c.selecting(secrets, secret("ns", "s", map[string]string{"team": "a"}), true, noNamespaces); len(got) != 0 {
		t.Errorf("a deleted parent is still indexed: %v", got)
	}
}
