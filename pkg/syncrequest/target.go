package syncrequest

import (
	"fmt"

	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// NewTarget connects to the cluster of config. Kinds are mapped to
// resources through cached discovery that refreshes when a kind is unknown,
// so CRDs installed later are found.
func NewTarget(config *rest.Config, authz authorizer.Authorizer) (*Target, error) {
	kube, err := kubernetes.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("can't create a client of the target cluster: %w", err)
	}
	dyn, err := dynamic.NewForConfig(config)
	if err != nil {
		return nil, fmt.Errorf("can't create a dynamic client of the target cluster: %w", err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	return &Target{Dynamic: dyn, Kube: kube, Mapper: mapper, Authorizer: authz}, nil
}
