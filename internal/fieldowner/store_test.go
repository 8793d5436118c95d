package fieldowner

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/openapi/openapitest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
	"sigs.k8s.io/structured-merge-diff/v6/merge"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// comparable is obj as the tests compare stored objects: through the wire,
// without resourceVersion and managedFields times, entries sorted by
// manager (the server sorts by time, which a second boundary may flip).
func comparable(t *testing.T, obj *unstructured.Unstructured) map[string]interface{} {
	t.Helper()
	c := &unstructured.Unstructured{Object: withoutTimes(wire(t, obj))}
	mf := c.GetManagedFields()
	sort.Slice(mf, func(i, j int) bool {
		return mf[i].Manager+string(mf[i].Operation) < mf[j].Manager+string(mf[j].Operation)
	})
	if len(mf) > 0 {
		c.SetManagedFields(mf)
	}
	return c.Object
}

type storeCase struct {
	name    string
	setup   func(t *testing.T, s *fakeServer)
	desired *unstructured.Unstructured
	// check, if set, looks at the result further.
	check func(t *testing.T, got *unstructured.Unstructured)
}

// runWouldStore checks each case against the fake API server, whose
// managedfields.FieldManager is the API server's: WouldStore returns what
// its forced apply stores, managedFields included, and changes neither of
// its arguments.
func runWouldStore(t *testing.T, tc managedfields.TypeConverter, gvk schema.GroupVersionKind, cases []storeCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t, tc, gvk, nil)
			if c.setup != nil {
				c.setup(t, s)
			}
			observed := s.observed()
			var observedBefore *unstructured.Unstructured
			if observed != nil {
				observedBefore = observed.DeepCopy()
			}
			desiredBefore := c.desired.DeepCopy()
			got, err := WouldStore(tc, observed, c.desired, ours)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(c.desired, desiredBefore) {
				t.Errorf("WouldStore changed desired")
			}
			if observed != nil && !reflect.DeepEqual(observed, observedBefore) {
				t.Errorf("WouldStore changed observed")
			}
			s.apply(Sanitize(c.desired), ours)
			if want := comparable(t, s.live); !reflect.DeepEqual(comparable(t, got), want) {
				t.Errorf("WouldStore:\n got %v\nwant %v", comparable(t, got), want)
			}
			// Times are compared only as present or not: the server
			// stamps the entry of an operation that changed a value.
			var gotTimes, wantTimes []bool
			for _, e := range got.GetManagedFields() {
				gotTimes = append(gotTimes, e.Time != nil)
			}
			for _, e := range s.live.GetManagedFields() {
				wantTimes = append(wantTimes, e.Time != nil)
			}
			if !reflect.DeepEqual(gotTimes, wantTimes) {
				t.Errorf("managedFields with a time: got %v, want %v", gotTimes, wantTimes)
			}
			if c.check != nil {
				c.check(t, got)
			}
		})
	}
}

func TestWouldStoreConfigMap(t *testing.T) {
	base := configMap(t)
	runWouldStore(t, coreV1(t), schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, []storeCase{{
		name:    "create",
		desired: base,
		check: func(t *testing.T, got *unstructured.Unstructured) {
			if got.GetUID() != "" || got.GetResourceVersion() != "" {
				t.Errorf("a local create got system metadata: uid %q resourceVersion %q", got.GetUID(), got.GetResourceVersion())
			}
			if mf := got.GetManagedFields(); len(mf) != 1 || mf[0].Manager != ours || mf[0].Operation != "Apply" || mf[0].APIVersion != "v1" || mf[0].Time == nil {
				t.Errorf("managedFields = %+v, want one Apply entry of %s, stamped", mf, ours)
			}
			if len(got.GetOwnerReferences()) != 1 {
				t.Errorf("ownerReferences = %v, want ours", got.GetOwnerReferences())
			}
		},
	}, {
		name:    "update",
		setup:   applied(base, ours),
		desired: set(base, "green", "data", "color"),
		check: func(t *testing.T, got *unstructured.Unstructured) {
			if v, _, _ := unstructured.NestedString(got.Object, "data", "color"); v != "green" {
				t.Errorf("data.color = %q, want green", v)
			}
			if got.GetResourceVersion() != "101" {
				t.Errorf("resourceVersion = %q, want the live 101", got.GetResourceVersion())
			}
		},
	}, {
		name:    "field the hook dropped disappears",
		setup:   applied(base, ours),
		desired: remove(remove(base, "data", "b"), "metadata", "labels", "team"),
		check: func(t *testing.T, got *unstructured.Unstructured) {
			if _, found, _ := unstructured.NestedFieldNoCopy(got.Object, "data", "b"); found {
				t.Errorf("data.b is still there: %v", got.Object["data"])
			}
			if _, found := got.GetLabels()["team"]; found {
				t.Errorf("label team is still there: %v", got.GetLabels())
			}
		},
	}, {
		name: "field another manager set stays",
		setup: func(t *testing.T, s *fakeServer) {
			s.apply(base, ours)
			s.update(set(s.observed(), "1", "data", "extra"), "kubectl-edit")
		},
		desired: remove(base, "data", "b"),
		check: func(t *testing.T, got *unstructured.Unstructured) {
			if v, _, _ := unstructured.NestedString(got.Object, "data", "extra"); v != "1" {
				t.Errorf("data.extra = %q, want kubectl-edit's 1 kept", v)
			}
		},
	}, {
		name: "value another manager changed is forced back",
		setup: func(t *testing.T, s *fakeServer) {
			s.apply(base, ours)
			s.update(set(s.observed(), "red", "data", "color"), "kubectl-edit")
		},
		desired: base,
	}, {
		name:    "converged child is stored as it is",
		setup:   applied(base, ours),
		desired: base,
	}, {
		name: "object without managedFields",
		setup: func(t *testing.T, s *fakeServer) {
			s.create(base, "kubectl-create")
			s.live.SetManagedFields(nil)
		},
		desired: remove(base, "data", "b"),
		check: func(t *testing.T, got *unstructured.Unstructured) {
			if !strings.Contains(strings.Join(managers(got), ","), "before-first-apply") {
				t.Errorf("managers = %v, want before-first-apply's", managers(got))
			}
		},
	}})
}

func TestWouldStoreUnchangedKeepsTimes(t *testing.T) {
	s := newServer(t, coreV1(t), schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, nil)
	s.apply(configMap(t), ours)
	observed := s.observed()
	got, err := WouldStore(coreV1(t), observed, configMap(t), ours)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(wire(t, got).Object, observed.Object) {
		t.Errorf("a converged child would be stored changed:\n got %v\nwant %v", got.Object, observed.Object)
	}
}

func TestWouldStoreSecretStringData(t *testing.T) {
	base := object(t, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","namespace":"default"},"stringData":{"password":"hunter2"}}`)
	got, err := WouldStore(coreV1(t), nil, base, ours)
	if err != nil {
		t.Fatal(err)
	}
	if _, found := got.Object["stringData"]; found {
		t.Errorf("stringData would be stored: %v", got.Object)
	}
	if v, _, _ := unstructured.NestedString(got.Object, "data", "password"); v != "aHVudGVyMg==" {
		t.Errorf("data.password = %q, want hunter2 in base64", v)
	}
}

func TestWouldStoreKeepsStatus(t *testing.T) {
	base := widget(t)
	s := newServer(t, deduced, schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, nil)
	s.apply(base, ours)
	observed := set(s.observed(), "Ready", "status", "phase")
	got, err := WouldStore(deduced, observed, set(set(base, int64(4), "spec", "size"), "Hooked", "status", "phase"), ours)
	if err != nil {
		t.Fatal(err)
	}
	if v, _, _ := unstructured.NestedString(got.Object, "status", "phase"); v != "Ready" {
		t.Errorf("status.phase = %q, want the live Ready: an apply does not write status", v)
	}
	if v, _, _ := unstructured.NestedInt64(got.Object, "spec", "size"); v != 4 {
		t.Errorf("spec.size = %d, want 4", v)
	}
}

func TestSchemasWouldStoreFallback(t *testing.T) {
	s := NewSchemas(openapitest.NewEmbeddedFileClient())
	got, fallback, err := s.WouldStore(nil, configMap(t), ours)
	if err != nil || fallback != "" || got.GetName() != "web" {
		t.Errorf("ConfigMap: got %v, %q, %v; want it with the schema", got, fallback, err)
	}
	got, fallback, err = s.WouldStore(nil, set(configMap(t), "x", "spec", "bogus"), ours)
	if err != nil || !strings.Contains(fallback, ".spec: field not declared in schema") {
		t.Errorf("field not in the schema: got %v, %q, %v; want a fallback naming the field", got, fallback, err)
	} else if v, _, _ := unstructured.NestedString(got.Object, "spec", "bogus"); v != "x" {
		t.Errorf("spec.bogus = %q, want x merged without the schema", v)
	}
	if _, _, err := NewSchemas(nil).WouldStore(nil, nil, ours); err == nil {
		t.Errorf("no desired object: no error")
	}
}

// fieldsV1 builds what decoding Set.ToJSON gives.
func TestFieldsV1IsTheJSONOfTheSet(t *testing.T) {
	for _, obj := range []*unstructured.Unstructured{configMap(t), edit(service(t), serviceDefaults), deployment(t)} {
		tv, err := coreOrApps(t, obj).ObjectToTyped(obj)
		if err != nil {
			t.Fatal(err)
		}
		set, err := tv.ToFieldSet()
		if err != nil {
			t.Fatal(err)
		}
		raw, err := set.ToJSON()
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]interface{}
		if err := json.Unmarshal(raw, &want); err != nil {
			t.Fatal(err)
		}
		got, err := fieldsV1(set)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %v\nwant %s", obj.GetKind(), got, raw)
		}
	}
}

func coreOrApps(t *testing.T, obj *unstructured.Unstructured) managedfields.TypeConverter {
	if obj.GetAPIVersion() == "v1" {
		return coreV1(t)
	}
	tc, err := NewSchemas(openapitest.NewEmbeddedFileClient()).TypeConverter(obj.GroupVersionKind().GroupVersion())
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

// applyToNothing is the Updater's apply to an object that does not exist,
// only cheaper.
func TestApplyToNothingIsTheUpdaters(t *testing.T) {
	secret := object(t, `{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","namespace":"default"},"stringData":{"password":"hunter2"},"data":{"user":"YWRtaW4="}}`)
	for _, obj := range []*unstructured.Unstructured{
		configMap(t), service(t), edit(service(t), serviceDefaults), deployment(t), secret, widget(t),
		object(t, `{"apiVersion":"v1","kind":"ConfigMap"}`),
		object(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","labels":{}},"data":null}`),
	} {
		tc := deduced
		if obj.GetKind() != "Widget" {
			tc = coreOrApps(t, obj)
		}
		config, err := tc.ObjectToTyped(Sanitize(obj))
		if err != nil {
			t.Fatal(err)
		}
		empty, err := emptyTyped(tc, obj)
		if err != nil {
			t.Fatal(err)
		}
		version := fieldpath.APIVersion(obj.GetAPIVersion())
		want, wantManagers, err := (&merge.Updater{Converter: sameShape{}}).Apply(empty, config, version, fieldpath.ManagedFields{}, "m", true)
		if err != nil {
			t.Fatal(err)
		}
		got, gotManagers, err := applyToNothing(empty, config, version, "m")
		if err != nil {
			t.Fatal(err)
		}
		if (got == nil) != (want == nil) || (got != nil && !value.Equals(got.AsValue(), want.AsValue())) {
			t.Errorf("%s: merged\n got %v\nwant %v", obj.GetKind(), got, want)
		}
		if !gotManagers.Equals(wantManagers) {
			t.Errorf("%s: managers\n got %v\nwant %v", obj.GetKind(), gotManagers, wantManagers)
		}
	}
}
