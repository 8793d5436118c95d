package plugin

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned/fake"
)

// fakeFleet answers /preview with pages, each after the other through
// continue tokens "1", "2", ..., and records the requests.
type fakeFleet struct {
	pages    []v1alpha1.FleetPreviewStatus
	requests []*v1alpha1.FleetPreview
}

func (f *fakeFleet) server() *fakeServer {
	s := &fakeServer{client: fake.NewClientset()}
	s.client.PrependReactor("create", "compositecontrollers", func(action clienttesting.Action) (bool, runtime.Object, error) {
		create := action.(clienttesting.CreateActionImpl)
		if create.GetSubresource() != "preview" {
			return false, nil, nil
		}
		req := create.GetObject().(*v1alpha1.FleetPreview)
		f.requests = append(f.requests, req.DeepCopy())
		i := 0
		if req.Spec.Continue != "" {
			i = int(req.Spec.Continue[0] - '0')
		}
		out := req.DeepCopy()
		out.Status = f.pages[i]
		return true, out, nil
	})
	return s
}

const proposedHello = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata: {name: hello}
spec:
  parentResource: {apiVersion: example.com/v1, resource: hellos}
  childResources: [{apiVersion: v1, resource: configmaps}]
  hooks: {sync: {webhook: {url: "http://hook.example/v2/sync"}}}
`

func parentAt(name string, counts v1alpha1.FleetPreviewCounts, changes ...v1alpha1.SyncPlanItem) v1alpha1.FleetPreviewParent {
	return v1alpha1.FleetPreviewParent{Namespace: "ns", Name: name, Counts: counts, Changes: changes}
}

func TestFleetPreviewFollowsContinueTokensAndExitsAsKubectlDiff(t *testing.T) {
	update := v1alpha1.SyncPlanItem{Action: v1alpha1.SyncActionUpdate, APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "p2-cm",
		Reason: "differs", Diff: []string{`data.color: "blue" -> "teal"`}}
	unchanged := v1alpha1.FleetPreviewCounts{Unchanged: 1}
	f := &fakeFleet{pages: []v1alpha1.FleetPreviewStatus{
		{Parents: []v1alpha1.FleetPreviewParent{parentAt("p1", unchanged)}, Totals: v1alpha1.FleetPreviewTotals{Parents: 1, Counts: unchanged}, Continue: "1"},
		{Parents: []v1alpha1.FleetPreviewParent{parentAt("p2", v1alpha1.FleetPreviewCounts{Update: 1}, update)},
			Totals: v1alpha1.FleetPreviewTotals{Parents: 1, Changed: 1, Counts: v1alpha1.FleetPreviewCounts{Update: 1}}},
	}}
	file := writeFile(t, "proposed.yaml", proposedHello)
	r := f.server().run(t, "", "preview", "--all-parents", "-f", file, "--chunk-size", "1")
	if r.code != ExitChanges {
		t.Errorf("exit %d, want %d; stderr %q", r.code, ExitChanges, r.stderr)
	}
	for _, want := range []string{"PARENT", "ns/p1", "ns/p2", "2 parents: 1 would change, 0 can't be previewed; children: 0 to create, 1 to update, 0 to delete, 1 unchanged"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("table lacks %q:\n%s", want, r.stdout)
		}
	}
	if len(f.requests) != 2 || f.requests[1].Spec.Continue != "1" || f.requests[0].Spec.Limit != 1 {
		t.Fatalf("requests %+v: want two, the second with the first's continue token", f.requests)
	}
	if url := f.requests[0].Spec.CompositeController.Hooks.Sync.Webhook.URL; url == nil || *url != "http://hook.example/v2/sync" {
		t.Errorf("the proposed spec was not sent: %+v", f.requests[0].Spec.CompositeController)
	}

	f.requests = nil
	r = f.server().run(t, "", "preview", "--all-parents", "-f", file, "-o", "diff")
	if r.code != ExitChanges || !strings.Contains(r.stdout, "# ns/p2\n--- live/v1.ConfigMap.ns.p2-cm\n") || !strings.Contains(r.stdout, `+data.color: "teal"`) || strings.Contains(r.stdout, "ns/p1") {
		t.Errorf("-o diff: exit %d\n%s", r.code, r.stdout)
	}

	// Nothing changes: 0; a parent fails: 2, with one line on stderr.
	f = &fakeFleet{pages: []v1alpha1.FleetPreviewStatus{{Parents: []v1alpha1.FleetPreviewParent{parentAt("p1", unchanged)}, Totals: v1alpha1.FleetPreviewTotals{Parents: 1}}}}
	if r := f.server().run(t, "", "preview", "hello", "--all-parents"); r.code != ExitOK || f.requests[0].Spec.CompositeController != nil {
		t.Errorf("the stored controller, unchanged: exit %d, sent %+v", r.code, f.requests[0].Spec)
	}
	failed := parentAt("p1", v1alpha1.FleetPreviewCounts{})
	failed.Error = "the hook answered 500"
	f = &fakeFleet{pages: []v1alpha1.FleetPreviewStatus{{Parents: []v1alpha1.FleetPreviewParent{failed}, Totals: v1alpha1.FleetPreviewTotals{Parents: 1, Failed: 1}}}}
	r = f.server().run(t, "", "preview", "--selector", "tier=gold", "-f", file)
	r.oneErrorLine(t, "1 of the 1 parents can't be previewed")
	if !strings.Contains(r.stdout, "the hook answered 500") || f.requests[0].Spec.Selector.MatchLabels["tier"] != "gold" {
		t.Errorf("a failing parent: stdout\n%s\nselector %+v", r.stdout, f.requests[0].Spec.Selector)
	}
}

func TestFleetPreviewRefusesWhatIsNotAProposal(t *testing.T) {
	for _, tc := range []struct {
		name, file string
		args       []string
		want       string
	}{
		{"a parent", "apiVersion: example.com/v1\nkind: Hello\nmetadata: {name: p}\n", nil, "must hold one CompositeController"},
		{"a misspelt field", strings.Replace(proposedHello, "childResources", "childResource", 1), nil, `unknown field "spec.childResource"`},
		{"another controller", proposedHello, []string{"other"}, `proposes CompositeController "hello", not CompositeController "other"`},
		{"a controller of another kind", proposedHello, []string{"dec/hello"}, `proposes CompositeController "hello", not DecoratorController "hello"`},
		{"one parent's flags", proposedHello, []string{"--parent", "ns/p"}, "preview one parent"},
	} {
		f := &fakeFleet{}
		args := append([]string{"preview", "--all-parents", "-f", writeFile(t, "proposed.yaml", tc.file)}, tc.args...)
		r := f.server().run(t, "", args...)
		if r.code != ExitError || !strings.Contains(r.stderr, tc.want) || len(f.requests) > 0 {
			t.Errorf("%s: exit %d, stderr %q, %d requests; want %q and none", tc.name, r.code, r.stderr, len(f.requests), tc.want)
		}
	}
}
