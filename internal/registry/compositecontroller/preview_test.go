package compositecontroller

import (
	"context"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/install"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
	"github.com/composite-apiserver/composite-apiserver/internal/registry/controllerregistry"
)

// previewed records what it was asked to preview.
type previewed struct {
	cc       *v1alpha1.CompositeController
	proposed bool
	calls    int
}

func (p *previewed) Preview(_ context.Context, controller runtime.Object, proposed bool, _ *v1alpha1.FleetPreviewSpec) (*v1alpha1.FleetPreviewStatus, error) {
	p.cc, p.proposed = controller.(*v1alpha1.CompositeController), proposed
	p.calls++
	return &v1alpha1.FleetPreviewStatus{Totals: v1alpha1.FleetPreviewTotals{Parents: 1}}, nil
}

func newPreviewREST(t *testing.T, stored *metacontroller.CompositeController) (*controllerregistry.PreviewREST, *previewed) {
	t.Helper()
	stored.ResourceVersion = "7"
	scheme := runtime.NewScheme()
	install.Install(scheme)
	s := NewStrategy(scheme)
	var err error
	if s.destinations, err = hooks.ParseDestinations([]string{"169.254.0.0/16"}); err != nil {
		t.Fatal(err)
	}
	p := &previewed{}
	return controllerregistry.NewPreviewREST(&laggingCache{obj: stored}, scheme, s, kind(scheme), p), p
}

// A proposal is validated as an update of the stored controller would be,
// hook destinations included, and its errors name the field where the
// request holds it; nothing is previewed then.
func TestPreviewValidatesTheProposalAsAnUpdate(t *testing.T) {
	stored := validCompositeController("hello")
	rest, p := newPreviewREST(t, stored)
	proposal := stored.Spec.DeepCopy()
	proposal.Hooks.Sync.Webhook.URL = ptr.To("http://169.254.169.254/latest/meta-data")
	req := &metacontroller.FleetPreview{Spec: metacontroller.FleetPreviewSpec{CompositeController: proposal, Limit: -1}}
	_, err := rest.Create(context.Background(), "hello", req, nil, &metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("a proposal calling a denied address: %v, want Invalid", err)
	}
	var fields []string
	for _, c := range err.(apierrors.APIStatus).Status().Details.Causes {
		fields = append(fields, c.Field)
	}
	if want := []string{"spec.limit", "spec.compositeController.hooks.sync.webhook.url"}; !reflect.DeepEqual(fields, want) {
		t.Errorf("fields %q, want %q", fields, want)
	}
	if p.calls != 0 {
		t.Errorf("an invalid proposal was previewed")
	}
}

// The previewer gets the stored controller with the proposed spec, or the
// stored one as it is when nothing is proposed.
func TestPreviewPreviewsTheProposalOfTheStoredController(t *testing.T) {
	stored := validCompositeController("hello")
	stored.UID = "uid-1"
	rest, p := newPreviewREST(t, stored)
	proposal := stored.Spec.DeepCopy()
	proposal.Hooks.Sync.Webhook.URL = ptr.To("http://hello-v2.default/sync")
	for _, tc := range []struct {
		name     string
		spec     *metacontroller.CompositeControllerSpec
		wantURL  string
		proposed bool
	}{
		{"a proposal", proposal, "http://hello-v2.default/sync", true},
		{"the stored controller", nil, "http://hello.default/sync", false},
	} {
		out, err := rest.Create(context.Background(), "hello", &metacontroller.FleetPreview{Spec: metacontroller.FleetPreviewSpec{CompositeController: tc.spec}}, nil, &metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := *p.cc.Spec.Hooks.Sync.Webhook.URL; got != tc.wantURL || p.proposed != tc.proposed || p.cc.Name != "hello" || p.cc.UID != "uid-1" {
			t.Errorf("%s: previewed %s %s at %s (proposed %v), want hello uid-1 at %s (%v)", tc.name, p.cc.Name, p.cc.UID, got, p.proposed, tc.wantURL, tc.proposed)
		}
		if answer := out.(*metacontroller.FleetPreview); answer.Name != "hello" || answer.Status.Totals.Parents != 1 {
			t.Errorf("%s: answer %+v", tc.name, answer)
		}
	}
}
