package definition

import (
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// Reference is one Secret or ConfigMap a controller's hooks name for their
// credentials or CA bundles: the server reads it to call the hooks and
// sends what it holds to the hook's URL, which the controller's author
// chose. Whoever writes the controller must be allowed to read it.
type Reference struct {
	// Resource is secrets or configmaps (core group).
	Resource  string
	Namespace string
	Name      string
}

var (
	secrets    = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
)

// Right is the right to read the referenced object.
func (r Reference) Right() Right {
	return Right{Verb: "get", Resource: r.Resource, Namespace: r.Namespace, Name: r.Name}
}

// references are the Secrets and ConfigMaps named by the webhooks of d's
// hooks, patch hooks included, and by its endpointConfigs, each once, in
// the order they are named.
func references(d *Definition) []Reference {
	var out []Reference
	seen := map[Reference]bool{}
	add := func(gvr schema.GroupVersionResource, namespace, name string) {
		r := Reference{Resource: gvr.Resource, Namespace: namespace, Name: name}
		if name != "" && !seen[r] {
			seen[r] = true
			out = append(out, r)
		}
	}
	conn := func(ca *v1alpha1.CABundleConfig, tls *v1alpha1.ClientTLSConfig, authz *v1alpha1.AuthorizationConfig, basic *v1alpha1.BasicAuthConfig) {
		if ca != nil && ca.SecretRef != nil {
			add(secrets, ca.SecretRef.Namespace, ca.SecretRef.Name)
		}
		if ca != nil && ca.ConfigMapRef != nil {
			add(configMaps, ca.ConfigMapRef.Namespace, ca.ConfigMapRef.Name)
		}
		if tls != nil {
			add(secrets, tls.SecretRef.Namespace, tls.SecretRef.Name)
		}
		if authz != nil {
			add(secrets, authz.SecretRef.Namespace, authz.SecretRef.Name)
		}
		if basic != nil {
			add(secrets, basic.SecretRef.Namespace, basic.SecretRef.Name)
		}
	}
	hooks := []*Hook{d.Hooks.Sync, d.Hooks.Finalize, d.Hooks.Customize}
	for _, p := range d.Hooks.Patches {
		hooks = append(hooks, p.Webhook)
	}
	for _, h := range hooks {
		if h != nil && h.Webhook != nil {
			w := h.Webhook
			conn(w.CABundle, w.ClientTLS, w.Authorization, w.BasicAuth)
		}
	}
	for _, e := range d.EndpointConfigs {
		conn(e.CABundle, e.ClientTLS, e.Authorization, e.BasicAuth)
	}
	return out
}
