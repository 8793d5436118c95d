package definition

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestGuessingResolver(t *testing.T) {
	for _, tc := range []struct {
		gvk            schema.GroupVersionKind
		wantResource   string
		wantNamespaced bool
	}{
		{schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, "configmaps", true},
		{schema.GroupVersionKind{Version: "v1", Kind: "Endpoints"}, "endpoints", true},
		{schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}, "ingresses", true},
		{schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "NetworkPolicy"}, "networkpolicies", true},
		{schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, "namespaces", false},
		{schema.GroupVersionKind{Version: "v1", Kind: "PersistentVolume"}, "persistentvolumes", false},
		{schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"}, "clusterrolebindings", false},
		{schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, "customresourcedefinitions", false},
		{schema.GroupVersionKind{Group: "storage.k8s.io", Version: "v1", Kind: "StorageClass"}, "storageclasses", false},
		{schema.GroupVersionKind{Group: "node.k8s.io", Version: "v1", Kind: "RuntimeClass"}, "runtimeclasses", false},
		// Cluster scope is known by group and kind, not by kind alone.
		{schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Node"}, "nodes", true},
		{schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Thing"}, "things", true},
	} {
		gvr, namespaced, err := GuessingResolver().ResourceFor(tc.gvk)
		if err != nil {
			t.Fatal(err)
		}
		if gvr != tc.gvk.GroupVersion().WithResource(tc.wantResource) || namespaced != tc.wantNamespaced {
			t.Errorf("ResourceFor(%v) = %v, namespaced %v; want %s, %v", tc.gvk, gvr, namespaced, tc.wantResource, tc.wantNamespaced)
		}
	}
}

func TestRESTMapperResolver(t *testing.T) {
	apps := schema.GroupVersion{Group: "apps", Version: "v1"}
	core := schema.GroupVersion{Version: "v1"}
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{apps, core})
	m.Add(apps.WithKind("Deployment"), meta.RESTScopeNamespace)
	m.Add(core.WithKind("Namespace"), meta.RESTScopeRoot)
	r := RESTMapperResolver(m)

	gvr, namespaced, err := r.ResourceFor(apps.WithKind("Deployment"))
	if err != nil || gvr != apps.WithResource("deployments") || !namespaced {
		t.Errorf("Deployment: %v %v %v", gvr, namespaced, err)
	}
	gvr, namespaced, err = r.ResourceFor(core.WithKind("Namespace"))
	if err != nil || gvr != core.WithResource("namespaces") || namespaced {
		t.Errorf("Namespace: %v %v %v", gvr, namespaced, err)
	}
	if _, _, err := r.ResourceFor(core.WithKind("Pod")); !meta.IsNoMatchError(err) {
		t.Errorf("unknown kind: error %v, want a no-match error", err)
	}
	if gvk, err := r.KindFor(apps.WithResource("deployments")); err != nil || gvk != apps.WithKind("Deployment") {
		t.Errorf("KindFor(deployments) = %v, %v", gvk, err)
	}
}
