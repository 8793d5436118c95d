package plugin

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

func TestDiffLines(t *testing.T) {
	for _, tc := range []struct {
		line string
		want []string
	}{
		{`data.color: "blue" -> "green"`, []string{`-data.color: "blue"`, `+data.color: "green"`}},
		{`- data.size: "L"`, []string{`-data.size: "L"`}},
		{`data.size: <none> -> "L"`, []string{`+data.size: "L"`}},
		{`metadata.labels["a.b/c"]: <none> -> "x"`, []string{`+metadata.labels["a.b/c"]: "x"`}},
		{`spec.replicas: 1 -> 3`, []string{`-spec.replicas: 1`, `+spec.replicas: 3`}},
		{`- spec.ports[port=81,protocol="TCP"]: {"port":81,"protocol":"TCP"}`, []string{`-spec.ports[port=81,protocol="TCP"]: {"port":81,"protocol":"TCP"}`}},
		// An arrow or a colon inside a JSON string is part of the value.
		{`data.note: "a -> b" -> "c: d"`, []string{`-data.note: "a -> b"`, `+data.note: "c: d"`}},
		{`data["x: y"]: "1" -> "2"`, []string{`-data["x: y"]: "1"`, `+data["x: y"]: "2"`}},
		// Ownership without a change of value is context.
		{`data.color: "blue" (adopt)`, []string{` data.color: "blue" (adopt)`}},
		{`metadata.labels.team: "a" (release)`, []string{` metadata.labels.team: "a" (release)`}},
		{`managedFields: apiVersion "v1beta1" -> "v1"`, []string{` managedFields: apiVersion "v1beta1" -> "v1"`}},
		{`something else entirely`, []string{` something else entirely`}},
	} {
		if got := diffLines(tc.line); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("diffLines(%q) = %q, want %q", tc.line, got, tc.want)
		}
	}
}

func TestUnifiedDiffOfAnUpdate(t *testing.T) {
	item := v1alpha1.SyncPlanItem{
		Action: v1alpha1.SyncActionUpdate, APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "p-a",
		Reason: "differs; updateStrategy InPlace updates it in place",
		Diff:   []string{`- data.size: "L"`, `data.color: "blue" -> "green"`, `data.new: <none> -> "x"`, `data.kept: "k" (adopt)`},
	}
	want := `--- live/v1.ConfigMap.ns.p-a
+++ desired/v1.ConfigMap.ns.p-a
@@ -1,3 +1,3 @@ Update: differs; updateStrategy InPlace updates it in place
-data.size: "L"
-data.color: "blue"
+data.color: "green"
+data.new: "x"
 data.kept: "k" (adopt)
`
	if got := unifiedDiff(item); got != want {
		t.Errorf("unifiedDiff =\n%s\nwant\n%s", got, want)
	}
}

func TestUnifiedDiffNamesGroupsAndClusterScopedChildren(t *testing.T) {
	item := v1alpha1.SyncPlanItem{Action: v1alpha1.SyncActionRecreate, APIVersion: "apps/v1", Kind: "Deployment", Namespace: "ns", Name: "web",
		Diff: []string{`- spec.paused: true`}}
	want := "--- live/apps.v1.Deployment.ns.web\n+++ desired/apps.v1.Deployment.ns.web\n@@ -1,1 +0,0 @@ Recreate\n-spec.paused: true\n"
	if got := unifiedDiff(item); got != want {
		t.Errorf("unifiedDiff =\n%s\nwant\n%s", got, want)
	}
	cluster := v1alpha1.SyncPlanItem{Action: v1alpha1.SyncActionUpdate, APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole", Name: "r"}
	if got := diffFileName(cluster); got != "rbac.authorization.k8s.io.v1.ClusterRole.r" {
		t.Errorf("diffFileName = %q", got)
	}
}

func TestWriteDiffsOnlyForUpdatesAndRecreates(t *testing.T) {
	plan := []v1alpha1.SyncPlanItem{
		{Action: v1alpha1.SyncActionCreate, APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "new"},
		{Action: v1alpha1.SyncActionUnchanged, APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "ondelete", Diff: []string{`data.a: "1" -> "2"`}},
		{Action: v1alpha1.SyncActionUpdate, APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "changed", Diff: []string{`data.a: "1" -> "2"`}},
		{Action: v1alpha1.SyncActionDelete, APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "stale"},
	}
	var out bytes.Buffer
	if err := writeDiffs(&out, plan); err != nil {
		t.Fatal(err)
	}
	want := "--- live/v1.ConfigMap.ns.changed\n+++ desired/v1.ConfigMap.ns.changed\n@@ -1,1 +1,1 @@ Update\n-data.a: \"1\"\n+data.a: \"2\"\n"
	if out.String() != want {
		t.Errorf("writeDiffs =\n%s\nwant\n%s", out.String(), want)
	}
}
