package fleetpreview

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/definition/definitiontest"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
	"github.com/composite-apiserver/composite-apiserver/internal/reconcile"
	"github.com/composite-apiserver/composite-apiserver/internal/rights"
	"github.com/composite-apiserver/composite-apiserver/internal/syncrequest"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

type noObjects struct{}

func (noObjects) List(context.Context, schema.GroupVersionResource, string, labels.Selector) ([]*unstructured.Unstructured, error) {
	return nil, nil
}

func (noObjects) Namespaces(context.Context, labels.Selector) ([]string, error) { return nil, nil }

type countingHook struct{ calls atomic.Int32 }

func (h *countingHook) Sync(context.Context, *hookapi.SyncHookRequest) (*hookapi.SyncHookResponse, error) {
	h.calls.Add(1)
	return &hookapi.SyncHookResponse{}, nil
}

// A fleet preview of a controller with an identity sends its hook only the
// parents (and children) that identity may list, as the loop and /sync do,
// whoever previews: a parent in a namespace where it may not is that
// parent's error, and its hook is not called for it.
func TestFleetPreviewChecksWhatTheIdentityMayRead(t *testing.T) {
	sa := v1alpha1.ServiceAccountReference{Namespace: "t", Name: "bot"}
	subject := rights.ServiceAccountSubject(sa)
	// The identity may list in its namespace only; anyone else (the
	// caller, an administrator) everywhere.
	authz := authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
		if a.GetUser().GetName() == subject.User.GetName() && a.GetNamespace() != "t" {
			return authorizer.DecisionNoOpinion, "no RBAC rule", nil
		}
		return authorizer.DecisionAllow, "", nil
	})
	cc := definitiontest.ConfigMapController("alice-ctl", "0e7c1f1e-0000-4000-8000-0000000000aa", "http://hook.invalid/sync")
	cc.Spec.ServiceAccount = &sa
	cc.Spec.GenerateSelector = ptr.To(true)
	def := definitiontest.Compile(t, cc)
	hook := &countingHook{}
	rec := &reconcile.Controller{Def: def, Hooks: engine.Hooks{Sync: engine.InProcess(hook)}}
	env := reconcile.Env{Resolver: definition.GuessingResolver(), Children: noObjects{}, Related: noObjects{}}
	f := &fleet{def: def, act: &rights.Actor{Subject: subject, Readers: []rights.Subject{subject}}, authz: syncrequest.NewRequestAuthorizer(authz), allowed: map[string]error{}}

	for _, tc := range []struct {
		namespace string
		refused   bool
	}{{"t", false}, {"x", true}} {
		parent := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "example.com/v1", "kind": "Hello"}}
		parent.SetNamespace(tc.namespace)
		parent.SetName("w")
		parent.SetUID("0e7c1f1e-0000-4000-8000-0000000000bb")
		before := hook.calls.Load()
		out := f.previewParent(context.Background(), rec, env, parent)
		called := hook.calls.Load() > before
		switch {
		case tc.refused && (called || !strings.Contains(out.Error, "ServiceAccount t/bot may not list")):
			t.Errorf("namespace %s: hook called %v, error %q; want no call and a refusal naming the ServiceAccount", tc.namespace, called, out.Error)
		case !tc.refused && (!called || out.Error != ""):
			t.Errorf("namespace %s: hook called %v, error %q; want a preview", tc.namespace, called, out.Error)
		}
	}
}
