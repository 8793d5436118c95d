package target

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// served is a cluster's discovery: the core group with ConfigMaps, and
// groups more, each with one kind.
func served(groups int, thing string) *clienttesting.Fake {
	fake := &clienttesting.Fake{Resources: []*metav1.APIResourceList{{
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{{Name: "configmaps", Kind: "ConfigMap", Namespaced: true, Verbs: metav1.Verbs{"get"}}},
	}}}
	for i := range groups {
		fake.Resources = append(fake.Resources, &metav1.APIResourceList{
			GroupVersion: fmt.Sprintf("g%d.example.com/v1", i),
			APIResources: []metav1.APIResource{{Name: "widgets", Kind: "Widget", Namespaced: true, Verbs: metav1.Verbs{"get"}}},
		})
	}
	if thing != "" {
		fake.Resources = append(fake.Resources, &metav1.APIResourceList{
			GroupVersion: "example.com/v1",
			APIResources: []metav1.APIResource{{Name: thing, Kind: "Thing", Verbs: metav1.Verbs{"get"}}},
		})
	}
	return fake
}

// A remembered mapping lasts until the next refresh, never past it: the
// resource a kind is served as, or its going away, is seen after it.
func TestRESTMappingIsRememberedUntilARefresh(t *testing.T) {
	fake := served(2, "things")
	d := NewDiscovery(&fakediscovery.FakeDiscovery{Fake: fake})
	thing := schema.GroupKind{Group: "example.com", Kind: "Thing"}
	resource := func() (string, error) {
		t.Helper()
		m, err := d.RESTMapping(thing, "v1")
		if err != nil {
			return "", err
		}
		if m.Scope.Name() != meta.RESTScopeNameRoot {
			t.Errorf("Thing is %s, want cluster-scoped", m.Scope.Name())
		}
		return m.Resource.Resource, nil
	}
	for range 2 {
		if got, err := resource(); err != nil || got != "things" {
			t.Fatalf("Thing's resource: %q, %v; want things", got, err)
		}
	}

	*fake = *served(2, "thingies")
	if got, _ := resource(); got != "things" {
		t.Errorf("before a refresh: %q, want what discovery said (things)", got)
	}
	d.Reset()
	if got, err := resource(); err != nil || got != "thingies" {
		t.Errorf("after a refresh: %q, %v; want thingies", got, err)
	}

	*fake = *served(2, "")
	d.Reset()
	if got, err := resource(); !meta.IsNoMatchError(err) {
		t.Errorf("after the kind went away and a refresh: %q, %v; want no match", got, err)
	}
}

// A resource's kind is remembered as a mapping is: until the next refresh,
// never past it.
func TestKindForIsRememberedUntilARefresh(t *testing.T) {
	fake := served(2, "things")
	d := NewDiscovery(&fakediscovery.FakeDiscovery{Fake: fake})
	things := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "things"}
	for range 2 {
		if gvk, err := d.KindFor(things); err != nil || gvk.Kind != "Thing" {
			t.Fatalf("the kind of things: %v, %v; want Thing", gvk, err)
		}
	}

	*fake = *served(2, "things")
	fake.Resources[len(fake.Resources)-1].APIResources[0].Kind = "Thingy"
	if gvk, _ := d.KindFor(things); gvk.Kind != "Thing" {
		t.Errorf("before a refresh: %v, want what discovery said (Thing)", gvk)
	}
	d.Reset()
	if gvk, err := d.KindFor(things); err != nil || gvk.Kind != "Thingy" {
		t.Errorf("after a refresh: %v, %v; want Thingy", gvk, err)
	}

	*fake = *served(2, "")
	d.Reset()
	if gvk, err := d.KindFor(things); !meta.IsNoMatchError(err) {
		t.Errorf("after the resource went away and a refresh: %v, %v; want no match", gvk, err)
	}
}

// BenchmarkRESTMapping is the lookup the loop makes for the children of
// each sync, on a cluster serving 40 groups: "deferred-mapper" is
// client-go's, as every lookup was answered before Discovery remembered
// them.
func BenchmarkRESTMapping(b *testing.B) {
	d := NewDiscovery(&fakediscovery.FakeDiscovery{Fake: served(40, "things")})
	cm := schema.GroupKind{Kind: "ConfigMap"}
	for name, lookup := range map[string]func() (*meta.RESTMapping, error){
		"Discovery":       func() (*meta.RESTMapping, error) { return d.RESTMapping(cm, "v1") },
		"deferred-mapper": func() (*meta.RESTMapping, error) { return d.mapper.RESTMapping(cm, "v1") },
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if m, err := lookup(); err != nil || m.Resource.Resource != "configmaps" {
					b.Fatal(m, err)
				}
			}
		})
	}
}

// BenchmarkKindFor is the lookup the loop makes for each child resource
// of each sync (the hook's empty group of a kind with no children), as
// BenchmarkRESTMapping: "deferred-mapper" is how KindFor was answered
// before Discovery remembered it.
func BenchmarkKindFor(b *testing.B) {
	d := NewDiscovery(&fakediscovery.FakeDiscovery{Fake: served(40, "things")})
	configMaps := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	for name, lookup := range map[string]func() (schema.GroupVersionKind, error){
		"Discovery":       func() (schema.GroupVersionKind, error) { return d.KindFor(configMaps) },
		"deferred-mapper": func() (schema.GroupVersionKind, error) { return d.mapper.KindFor(configMaps) },
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if gvk, err := lookup(); err != nil || gvk.Kind != "ConfigMap" {
					b.Fatal(gvk, err)
				}
			}
		})
	}
}
