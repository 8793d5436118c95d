package fieldowner

import (
	"encoding/json"
	"reflect"
	"sort"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
)

// The ways Metacontroller writes children, as in its
// internal/controller/common/manage_children.go.

// mcCreate creates a child as Metacontroller's default dynamic apply
// does: the hook's object in the last-applied annotation, then the
// controller ownerReference, then a plain create (an Update entry under
// the user agent's name).
func mcCreate(t *testing.T, s *fakeServer, hook *unstructured.Unstructured) {
	t.Helper()
	s.create(withOwnerRef(t, withLastApplied(t, hook)), MetacontrollerManager)
}

// mcUpdate updates a child as dynamic apply does when the hook's object
// changed: the whole object, with the merged changes and the new
// annotation, in a plain update. Here the hook only changed or removed
// values, so merging is setting them.
func mcUpdate(t *testing.T, s *fakeServer, hook *unstructured.Unstructured, merge func(o map[string]interface{})) {
	t.Helper()
	obj := edit(s.observed(), merge)
	ann := obj.GetAnnotations()
	ann[LastAppliedAnnotation] = lastApplied(t, hook)
	obj.SetAnnotations(ann)
	if !s.update(obj, MetacontrollerManager) {
		t.Fatal("Metacontroller's update wrote nothing")
	}
}

// mcApply applies a child as the server-side-apply strategy does.
func mcApply(t *testing.T, s *fakeServer, hook *unstructured.Unstructured) {
	t.Helper()
	s.apply(withOwnerRef(t, hook), MetacontrollerManager)
}

func lastApplied(t *testing.T, hook *unstructured.Unstructured) string {
	b, err := json.Marshal(hook.Object)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func withLastApplied(t *testing.T, hook *unstructured.Unstructured) *unstructured.Unstructured {
	return set(hook, lastApplied(t, hook), "metadata", "annotations", LastAppliedAnnotation)
}

func withOwnerRef(t *testing.T, u *unstructured.Unstructured) *unstructured.Unstructured {
	return set(u, []interface{}{object(t, ownerRef).Object}, "metadata", "ownerReferences")
}

func managers(u *unstructured.Unstructured) []string {
	var out []string
	for _, e := range u.GetManagedFields() {
		out = append(out, e.Manager+"/"+string(e.Operation))
	}
	sort.Strings(out)
	return out
}

func TestTakeover(t *testing.T) {
	hookCM := remove(configMap(t), "metadata", "ownerReferences")
	hookSvc := remove(service(t), "metadata", "ownerReferences")
	cmGVK := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	svcGVK := schema.GroupVersionKind{Version: "v1", Kind: "Service"}
	widgetGVK := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	hookWidget := remove(widget(t), "metadata", "ownerReferences")
	oneWebPort := []interface{}{map[string]interface{}{"name": "http", "port": int64(80)}}

	for _, c := range []struct {
		name     string
		tc       managedfields.TypeConverter
		gvk      schema.GroupVersionKind
		defaults func(map[string]interface{})
		// setup writes the child as Metacontroller did.
		setup func(t *testing.T, s *fakeServer)
		// desired is what the hook returns now, our ownerReference
		// added; pruned is it without what Metacontroller set.
		desired, pruned *unstructured.Unstructured
		// kept tells whether what pruned prunes is still there.
		kept func(o map[string]interface{}) bool
		// converged tells whether desired compares unchanged right
		// after the takeover, so that taking over costs no apply.
		converged bool
		// managers are those left by the takeover.
		managers []string
		lines    []string
	}{{
		name:  "from dynamic apply's Update entry",
		tc:    coreV1(t),
		gvk:   cmGVK,
		setup: func(t *testing.T, s *fakeServer) { mcCreate(t, s, hookCM) },
		// The label that kubectl added stays someone else's.
		desired:   configMap(t),
		pruned:    remove(configMap(t), "data", "b"),
		kept:      has("data", "b"),
		converged: true,
		managers:  []string{ours + "/Apply"},
		lines:     []string{`- data.b: "x"`},
	}, {
		name: "from dynamic apply's Update entry, after an update and with another manager",
		tc:   coreV1(t),
		gvk:  cmGVK,
		setup: func(t *testing.T, s *fakeServer) {
			mcCreate(t, s, hookCM)
			green := set(hookCM, "green", "data", "color")
			mcUpdate(t, s, green, func(o map[string]interface{}) {
				unstructured.SetNestedField(o, "green", "data", "color")
			})
			s.update(set(s.observed(), "ops", "metadata", "labels", "owner"), "kubectl-label")
		},
		desired: set(configMap(t), "green", "data", "color"),
		pruned:  remove(remove(set(configMap(t), "green", "data", "color"), "data", "b"), "metadata", "labels", "team"),
		kept: func(o map[string]interface{}) bool {
			return has("data", "b")(o) || has("metadata", "labels", "team")(o)
		},
		converged: true,
		managers:  []string{"kubectl-label/Update", ours + "/Apply"},
		lines:     []string{`- data.b: "x"`, `- metadata.labels.team: "a"`},
	}, {
		name:     "from dynamic apply's Update entry of a Service, without the defaults",
		tc:       coreV1(t),
		gvk:      svcGVK,
		defaults: serviceDefaults,
		setup:    func(t *testing.T, s *fakeServer) { mcCreate(t, s, hookSvc) },
		desired:  service(t),
		pruned:   set(service(t), oneWebPort, "spec", "ports"),
		kept:     twoPorts,
		// Neither sessionAffinity nor the ports' protocol and
		// targetPort, which the API server defaulted, are taken: the
		// next apply does not "remove" them.
		converged: true,
		managers:  []string{ours + "/Apply"},
		lines:     []string{`- spec.ports[port=443,protocol="TCP"]: {"name":"https","port":443,"protocol":"TCP","targetPort":443}`},
	}, {
		name:      "from server-side apply's Apply entry",
		tc:        coreV1(t),
		gvk:       cmGVK,
		setup:     func(t *testing.T, s *fakeServer) { mcApply(t, s, hookCM) },
		desired:   configMap(t),
		pruned:    remove(configMap(t), "metadata", "annotations"),
		kept:      has("metadata", "annotations", "note"),
		converged: true,
		managers:  []string{ours + "/Apply"},
		lines:     []string{`- metadata.annotations.note: "hi"`},
	}, {
		name: "from server-side apply's Apply entry after dynamic apply's Update one",
		tc:   coreV1(t),
		gvk:  svcGVK,
		// Switching strategies leaves both entries and the annotation.
		defaults: serviceDefaults,
		setup: func(t *testing.T, s *fakeServer) {
			mcCreate(t, s, hookSvc)
			mcApply(t, s, set(hookSvc, map[string]interface{}{"app": "web2"}, "spec", "selector"))
		},
		desired:   set(service(t), map[string]interface{}{"app": "web2"}, "spec", "selector"),
		pruned:    set(set(service(t), map[string]interface{}{"app": "web2"}, "spec", "selector"), oneWebPort, "spec", "ports"),
		kept:      twoPorts,
		converged: true,
		managers:  []string{ours + "/Apply"},
		lines:     []string{`- spec.ports[port=443,protocol="TCP"]: {"name":"https","port":443,"protocol":"TCP","targetPort":443}`},
	}, {
		name: "from the annotation only",
		tc:   coreV1(t),
		gvk:  cmGVK,
		setup: func(t *testing.T, s *fakeServer) {
			mcCreate(t, s, hookCM)
			s.live.SetManagedFields(nil)
		},
		desired: configMap(t),
		pruned:  remove(configMap(t), "data", "b"),
		kept:    has("data", "b"),
		// The annotation does not have the ownerReference
		// Metacontroller added: taking it costs an apply.
		converged: false,
		managers:  []string{ours + "/Apply"},
		lines:     []string{`- data.b: "x"`},
	}, {
		name:      "from dynamic apply's Update entry of a custom resource, without a schema",
		tc:        managedfields.NewDeducedTypeConverter(),
		gvk:       widgetGVK,
		setup:     func(t *testing.T, s *fakeServer) { mcCreate(t, s, hookWidget) },
		desired:   widget(t),
		pruned:    remove(widget(t), "spec", "tier"),
		kept:      has("spec", "tier"),
		converged: true,
		managers:  []string{ours + "/Apply"},
		lines:     []string{`- spec.tier.name: "gold"`, `- spec.tier.rank: 1`},
	}} {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t, c.tc, c.gvk, c.defaults)
			c.setup(t, s)

			patch, needed, err := TakeoverPatch(c.tc, s.observed(), ours)
			if err != nil {
				t.Fatal(err)
			}
			if !needed {
				t.Fatal("no takeover needed")
			}
			// The patch goes as a plain PATCH under our client's name.
			s.update(jsonPatch(t, s.observed(), patch), "composite-apiserver")
			live := s.observed()
			if got := managers(live); !reflect.DeepEqual(got, c.managers) {
				t.Errorf("managers after the takeover: got %q, want %q", got, c.managers)
			}
			if _, ok := live.GetAnnotations()[LastAppliedAnnotation]; ok {
				t.Error("the last-applied annotation is still there")
			}
			if _, needed, err := TakeoverPatch(c.tc, live, ours); err != nil || needed {
				t.Errorf("another takeover: needed %v, %v", needed, err)
			}

			r, err := Compare(c.tc, live, c.desired, ours)
			if err != nil {
				t.Fatal(err)
			}
			if r.Changed == c.converged {
				t.Errorf("right after the takeover changed is %v, want %v: %+v", r.Changed, !c.converged, r)
			}
			if len(r.Lines) > 0 {
				t.Errorf("right after the takeover values change: %q", r.Lines)
			}
			if wrote := s.apply(Sanitize(c.desired), ours); wrote != r.Changed {
				t.Errorf("the API server wrote: %v, Compare said changed: %v", wrote, r.Changed)
			}

			r, err = Compare(c.tc, s.observed(), c.pruned, ours)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r.Lines, c.lines) || !r.Changed {
				t.Errorf("without what Metacontroller set: changed %v, lines\n got %q\nwant %q", r.Changed, r.Lines, c.lines)
			}
			if !s.apply(Sanitize(c.pruned), ours) {
				t.Error("the API server did not write the pruned child")
			}
			if c.kept(s.observed().Object) {
				t.Errorf("what Metacontroller set is still there: %v", s.observed().Object)
			}
			r, err = Compare(c.tc, s.observed(), c.pruned, ours)
			if err != nil {
				t.Fatal(err)
			}
			if r.Changed {
				t.Errorf("not converged after the pruning apply: %+v", r)
			}
		})
	}
}

// has tells whether o has a field.
func has(path ...string) func(o map[string]interface{}) bool {
	return func(o map[string]interface{}) bool {
		_, found, _ := unstructured.NestedFieldNoCopy(o, path...)
		return found
	}
}

func twoPorts(o map[string]interface{}) bool {
	ports, _, _ := unstructured.NestedSlice(o, "spec", "ports")
	return len(ports) != 1
}

func TestTakeoverNotNeeded(t *testing.T) {
	tc := coreV1(t)
	s := newServer(t, tc, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, nil)
	s.apply(configMap(t), ours)
	s.update(set(s.observed(), "1", "data", "extra"), "kubectl-edit")
	patch, needed, err := TakeoverPatch(tc, s.observed(), ours)
	if err != nil || needed || patch != nil {
		t.Errorf("got %s, %v, %v; want nothing", patch, needed, err)
	}
}

// Our entry already there (a takeover interrupted, or both controllers
// running for a while): Metacontroller's fields join it.
func TestTakeoverIntoOurEntry(t *testing.T) {
	tc := coreV1(t)
	s := newServer(t, tc, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, nil)
	hook := remove(configMap(t), "metadata", "ownerReferences")
	mcCreate(t, s, hook)
	s.apply(object(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"default"},"data":{"ours":"1"}}`), ours)
	patch, needed, err := TakeoverPatch(tc, s.observed(), ours)
	if err != nil || !needed {
		t.Fatalf("needed %v, %v", needed, err)
	}
	s.update(jsonPatch(t, s.observed(), patch), "composite-apiserver")
	if got, want := managers(s.observed()), []string{ours + "/Apply"}; !reflect.DeepEqual(got, want) {
		t.Errorf("managers: got %q, want %q", got, want)
	}
	r, err := Compare(tc, s.observed(), remove(configMap(t), "data", "b"), ours)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`- data.b: "x"`, `- data.ours: "1"`}
	if !reflect.DeepEqual(r.Lines, want) {
		t.Errorf("lines: got %q, want %q", r.Lines, want)
	}
}

func TestTakeoverBadAnnotation(t *testing.T) {
	tc := coreV1(t)
	s := newServer(t, tc, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, nil)
	s.create(set(configMap(t), "{not json", "metadata", "annotations", LastAppliedAnnotation), "kubectl-create")
	if _, needed, err := TakeoverPatch(tc, s.observed(), ours); err == nil || !needed {
		t.Errorf("needed %v, error %v; want needed and an error", needed, err)
	}
}

// The takeover of a child from the loop's lean cache moves Metacontroller's
// entry only: the entries of kubectl, of a GitOps tool's server-side apply
// and of any other manager are written back exactly as they were.
func TestTakeoverFromLeanCacheKeepsOtherManagers(t *testing.T) {
	tc := coreV1(t)
	hook := remove(configMap(t), "metadata", "ownerReferences")
	for _, c := range []struct {
		name string
		// others writes the child as managers other than Metacontroller.
		others func(t *testing.T, s *fakeServer)
		kept   []string
	}{{
		name: "kubectl label",
		others: func(t *testing.T, s *fakeServer) {
			s.update(set(s.observed(), "payments", "metadata", "labels", "team"), "kubectl-label")
		},
		kept: []string{"kubectl-label/Update"},
	}, {
		name: "kubectl label and a GitOps tool's apply",
		others: func(t *testing.T, s *fakeServer) {
			s.update(set(s.observed(), "payments", "metadata", "labels", "team"), "kubectl-label")
			s.apply(object(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"default"},"data":{"synced":"yes"}}`), "argocd-controller")
		},
		kept: []string{"argocd-controller/Apply", "kubectl-label/Update"},
	}} {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t, tc, schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, nil)
			mcCreate(t, s, hook)
			c.others(t, s)
			before := entriesOf(s.observed(), c.kept)

			cached := s.observed()
			Lean(cached)
			patch, needed, err := TakeoverPatch(tc, cached, ours)
			if err != nil || !needed {
				t.Fatalf("needed %v, %v", needed, err)
			}
			s.update(jsonPatch(t, s.observed(), patch), "composite-apiserver")

			live := s.observed()
			if got, want := managers(live), sorted(append([]string{ours + "/Apply"}, c.kept...)); !reflect.DeepEqual(got, want) {
				t.Errorf("managers after the takeover: got %q, want %q", got, want)
			}
			if after := entriesOf(live, c.kept); !reflect.DeepEqual(after, before) {
				t.Errorf("other managers' entries changed:\n got %+v\nwant %+v", after, before)
			}
		})
	}
}

// entriesOf are obj's managedFields entries of the "manager/Operation"s in
// which, by that name.
func entriesOf(obj *unstructured.Unstructured, which []string) map[string]metav1.ManagedFieldsEntry {
	out := map[string]metav1.ManagedFieldsEntry{}
	for _, e := range obj.GetManagedFields() {
		name := e.Manager + "/" + string(e.Operation)
		for _, w := range which {
			if w == name {
				out[name] = e
			}
		}
	}
	return out
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

// Lean drops other managers' entries except on a child still to be taken
// over from Metacontroller, which TakeoverPatch writes whole.
func TestLean(t *testing.T) {
	tc := coreV1(t)
	cmGVK := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	hook := remove(configMap(t), "metadata", "ownerReferences")
	label := func(t *testing.T, s *fakeServer) {
		s.update(set(s.observed(), "payments", "metadata", "labels", "team"), "kubectl-label")
	}
	for _, c := range []struct {
		name  string
		setup func(t *testing.T, s *fakeServer)
		want  []string
	}{{
		name: "our child: only our entries",
		setup: func(t *testing.T, s *fakeServer) {
			s.apply(configMap(t), ours)
			label(t, s)
		},
		want: []string{ours + "/Apply"},
	}, {
		name: "nobody's entries left: none",
		setup: func(t *testing.T, s *fakeServer) {
			s.create(configMap(t), "kubectl-create")
			label(t, s)
		},
	}, {
		name: "Metacontroller's child: every entry",
		setup: func(t *testing.T, s *fakeServer) {
			mcCreate(t, s, hook)
			label(t, s)
		},
		want: []string{"kubectl-label/Update", MetacontrollerManager + "/Update"},
	}, {
		name: "only Metacontroller's annotation: every entry",
		setup: func(t *testing.T, s *fakeServer) {
			s.create(withLastApplied(t, hook), "kubectl-create")
			label(t, s)
		},
		want: []string{"kubectl-create/Update", "kubectl-label/Update"},
	}} {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t, tc, cmGVK, nil)
			c.setup(t, s)
			obj := s.observed()
			Lean(obj)
			if got := managers(obj); !reflect.DeepEqual(got, c.want) {
				t.Errorf("managers: got %q, want %q", got, c.want)
			}
		})
	}
}
