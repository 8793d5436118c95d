package fieldowner

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/openapi/openapitest"
)

const ownerRef = `{"apiVersion":"example.com/v1","kind":"Site","name":"web","uid":"6c0bd5e4-1111-4222-8333-944455556666","controller":true,"blockOwnerDeletion":true}`

// configMap is a desired child as we send it: the hook's ConfigMap with
// our ownerReference.
func configMap(t *testing.T) *unstructured.Unstructured {
	return object(t, `{"apiVersion":"v1","kind":"ConfigMap",
		"metadata":{"name":"web","namespace":"default",
			"labels":{"team":"a","app.kubernetes.io/name":"web"},
			"annotations":{"note":"hi"},
			"ownerReferences":[`+ownerRef+`]},
		"data":{"color":"blue","b":"x"}}`)
}

func service(t *testing.T) *unstructured.Unstructured {
	return object(t, `{"apiVersion":"v1","kind":"Service",
		"metadata":{"name":"web","namespace":"default","ownerReferences":[`+ownerRef+`]},
		"spec":{"selector":{"app":"web"},"ports":[{"name":"http","port":80},{"name":"https","port":443}]}}`)
}

// serviceDefaults are some of kube-apiserver's defaults for a Service.
func serviceDefaults(obj map[string]interface{}) {
	spec, ok := obj["spec"].(map[string]interface{})
	if !ok {
		return
	}
	setDefault(spec, "type", "ClusterIP")
	setDefault(spec, "sessionAffinity", "None")
	ports, _ := spec["ports"].([]interface{})
	for _, p := range ports {
		if m, ok := p.(map[string]interface{}); ok {
			setDefault(m, "protocol", "TCP")
			setDefault(m, "targetPort", m["port"])
		}
	}
}

func setDefault(m map[string]interface{}, k string, v interface{}) {
	if _, ok := m[k]; !ok {
		m[k] = v
	}
}

// widget is a custom resource compared without a schema.
func widget(t *testing.T) *unstructured.Unstructured {
	return object(t, `{"apiVersion":"example.com/v1","kind":"Widget",
		"metadata":{"name":"w","namespace":"default","ownerReferences":[`+ownerRef+`]},
		"spec":{"size":3,"colors":["red","blue"],"tier":{"name":"gold","rank":1}}}`)
}

func edit(u *unstructured.Unstructured, f func(o map[string]interface{})) *unstructured.Unstructured {
	c := u.DeepCopy()
	f(c.Object)
	return c
}

func set(u *unstructured.Unstructured, v interface{}, path ...string) *unstructured.Unstructured {
	return edit(u, func(o map[string]interface{}) {
		if err := unstructured.SetNestedField(o, v, path...); err != nil {
			panic(err)
		}
	})
}

func remove(u *unstructured.Unstructured, path ...string) *unstructured.Unstructured {
	return edit(u, func(o map[string]interface{}) { unstructured.RemoveNestedField(o, path...) })
}

// fromEncodingJSON is u as encoding/json decodes it: every number a
// float64.
func fromEncodingJSON(t *testing.T, u *unstructured.Unstructured) *unstructured.Unstructured {
	b, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	out := &unstructured.Unstructured{}
	if err := json.Unmarshal(b, &out.Object); err != nil {
		t.Fatal(err)
	}
	return out
}

type compareCase struct {
	name string
	// encode, if set, is what storing the object does to it.
	encode func(map[string]interface{})
	// setup brings the live object where the case starts.
	setup     func(t *testing.T, s *fakeServer)
	desired   *unstructured.Unstructured
	lines     []string
	ownership []string
	changed   bool
}

// runCompare checks each case against the fake API server too: Compare
// says Changed exactly when applying desired writes, and once applied the
// same desired compares unchanged.
func runCompare(t *testing.T, tc managedfields.TypeConverter, gvk schema.GroupVersionKind, defaults func(map[string]interface{}), cases []compareCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := newServer(t, tc, gvk, defaults)
			s.encode = c.encode
			if c.setup != nil {
				c.setup(t, s)
			}
			r, err := Compare(tc, s.observed(), c.desired, ours)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(r.Lines, c.lines) {
				t.Errorf("lines:\n got %q\nwant %q", r.Lines, c.lines)
			}
			if !reflect.DeepEqual(r.Ownership, c.ownership) {
				t.Errorf("ownership:\n got %q\nwant %q", r.Ownership, c.ownership)
			}
			if r.Changed != c.changed {
				t.Errorf("changed: got %v, want %v", r.Changed, c.changed)
			}
			if wrote := s.apply(Sanitize(c.desired), ours); wrote != r.Changed {
				t.Errorf("the API server wrote: %v, Compare said changed: %v", wrote, r.Changed)
			}
			again, err := Compare(tc, s.observed(), c.desired, ours)
			if err != nil {
				t.Fatal(err)
			}
			if again.Changed || len(again.Lines)+len(again.Ownership) > 0 {
				t.Errorf("not converged after the apply: %+v", again)
			}
		})
	}
}

func applied(u *unstructured.Unstructured, manager string) func(*testing.T, *fakeServer) {
	return func(t *testing.T, s *fakeServer) { s.apply(u, manager) }
}

func TestCompareConfigMap(t *testing.T) {
	base := configMap(t)
	runCompare(t, coreV1(t), schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, nil, []compareCase{{
		name:    "converged child is unchanged",
		setup:   applied(base, ours),
		desired: base,
	}, {
		name:    "echoed system metadata and status are ignored",
		setup:   applied(base, ours),
		desired: set(set(set(base, "12345", "metadata", "resourceVersion"), "ok", "status", "phase"), "2020-01-01T00:00:00Z", "metadata", "creationTimestamp"),
	}, {
		name:    "empty map a built-in type drops is unchanged",
		encode:  omitEmpty("binaryData"),
		setup:   applied(set(base, map[string]interface{}{}, "binaryData"), ours),
		desired: set(base, map[string]interface{}{}, "binaryData"),
	}, {
		name:      "empty map a built-in type drops is adopted, not added",
		encode:    omitEmpty("binaryData"),
		setup:     applied(base, ours),
		desired:   set(base, map[string]interface{}{}, "binaryData"),
		ownership: []string{`binaryData: {} (adopt)`},
		changed:   true,
	}, {
		name:    "changed value",
		setup:   applied(base, ours),
		desired: set(base, "green", "data", "color"),
		lines:   []string{`data.color: "blue" -> "green"`},
		changed: true,
	}, {
		name:    "added label with a dotted key",
		setup:   applied(base, ours),
		desired: set(base, "x", "metadata", "labels", "a.b/c"),
		lines:   []string{`metadata.labels["a.b/c"]: <none> -> "x"`},
		changed: true,
	}, {
		name:    "removed data key",
		setup:   applied(base, ours),
		desired: remove(base, "data", "b"),
		lines:   []string{`- data.b: "x"`},
		changed: true,
	}, {
		name:    "removed label",
		setup:   applied(base, ours),
		desired: remove(base, "metadata", "labels", "team"),
		lines:   []string{`- metadata.labels.team: "a"`},
		changed: true,
	}, {
		name:    "removed last annotation",
		setup:   applied(base, ours),
		desired: remove(base, "metadata", "annotations"),
		lines:   []string{`- metadata.annotations.note: "hi"`},
		changed: true,
	}, {
		name:    "removed and changed at once",
		setup:   applied(base, ours),
		desired: set(remove(remove(base, "data", "b"), "metadata", "labels"), "green", "data", "color"),
		lines: []string{
			`- data.b: "x"`,
			`- metadata.labels.team: "a"`,
			`- metadata.labels["app.kubernetes.io/name"]: "web"`,
			`data.color: "blue" -> "green"`,
		},
		changed: true,
	}, {
		name: "field another manager set is not ours to remove",
		setup: func(t *testing.T, s *fakeServer) {
			s.apply(base, ours)
			s.update(set(s.observed(), "1", "data", "extra"), "kubectl-edit")
		},
		desired: base,
	}, {
		name: "field another manager owns too is released, not removed",
		setup: func(t *testing.T, s *fakeServer) {
			s.apply(base, ours)
			s.apply(object(t, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"web","namespace":"default"},"data":{"b":"x"}}`), "helm")
		},
		desired:   remove(base, "data", "b"),
		ownership: []string{`data.b: "x" (release)`},
		changed:   true,
	}, {
		name: "value another manager changed is set back",
		setup: func(t *testing.T, s *fakeServer) {
			s.apply(base, ours)
			s.update(set(s.observed(), "red", "data", "color"), "kubectl-edit")
		},
		desired: base,
		lines:   []string{`data.color: "red" -> "blue"`},
		changed: true,
	}, {
		name: "adopted object never applied by us",
		setup: func(t *testing.T, s *fakeServer) {
			s.create(remove(base, "metadata", "ownerReferences"), "kubectl-create")
		},
		desired: base,
		lines: []string{
			`metadata.ownerReferences[uid="6c0bd5e4-1111-4222-8333-944455556666"]: <none> -> ` + ownerRef2,
		},
		ownership: []string{
			`data.b: "x" (adopt)`,
			`data.color: "blue" (adopt)`,
			`metadata.annotations.note: "hi" (adopt)`,
			`metadata.labels.team: "a" (adopt)`,
			`metadata.labels["app.kubernetes.io/name"]: "web" (adopt)`,
		},
		changed: true,
	}, {
		name: "adopted object with the desired values already",
		setup: func(t *testing.T, s *fakeServer) {
			s.create(base, "kubectl-create")
		},
		desired: remove(base, "metadata", "annotations"),
		ownership: []string{
			`data.b: "x" (adopt)`,
			`data.color: "blue" (adopt)`,
			`metadata.labels.team: "a" (adopt)`,
			`metadata.labels["app.kubernetes.io/name"]: "web" (adopt)`,
			`metadata.ownerReferences[uid="6c0bd5e4-1111-4222-8333-944455556666"]: ` + ownerRef2 + ` (adopt)`,
		},
		changed: true,
	}, {
		name: "object without managedFields",
		setup: func(t *testing.T, s *fakeServer) {
			s.create(base, "kubectl-create")
			s.live.SetManagedFields(nil)
		},
		desired: remove(base, "data", "b"),
		ownership: []string{
			`data.color: "blue" (adopt)`,
			`metadata.annotations.note: "hi" (adopt)`,
			`metadata.labels.team: "a" (adopt)`,
			`metadata.labels["app.kubernetes.io/name"]: "web" (adopt)`,
			`metadata.ownerReferences[uid="6c0bd5e4-1111-4222-8333-944455556666"]: ` + ownerRef2 + ` (adopt)`,
		},
		changed: true,
	}, {
		name:    "new child",
		desired: remove(remove(base, "metadata", "ownerReferences"), "metadata", "labels"),
		lines: []string{
			`data.b: <none> -> "x"`,
			`data.color: <none> -> "blue"`,
			`metadata.annotations.note: <none> -> "hi"`,
			`metadata.name: <none> -> "web"`,
			`metadata.namespace: <none> -> "default"`,
		},
		changed: true,
	}})
}

// ownerRef2 is ownerRef as rendered, keys sorted.
const ownerRef2 = `{"apiVersion":"example.com/v1","blockOwnerDeletion":true,"controller":true,"kind":"Site","name":"web","uid":"6c0bd5e4-1111-4222-8333-944455556666"}`

func TestCompareService(t *testing.T) {
	base := service(t)
	runCompare(t, coreV1(t), schema.GroupVersionKind{Version: "v1", Kind: "Service"}, serviceDefaults, []compareCase{{
		name:    "converged Service with defaulted fields is unchanged",
		setup:   applied(base, ours),
		desired: base,
	}, {
		name:    "numbers decoded as floats are unchanged",
		setup:   applied(base, ours),
		desired: fromEncodingJSON(t, base),
	}, {
		name:  "port removed from the keyed list",
		setup: applied(base, ours),
		desired: set(base, []interface{}{map[string]interface{}{"name": "http", "port": int64(80)}},
			"spec", "ports"),
		lines:   []string{`- spec.ports[port=443,protocol="TCP"]: {"name":"https","port":443,"protocol":"TCP","targetPort":443}`},
		changed: true,
	}, {
		name:  "port added to the keyed list",
		setup: applied(base, ours),
		desired: set(base, []interface{}{
			map[string]interface{}{"name": "http", "port": int64(80)},
			map[string]interface{}{"name": "https", "port": int64(443)},
			map[string]interface{}{"name": "dns", "port": int64(53), "protocol": "UDP"},
		}, "spec", "ports"),
		lines:   []string{`spec.ports[port=53,protocol="UDP"]: <none> -> {"name":"dns","port":53,"protocol":"UDP"}`},
		changed: true,
	}, {
		name:  "field of a port changed",
		setup: applied(base, ours),
		desired: set(base, []interface{}{
			map[string]interface{}{"name": "http", "port": int64(80), "targetPort": int64(8080)},
			map[string]interface{}{"name": "https", "port": int64(443)},
		}, "spec", "ports"),
		lines:   []string{`spec.ports[port=80,protocol="TCP"].targetPort: 80 -> 8080`},
		changed: true,
	}, {
		name:    "atomic selector compared whole",
		setup:   applied(base, ours),
		desired: set(base, map[string]interface{}{"app": "web", "tier": "fe"}, "spec", "selector"),
		lines:   []string{`spec.selector: {"app":"web"} -> {"app":"web","tier":"fe"}`},
		changed: true,
	}, {
		name:  "field we set to its default, then dropped",
		setup: applied(set(base, "None", "spec", "sessionAffinity"), ours),
		// The API server defaults it again: the value stays, our
		// ownership goes, so the apply writes.
		desired: base,
		lines:   []string{`- spec.sessionAffinity: "None"`},
		changed: true,
	}})
}

func TestCompareDeduced(t *testing.T) {
	base := widget(t)
	runCompare(t, managedfields.NewDeducedTypeConverter(), schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, nil, []compareCase{{
		name:    "converged custom resource is unchanged",
		setup:   applied(base, ours),
		desired: base,
	}, {
		name:    "numbers decoded as floats are unchanged",
		setup:   applied(base, ours),
		desired: fromEncodingJSON(t, base),
	}, {
		name:    "list compared whole",
		setup:   applied(base, ours),
		desired: set(base, []interface{}{"red"}, "spec", "colors"),
		lines:   []string{`spec.colors: ["red","blue"] -> ["red"]`},
		changed: true,
	}, {
		name:    "removed nested field",
		setup:   applied(base, ours),
		desired: remove(base, "spec", "tier", "rank"),
		lines:   []string{`- spec.tier.rank: 1`},
		changed: true,
	}, {
		name:    "changed number",
		setup:   applied(base, ours),
		desired: set(base, int64(5), "spec", "size"),
		lines:   []string{`spec.size: 3 -> 5`},
		changed: true,
	}, {
		name: "field another manager set is not ours to remove",
		setup: func(t *testing.T, s *fakeServer) {
			s.apply(base, ours)
			s.update(set(s.observed(), "x", "spec", "extra"), "kubectl-edit")
		},
		desired: base,
	}})
}

// The informer decodes numbers as int64, but a standalone run may read
// children with encoding/json: floats on both sides compare by value too.
func TestCompareObservedFloats(t *testing.T) {
	tc := coreV1(t)
	s := newServer(t, tc, schema.GroupVersionKind{Version: "v1", Kind: "Service"}, serviceDefaults)
	s.apply(service(t), ours)
	r, err := Compare(tc, fromEncodingJSON(t, s.observed()), service(t), ours)
	if err != nil {
		t.Fatal(err)
	}
	if r.Changed {
		t.Errorf("changed: %+v", r)
	}
}

func TestCompareErrors(t *testing.T) {
	tc := coreV1(t)
	cm := configMap(t)
	if _, err := Compare(tc, nil, set(cm, "x", "spec", "bogus"), ours); err == nil {
		t.Error("a field the schema does not have: no error")
	} else if !errorsIsSchema(err) {
		t.Errorf("a field the schema does not have: %v, want ErrSchema", err)
	}
	other := set(cm, "v1beta1", "apiVersion")
	if _, err := Compare(tc, other, cm, ours); err == nil {
		t.Error("observed at another version: no error")
	}
}

func errorsIsSchema(err error) bool { return errors.Is(err, ErrSchema) }

// omitEmpty drops a top-level field when it is an empty map, as encoding a
// built-in type with omitempty does.
func omitEmpty(field string) func(map[string]interface{}) {
	return func(o map[string]interface{}) {
		if m, ok := o[field].(map[string]interface{}); ok && len(m) == 0 {
			delete(o, field)
		}
	}
}

func deployment(t *testing.T) *unstructured.Unstructured {
	return object(t, `{"apiVersion":"apps/v1","kind":"Deployment",
		"metadata":{"name":"web","namespace":"default","ownerReferences":[`+ownerRef+`]},
		"spec":{"replicas":2,"selector":{"matchLabels":{"app":"web"}},
			"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{
				"name":"web","image":"nginx:1.27",
				"env":[{"name":"A","value":"1"},{"name":"B","value":"2"}],
				"resources":{"limits":{"cpu":"0.5","memory":"1024Mi"},"requests":{"cpu":0.25}}}]}}}}`)
}

// deploymentDefaults are some of kube-apiserver's defaults for a
// Deployment.
func deploymentDefaults(obj map[string]interface{}) {
	spec, ok := obj["spec"].(map[string]interface{})
	if !ok {
		return
	}
	setDefault(spec, "revisionHistoryLimit", int64(10))
	setDefault(spec, "progressDeadlineSeconds", int64(600))
	setDefault(spec, "strategy", map[string]interface{}{"type": "RollingUpdate", "rollingUpdate": map[string]interface{}{"maxSurge": "25%", "maxUnavailable": "25%"}})
	pod, _, _ := unstructured.NestedMap(spec, "template", "spec")
	if pod == nil {
		return
	}
	setDefault(pod, "restartPolicy", "Always")
	setDefault(pod, "dnsPolicy", "ClusterFirst")
	containers, _ := pod["containers"].([]interface{})
	for _, c := range containers {
		if m, ok := c.(map[string]interface{}); ok {
			setDefault(m, "imagePullPolicy", "IfNotPresent")
			setDefault(m, "terminationMessagePath", "/dev/termination-log")
		}
	}
	unstructured.SetNestedMap(spec, pod, "template", "spec")
}

// canonicalQuantities writes the containers' resources as serialising a
// Pod template does: resource.Quantity in canonical form.
func canonicalQuantities(obj map[string]interface{}) {
	containers, _, _ := unstructured.NestedSlice(obj, "spec", "template", "spec", "containers")
	for _, c := range containers {
		for _, kind := range []string{"limits", "requests"} {
			m, _, _ := unstructured.NestedMap(c.(map[string]interface{}), "resources", kind)
			for k, v := range m {
				if q, ok := toQuantity(v); ok {
					m[k] = q.String()
				}
			}
			if m != nil {
				unstructured.SetNestedMap(c.(map[string]interface{}), m, "resources", kind)
			}
		}
	}
	unstructured.SetNestedSlice(obj, containers, "spec", "template", "spec", "containers")
}

func TestCompareDeployment(t *testing.T) {
	tc, err := NewSchemas(openapitest.NewEmbeddedFileClient()).TypeConverter(schema.GroupVersion{Group: "apps", Version: "v1"})
	if err != nil {
		t.Fatal(err)
	}
	base := deployment(t)
	container := `spec.template.spec.containers[name="web"]`
	withContainer := func(f func(c map[string]interface{})) *unstructured.Unstructured {
		return edit(base, func(o map[string]interface{}) {
			containers, _, _ := unstructured.NestedSlice(o, "spec", "template", "spec", "containers")
			f(containers[0].(map[string]interface{}))
			unstructured.SetNestedSlice(o, containers, "spec", "template", "spec", "containers")
		})
	}
	cases := []compareCase{{
		name:    "converged Deployment with defaults and canonical quantities is unchanged",
		setup:   applied(base, ours),
		desired: base,
	}, {
		name:    "numbers decoded as floats are unchanged",
		setup:   applied(base, ours),
		desired: fromEncodingJSON(t, base),
	}, {
		name:  "quantity changed",
		setup: applied(base, ours),
		desired: withContainer(func(c map[string]interface{}) {
			unstructured.SetNestedField(c, "1", "resources", "limits", "cpu")
		}),
		lines:   []string{container + `.resources.limits.cpu: "500m" -> "1"`},
		changed: true,
	}, {
		name:  "env var removed from the keyed list",
		setup: applied(base, ours),
		desired: withContainer(func(c map[string]interface{}) {
			c["env"] = []interface{}{map[string]interface{}{"name": "A", "value": "1"}}
		}),
		lines:   []string{"- " + container + `.env[name="B"]: {"name":"B","value":"2"}`},
		changed: true,
	}, {
		name:    "replicas changed",
		setup:   applied(base, ours),
		desired: set(base, int64(3), "spec", "replicas"),
		lines:   []string{`spec.replicas: 2 -> 3`},
		changed: true,
	}}
	for i := range cases {
		cases[i].encode = canonicalQuantities
	}
	runCompare(t, tc, schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, deploymentDefaults, cases)
}

// stringDataIntoData is the conversion of a stored Secret: stringData
// goes into data.
func stringDataIntoData(obj map[string]interface{}) {
	sd, _, _ := unstructured.NestedStringMap(obj, "stringData")
	if sd == nil {
		return
	}
	data, _, _ := unstructured.NestedMap(obj, "data")
	if data == nil {
		data = map[string]interface{}{}
	}
	for k, v := range sd {
		data[k] = base64.StdEncoding.EncodeToString([]byte(v))
	}
	obj["data"] = data
	delete(obj, "stringData")
}

func TestCompareSecretStringData(t *testing.T) {
	base := object(t, `{"apiVersion":"v1","kind":"Secret",
		"metadata":{"name":"db","namespace":"default","ownerReferences":[`+ownerRef+`]},
		"stringData":{"password":"hunter2"},"data":{"user":"YWRtaW4="}}`)
	cases := []compareCase{{
		name:    "converged Secret with stringData is unchanged",
		setup:   applied(base, ours),
		desired: base,
	}, {
		name:    "stringData changed",
		setup:   applied(base, ours),
		desired: set(base, "swordfish", "stringData", "password"),
		lines:   []string{`data.password: "aHVudGVyMg==" -> "c3dvcmRmaXNo"`},
		changed: true,
	}, {
		name:    "stringData key dropped: the data stays, only ownership goes",
		setup:   applied(base, ours),
		desired: remove(base, "stringData"),
		// The API server never had stringData to prune.
		ownership: []string{`stringData.password: <none> (release)`},
		changed:   true,
	}}
	for i := range cases {
		cases[i].encode = stringDataIntoData
	}
	runCompare(t, coreV1(t), schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, nil, cases)
}
