package fieldowner

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// podAdmission does to a Pod what kube-apiserver's defaulting and default
// admission plugins do that matters here: fieldRef.apiVersion defaulted
// inside a downward API volume (a list that apply replaces whole),
// DefaultTolerationSeconds' two tolerations appended to the list the hook
// sets, and the ServiceAccount plugin's token volume, which nobody owns.
func podAdmission(obj map[string]interface{}) {
	spec, _ := obj["spec"].(map[string]interface{})
	if spec == nil {
		return
	}
	volumes, _ := spec["volumes"].([]interface{})
	token := false
	for _, v := range volumes {
		vol := v.(map[string]interface{})
		token = token || vol["name"] == "kube-api-access-x"
		if d, ok := vol["downwardAPI"].(map[string]interface{}); ok {
			for _, item := range d["items"].([]interface{}) {
				setDefault(item.(map[string]interface{})["fieldRef"].(map[string]interface{}), "apiVersion", "v1")
			}
		}
	}
	if !token {
		spec["volumes"] = append(volumes, map[string]interface{}{"name": "kube-api-access-x", "emptyDir": map[string]interface{}{}})
	}
	tolerations, _ := spec["tolerations"].([]interface{})
	for _, key := range []string{"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"} {
		found := false
		for _, tol := range tolerations {
			found = found || tol.(map[string]interface{})["key"] == key
		}
		if !found {
			tolerations = append(tolerations, map[string]interface{}{"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": int64(300)})
		}
	}
	spec["tolerations"] = tolerations
}

func hookPod(t *testing.T) *unstructured.Unstructured {
	return object(t, `{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p-0", "namespace": "ns", "labels": {"app": "p"}},
	  "spec": {"containers": [{"name": "main", "image": "v1"}],
	    "tolerations": [{"key": "example.com/dedicated", "operator": "Exists", "effect": "NoSchedule"}],
	    "volumes": [{"name": "info", "downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}}]}}`)
}

// dryRun is what the fake server answers for a dry run of applying
// desired: the object the apply would store, storing nothing.
func (s *fakeServer) dryRun(desired *unstructured.Unstructured) *unstructured.Unstructured {
	s.t.Helper()
	c := *s
	c.live = s.live.DeepCopy()
	c.apply(Sanitize(desired), ours)
	return c.observed()
}

// TestCompareDryRun: Compare's own merge finds a Pod that defaulting and
// admission changed after the apply different from what the hook asks
// for, forever; the server's dry run of the same apply, compared with the
// live Pod, finds it unchanged, while a change the hook makes, and a field
// it stops setting, are still changes, with their lines.
func TestCompareDryRun(t *testing.T) {
	tc := coreV1(t)
	s := newServer(t, tc, schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, podAdmission)
	s.apply(Sanitize(hookPod(t)), ours)
	observed := s.observed()

	local, err := Compare(tc, observed, hookPod(t), ours)
	if err != nil {
		t.Fatal(err)
	}
	if !local.Changed {
		t.Fatalf("the local merge sees what admission did (%+v): the case proves nothing", local)
	}

	for _, c := range []struct {
		name    string
		desired *unstructured.Unstructured
		lines   []string
	}{
		{"the same Pod", hookPod(t), nil},
		{"a new image", edit(hookPod(t), func(o map[string]interface{}) {
			o["spec"].(map[string]interface{})["containers"].([]interface{})[0].(map[string]interface{})["image"] = "v2"
		}), []string{`spec.containers[name="main"].image: "v1" -> "v2"`}},
		{"a label the hook stops setting", remove(hookPod(t), "metadata", "labels", "app"), []string{`- metadata.labels.app: "p"`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := CompareDryRun(tc, observed, s.dryRun(c.desired), ours)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r.Lines, c.lines) || r.Changed != (c.lines != nil) {
				t.Errorf("got changed %v, lines %q, ownership %q; want lines %q", r.Changed, r.Lines, r.Ownership, c.lines)
			}
			if wrote := s.dryRun(c.desired).GetResourceVersion() != observed.GetResourceVersion(); wrote != r.Changed {
				t.Errorf("the apply writes: %v, CompareDryRun said changed: %v", wrote, r.Changed)
			}
		})
	}
}

// BenchmarkCompareDryRun is the CPU a child the local merge finds changed
// costs on top of Compare and the dry-run request: comparing the live Pod
// with the server's answer.
func BenchmarkCompareDryRun(b *testing.B) {
	t := &testing.T{}
	tc := coreV1(t)
	s := newServer(t, tc, schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, podAdmission)
	s.apply(Sanitize(hookPod(t)), ours)
	observed, stored := s.observed(), s.dryRun(hookPod(t))
	b.ReportAllocs()
	for b.Loop() {
		if r, err := CompareDryRun(tc, observed, stored, ours); err != nil || r.Changed {
			b.Fatal(r, err)
		}
	}
}

// BenchmarkComparePod is Compare of the same Pod, for scale.
func BenchmarkComparePod(b *testing.B) {
	t := &testing.T{}
	tc := coreV1(t)
	s := newServer(t, tc, schema.GroupVersionKind{Version: "v1", Kind: "Pod"}, podAdmission)
	s.apply(Sanitize(hookPod(t)), ours)
	observed := s.observed()
	desired := hookPod(t)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Compare(tc, observed, desired, ours); err != nil {
			b.Fatal(err)
		}
	}
}
