// Package apiserver assembles composite-apiserver from a configuration:
// the scheme, the metacontroller.k8s.io API group and its storage.
package apiserver

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/install"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/registry/compositecontroller"
)

var (
	// Scheme holds every type the server encodes and decodes.
	Scheme = runtime.NewScheme()
	// Codecs encodes and decodes the types of Scheme.
	Codecs = serializer.NewCodecFactory(Scheme)
)

func init() {
	install.Install(Scheme)
	// The generic server encodes these for discovery and for options of
	// every group; they live in the unversioned "v1" of the empty group.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	Scheme.AddUnversionedTypes(unversioned,
		&metav1.Status{},
		&metav1.APIVersions{},
		&metav1.APIGroupList{},
		&metav1.APIGroup{},
		&metav1.APIResourceList{},
	)
}

// ExtraConfig is what composite-apiserver adds to a generic server's
// configuration.
type ExtraConfig struct {
	// PostStartHooks run once the server serves, by name.
	PostStartHooks map[string]genericapiserver.PostStartHookFunc
}

// Config is the whole configuration of a server.
type Config struct {
	GenericConfig *genericapiserver.RecommendedConfig
	ExtraConfig   ExtraConfig
}

type completedConfig struct {
	GenericConfig genericapiserver.CompletedConfig
	ExtraConfig   *ExtraConfig
}

// CompletedConfig is a Config with every default filled in. Only Complete
// makes one.
type CompletedConfig struct {
	*completedConfig
}

// Server is a running composite-apiserver.
type Server struct {
	GenericAPIServer *genericapiserver.GenericAPIServer
}

// Complete fills in the defaults of the configuration.
func (cfg *Config) Complete() CompletedConfig {
	return CompletedConfig{&completedConfig{
		GenericConfig: cfg.GenericConfig.Complete(),
		ExtraConfig:   &cfg.ExtraConfig,
	}}
}

// New builds the server: the generic server, the metacontroller.k8s.io group
// with its storage, and the post-start hooks.
func (c completedConfig) New() (*Server, error) {
	generic, err := c.GenericConfig.New("composite-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("can't create the generic API server: %w", err)
	}

	storage, err := compositecontroller.NewStorage(Scheme, c.GenericConfig.RESTOptionsGetter)
	if err != nil {
		return nil, err
	}
	group := genericapiserver.NewDefaultAPIGroupInfo(metacontroller.GroupName, Scheme, metav1.ParameterCodec, Codecs)
	group.VersionedResourcesStorageMap[v1alpha1.SchemeGroupVersion.Version] = map[string]rest.Storage{
		"compositecontrollers":        storage.CompositeController,
		"compositecontrollers/status": storage.Status,
	}
	if err := generic.InstallAPIGroup(&group); err != nil {
		return nil, fmt.Errorf("can't install the %s API group: %w", metacontroller.GroupName, err)
	}

	for name, hook := range c.ExtraConfig.PostStartHooks {
		if err := generic.AddPostStartHook(name, hook); err != nil {
			return nil, err
		}
	}
	return &Server{GenericAPIServer: generic}, nil
}
