package plugin

import (
	"bytes"
	"strings"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

func TestPlanTable(t *testing.T) {
	plan := []v1alpha1.SyncPlanItem{
		{Action: v1alpha1.SyncActionCreate, Kind: "ConfigMap", Namespace: "ns", Name: "p-a", Reason: "returned by the hook and not observed"},
		{Action: v1alpha1.SyncActionUpdate, Kind: "ConfigMap", Namespace: "ns", Name: "p-b", Reason: "differs", Diff: []string{`data.a: "1" -> "2"`, `- data.b: "x"`}},
		{Action: v1alpha1.SyncActionRecreate, Kind: "Service", Namespace: "ns", Name: "p", Diff: []string{`spec.type: "A" -> "B"`}},
		{Action: v1alpha1.SyncActionUnchanged, Kind: "ClusterRole", Name: "r"},
	}
	var out bytes.Buffer
	if err := writePlanTable(&out, plan); err != nil {
		t.Fatal(err)
	}
	want := `ACTION      KIND          NAMESPACE/NAME   CHANGES
Create      ConfigMap     ns/p-a           returned by the hook and not observed
Update      ConfigMap     ns/p-b           2 changes
Recreate    Service       ns/p             1 change
Unchanged   ClusterRole   r                -
`
	if out.String() != want {
		t.Errorf("table =\n%s\nwant\n%s", out.String(), want)
	}
}

func TestEmptyPlanTable(t *testing.T) {
	var out bytes.Buffer
	if err := writePlanTable(&out, nil); err != nil {
		t.Fatal(err)
	}
	if out.String() != "No children: the hook returns none and the parent has none.\n" {
		t.Errorf("empty plan printed %q", out.String())
	}
}

func TestChanges(t *testing.T) {
	unchanged := v1alpha1.SyncPlanItem{Action: v1alpha1.SyncActionUnchanged, Diff: []string{"OnDelete keeps this"}}
	if changes(nil) || changes([]v1alpha1.SyncPlanItem{unchanged}) {
		t.Error("a plan of Unchanged items changes nothing")
	}
	for _, action := range []v1alpha1.SyncAction{v1alpha1.SyncActionCreate, v1alpha1.SyncActionUpdate, v1alpha1.SyncActionRecreate,
		v1alpha1.SyncActionDelete, v1alpha1.SyncActionAdopt, v1alpha1.SyncActionOrphan} {
		if !changes([]v1alpha1.SyncPlanItem{unchanged, {Action: action}}) {
			t.Errorf("a plan with %s changes something", action)
		}
	}
}

func TestRolloutSummary(t *testing.T) {
	var b strings.Builder
	if err := writeRollout(&b, &v1alpha1.SyncRollout{
		Reason: "RolloutWaiting", Message: `waiting for Widget p-c: condition "Ready" is missing`, LatestRevision: "new",
		Revisions: []v1alpha1.SyncRevision{{Name: "new", Children: 3}, {Name: "old", Children: 2}},
	}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`Rolling update: RolloutWaiting: waiting for Widget p-c: condition "Ready" is missing`, "ControllerRevision new (latest): 3 children", "ControllerRevision old: 2 children"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
	b.Reset()
	if writeRollout(&b, nil); b.Len() != 0 {
		t.Errorf("no rollout printed %q", b.String())
	}
}

func TestPatchSteps(t *testing.T) {
	var b strings.Builder
	if err := writePatches(&b, []v1alpha1.SyncPatchStep{
		{Name: "team", Skipped: true, Reason: "enabledIf is false"},
		{Name: "shout", Changes: []v1alpha1.SyncPatchChange{{Kind: "ConfigMap", Namespace: "ns", Name: "p-a", Diff: []string{`data.greeting: "hi" -> "HI"`}}}},
		{Name: "noop"},
	}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"team: skipped (enabledIf is false)", `ConfigMap ns/p-a: data.greeting: "hi" -> "HI"`, "noop: changed nothing"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("steps lack %q:\n%s", want, b.String())
		}
	}
}
