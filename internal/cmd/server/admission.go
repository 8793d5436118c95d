package server

import (
	"context"
	"fmt"
	"maps"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	mutatingadmissionpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	validatingadmissionpolicy "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	mutatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/mutating"
	validatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/discovery"
	"k8s.io/klog/v2"
)

// admissionPluginAPIs are the target cluster's resources that each default
// admission plugin watches. A plugin whose informer lists a resource the
// cluster does not serve never syncs, and until it does it refuses every
// write with 403 "not yet ready to handle request": on a Kubernetes minor
// older than our k8s.io/apiserver (MutatingAdmissionPolicy's v1 is served
// from 1.36 on) the server would refuse every write. NamespaceLifecycle
// watches core/v1 Namespaces, which every cluster serves.
var admissionPluginAPIs = map[string][]schema.GroupVersionResource{
	mutatingadmissionpolicy.PluginName: {
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicies"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingadmissionpolicybindings"},
	},
	validatingadmissionpolicy.PluginName: {
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicies"},
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingadmissionpolicybindings"},
	},
	mutatingwebhook.PluginName: {
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "mutatingwebhookconfigurations"},
	},
	validatingwebhook.PluginName: {
		{Group: "admissionregistration.k8s.io", Version: "v1", Resource: "validatingwebhookconfigurations"},
	},
}

// disableAdmissionWithoutAPIs returns the hook through which, once the
// target cluster's client is configured and before the admission chain is
// built, the admission plugins whose resources that cluster does not serve
// are turned off, each with a log line naming it and the resource it
// lacks. It adds no initializer: ExtraAdmissionInitializers is merely
// the seam between those two steps of RecommendedOptions.ApplyTo.
func disableAdmissionWithoutAPIs(ctx context.Context, a *genericoptions.AdmissionOptions) func(*genericapiserver.RecommendedConfig) ([]admission.PluginInitializer, error) {
	return func(c *genericapiserver.RecommendedConfig) ([]admission.PluginInitializer, error) {
		client, err := discovery.NewDiscoveryClientForConfig(c.ClientConfig)
		if err != nil {
			return nil, fmt.Errorf("can't create a discovery client for the cluster: %w", err)
		}
		missing, err := pluginsWithoutAPIs(client, admissionPluginAPIs)
		if err != nil {
			return nil, err
		}
		logger := klog.FromContext(ctx)
		for _, name := range slices.Sorted(maps.Keys(missing)) {
			if slices.Contains(a.DisablePlugins, name) {
				continue
			}
			logger.Info("Admission plugin turned off: the cluster does not serve the API it watches",
				"plugin", name, "missing", missing[name].String())
			a.DisablePlugins = append(a.DisablePlugins, name)
			a.EnablePlugins = slices.DeleteFunc(a.EnablePlugins, func(p string) bool { return p == name })
		}
		return nil, nil
	}
}

// pluginsWithoutAPIs returns, for each plugin of apis whose resources the
// cluster does not all serve, the first one it lacks.
func pluginsWithoutAPIs(client discovery.DiscoveryInterface, apis map[string][]schema.GroupVersionResource) (map[string]schema.GroupVersionResource, error) {
	served := map[schema.GroupVersion]map[string]bool{}
	isServed := func(gvr schema.GroupVersionResource) (bool, error) {
		gv := gvr.GroupVersion()
		if _, read := served[gv]; !read {
			served[gv] = map[string]bool{}
			list, err := client.ServerResourcesForGroupVersion(gv.String())
			if err != nil && !apierrors.IsNotFound(err) {
				return false, fmt.Errorf("can't tell whether the cluster serves %s: %w", gv, err)
			}
			if list != nil {
				for _, r := range list.APIResources {
					served[gv][r.Name] = true
				}
			}
		}
		return served[gv][gvr.Resource], nil
	}
	missing := map[string]schema.GroupVersionResource{}
	for plugin, gvrs := range apis {
		for _, gvr := range gvrs {
			ok, err := isServed(gvr)
			if err != nil {
				return nil, err
			}
			if !ok {
				missing[plugin] = gvr
				break
			}
		}
	}
	return missing, nil
}
