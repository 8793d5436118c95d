package rights

import (
	"context"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition/definitiontest"
)

func controller() *v1alpha1.CompositeController {
	return &v1alpha1.CompositeController{
		ObjectMeta: metav1.ObjectMeta{Name: "things"},
		Spec: v1alpha1.CompositeControllerSpec{
			ParentResource: v1alpha1.CompositeControllerParentResourceRule{ResourceRule: v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "things"}},
			ChildResources: []v1alpha1.CompositeControllerChildResourceRule{
				{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"}},
				{ResourceRule: v1alpha1.ResourceRule{APIVersion: "apps/v1", Resource: "deployments"}},
			},
		},
	}
}

// allowing answers access reviews: allowed unless the resource is listed.
func allowing(denied ...string) *fake.Clientset {
	client := fake.NewClientset()
	client.PrependReactor("create", "selfsubjectaccessreviews", func(a clienttesting.Action) (bool, runtime.Object, error) {
		review := a.(clienttesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		attrs := review.Spec.ResourceAttributes
		review.Status.Allowed = true
		for _, d := range denied {
			if d == attrs.Resource || d == attrs.Resource+"/"+attrs.Subresource {
				review.Status.Allowed = false
			}
		}
		return true, review, nil
	})
	return client
}

func TestMissingNamesEachVerbAndResourceAndTheFix(t *testing.T) {
	c := &Checker{Kube: allowing("things", "deployments")}
	msg, err := c.MissingRights(context.Background(), controller())
	if err != nil {
		t.Fatal(err)
	}
	want := "composite-apiserver may not get, list, watch, patch things.example.com; update things.example.com/status; list, watch, create, patch, delete deployments.apps in the target cluster; " +
		"grant it with `kubectl composite rbac things | kubectl apply -f -`"
	if msg != want {
		t.Errorf("message\n%s\nwant\n%s", msg, want)
	}
}

func TestNothingMissingSaysNothing(t *testing.T) {
	c := &Checker{Kube: allowing()}
	msg, err := c.MissingRights(context.Background(), controller())
	if err != nil || msg != "" {
		t.Errorf("message %q, err %v", msg, err)
	}
}

func TestNeededCoversWhatTheLoopDoes(t *testing.T) {
	needed := Needed(definitiontest.Compile(t, controller()))
	have := map[string]bool{}
	for _, r := range needed {
		have[r.String()] = true
	}
	for _, want := range []string{"update things.example.com/status", "patch things.example.com", "create configmaps", "delete deployments.apps", "create events"} {
		if !have[want] {
			t.Errorf("needed rights lack %q: %v", want, needed)
		}
	}
}
