package loop

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// TestFleetPreviewReadsWhatTheLoopHolds: with the loop running, a fleet
// preview reads the children the loop caches (ConfigMaps) and lists the
// ones it does not (the Secrets a proposal adds): converged parents show
// their ConfigMaps unchanged and, under a proposed hook deployment that
// also returns a Secret, exactly that Secret to create; a parent only a
// proposal selects, its ConfigMaps to create.
func TestFleetPreviewReadsWhatTheLoopHolds(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	ns := suite.Namespace(t, "loop-fleet")
	c := framework.HelloController{Name: "loop-fleet", HookURL: hook.URL}
	c.Create(t, suite)
	const parents = 4
	for i := 0; i < parents; i++ {
		suite.CreateHello(t, ns, fmt.Sprintf("p%d", i), c.Name, map[string]interface{}{"color": "blue", "configMaps": []interface{}{"a", "b"}})
	}
	for i := 0; i < parents; i++ {
		suite.WaitObserved(t, ns, fmt.Sprintf("p%d", i), 1)
	}

	// The new deployment of the hook: the same answers plus a Secret.
	suite.SetUpHellos(t)
	proposedHook := suite.Hook(t)
	if err := proposedHook.SetMode("undeclared"); err != nil {
		t.Fatal(err)
	}
	stored, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(context.Background(), c.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	spec := stored.Spec.DeepCopy()
	url := proposedHook.URL + "/sync"
	spec.Hooks.Sync.Webhook.URL = &url
	spec.ChildResources = append(spec.ChildResources, v1alpha1.CompositeControllerChildResourceRule{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "secrets"}})

	// A parent the stored controller does not select, whose children the
	// loop never made: a proposal that selects it creates them, which the
	// cache is asked about by name.
	suite.CreateHello(t, ns, "w0", "loop-fleet-wave", map[string]interface{}{"color": "blue", "configMaps": []interface{}{"a", "b"}})
	wave := stored.Spec.DeepCopy()
	wave.ParentResource.LabelSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"test": "loop-fleet-wave"}}

	for _, tc := range []struct {
		name      string
		spec      *v1alpha1.CompositeControllerSpec
		parents   int
		unchanged int32
		want      func(parent string) []string
	}{
		{"the stored controller", nil, parents, 2, func(string) []string { return nil }},
		{"the proposal", spec, parents, 2, func(parent string) []string { return []string{"Create Secret " + parent + "-sneaky"} }},
		{"another selector", wave, 1, 0, func(parent string) []string {
			return []string{"Create ConfigMap " + parent + "-a", "Create ConfigMap " + parent + "-b"}
		}},
	} {
		answer, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Preview(context.Background(), c.Name, &v1alpha1.FleetPreview{
			Spec: v1alpha1.FleetPreviewSpec{CompositeController: tc.spec},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if n := len(answer.Status.Parents); n != tc.parents {
			t.Errorf("%s: %d parents, want %d", tc.name, n, tc.parents)
		}
		for _, p := range answer.Status.Parents {
			var changes []string
			for _, item := range p.Changes {
				changes = append(changes, strings.Join([]string{string(item.Action), item.Kind, item.Name}, " "))
			}
			sort.Strings(changes)
			want := tc.want(p.Name)
			if strings.Join(changes, "\n") != strings.Join(want, "\n") || p.Counts.Unchanged != tc.unchanged || p.Error != "" {
				t.Errorf("%s, parent %s: changes %q, %d unchanged, error %q; want %q and %d unchanged", tc.name, p.Name, changes, p.Counts.Unchanged, p.Error, want, tc.unchanged)
			}
		}
	}
}
