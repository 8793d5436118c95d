// Package apiserver assembles composite-apiserver from a configuration:
// the scheme, the metacontroller.k8s.io API group and its storage.
package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/klog/v2"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/install"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/controller"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/leader"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/parentloop"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/sharedinformers"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/syncgate"
	"github.com/composite-apiserver/composite-apiserver/internal/fleetpreview"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
	"github.com/composite-apiserver/composite-apiserver/internal/registry/compositecontroller"
	"github.com/composite-apiserver/composite-apiserver/internal/registry/controllerregistry"
	"github.com/composite-apiserver/composite-apiserver/internal/registry/controllerrevision"
	"github.com/composite-apiserver/composite-apiserver/internal/registry/decoratorcontroller"
	"github.com/composite-apiserver/composite-apiserver/internal/rights"
	"github.com/composite-apiserver/composite-apiserver/internal/shard"
	"github.com/composite-apiserver/composite-apiserver/internal/syncrequest"
	"github.com/composite-apiserver/composite-apiserver/internal/target"
	clientset "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned"
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
	// Target is the cluster whose parents and children are synced; nil
	// in standalone mode.
	Target *target.Cluster
	// DiscoveryInterval is how often the target's discovery is refreshed.
	DiscoveryInterval time.Duration
	// Loop configures the controller loop; nil turns it off.
	Loop *LoopConfig
	// HookDestinations are the address ranges hooks may not be called at:
	// refused when a controller is written (an address in its URL) and
	// when a hook is called (every address a name resolves to).
	HookDestinations hooks.Destinations
	// Identity is the operator's policy on controller identities.
	Identity rights.IdentityPolicy
}

// LoopConfig configures the embedded controller loop.
type LoopConfig struct {
	// Settings are the loops' settings, carried whole to each loop.
	parentloop.Settings
	// LeaderElection, when set, runs the loop on one replica at a time.
	LeaderElection *leader.Election
	// Shards, when set, runs the loop on every replica, each syncing the
	// parents of the shards the group's Leases give it.
	Shards *shard.Config
	// ControllerSelector, when set, restricts the loop to the
	// CompositeControllers it selects.
	ControllerSelector labels.Selector
}

// Config is the whole configuration of a server.
type Config struct {
	GenericConfig *genericapiserver.RecommendedConfig
	ExtraConfig   ExtraConfig
}

type completedConfig struct {
	GenericConfig genericapiserver.CompletedConfig
	ExtraConfig   *ExtraConfig
	// protobufless is what the handler chain knows of our resources
	// without protobuf; New fills it once the group is installed.
	protobufless *protobufless
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
	protobufless := &protobufless{}
	if build := cfg.GenericConfig.BuildHandlerChainFunc; build != nil {
		cfg.GenericConfig.BuildHandlerChainFunc = withProtobufLimits(withBodyLimits(build), protobufless)
	}
	return CompletedConfig{&completedConfig{
		GenericConfig: cfg.GenericConfig.Complete(),
		ExtraConfig:   &cfg.ExtraConfig,
		protobufless:  protobufless,
	}}
}

// withProtobufLimits puts withProtobufWhereEncodable in front of the API
// handlers, inside the chain, where each request's RequestInfo is known.
func withProtobufLimits(build func(http.Handler, *genericapiserver.Config) http.Handler, p *protobufless) func(http.Handler, *genericapiserver.Config) http.Handler {
	return func(apiHandler http.Handler, c *genericapiserver.Config) http.Handler {
		return build(withProtobufWhereEncodable(apiHandler, p), c)
	}
}

// New builds the server: the generic server, the metacontroller.k8s.io group
// with its storage, and the post-start hooks.
func (c completedConfig) New() (*Server, error) {
	generic, err := c.GenericConfig.New("composite-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, fmt.Errorf("can't create the generic API server: %w", err)
	}

	var authz authorizer.Authorizer
	opts := compositecontroller.Options{}
	if c.ExtraConfig.Target != nil {
		// Only with a target cluster is there a loop to escalate through,
		// and rights of the server's to check.
		authz = c.GenericConfig.Authorization.Authorizer
		opts.Rights = &rights.Checker{Kube: c.ExtraConfig.Target.Kube, Identity: c.ExtraConfig.Identity}
		opts.Authors = &rights.Escalation{Authorizer: authz}
		opts.Self = c.ExtraConfig.Target.Username
		// A rollout's health condition is typed by, and its cost
		// estimated over, the parent's schema where the cluster serves it.
		disc := c.ExtraConfig.Target.Discovery
		opts.ParentSchemas = &controllerregistry.ParentSchemas{Kinds: disc, Schemas: &resolver.ClientDiscoveryResolver{Discovery: disc.Client()}}
	}
	runner := syncrequest.NewRunner(context.Background(), c.ExtraConfig.Target, authz, c.ExtraConfig.HookDestinations)
	runner.Identity = c.ExtraConfig.Identity
	// Fleet previews on the replica that runs the loop read the children
	// from the loop's caches.
	caches := &sharedinformers.Caches{}
	runner.ReadChildrenFrom(caches)
	// A live /sync takes turns on a parent with the loop's workers, and
	// runs only where the loop syncs the parent.
	gate := syncgate.NewGate()
	if loop := c.ExtraConfig.Loop; loop != nil && c.ExtraConfig.Target != nil {
		switch {
		case loop.Shards != nil:
			gate.Sharded(nil)
		case loop.LeaderElection != nil:
			gate.LeaderElected()
		}
	}
	runner.SyncBesideLoop(gate)
	opts.Syncer, opts.Previewer = runner, fleetpreview.New(runner)
	opts.HookDestinations = c.ExtraConfig.HookDestinations
	opts.Identity = c.ExtraConfig.Identity
	storage, err := compositecontroller.NewStorage(Scheme, c.GenericConfig.RESTOptionsGetter, opts)
	if err != nil {
		return nil, err
	}
	decorators, err := decoratorcontroller.NewStorage(Scheme, c.GenericConfig.RESTOptionsGetter, opts)
	if err != nil {
		return nil, err
	}
	revisions, err := controllerrevision.NewREST(Scheme, c.GenericConfig.RESTOptionsGetter)
	if err != nil {
		return nil, err
	}
	group := genericapiserver.NewDefaultAPIGroupInfo(metacontroller.GroupName, Scheme, metav1.ParameterCodec, Codecs)
	group.VersionedResourcesStorageMap[v1alpha1.SchemeGroupVersion.Version] = map[string]rest.Storage{
		"compositecontrollers":         storage.CompositeController,
		"compositecontrollers/status":  storage.Status,
		"compositecontrollers/sync":    storage.Sync,
		"compositecontrollers/preview": storage.Preview,
		"controllerrevisions":          revisions,
		"decoratorcontrollers":         decorators.DecoratorController,
		"decoratorcontrollers/status":  decorators.Status,
		"decoratorcontrollers/sync":    decorators.Sync,
		"decoratorcontrollers/preview": decorators.Preview,
	}
	if err := generic.InstallAPIGroup(&group); err != nil {
		return nil, fmt.Errorf("can't install the %s API group: %w", metacontroller.GroupName, err)
	}
	c.protobufless.learn(metacontroller.GroupName, group.VersionedResourcesStorageMap)

	if c.ExtraConfig.Target != nil {
		if err := generic.AddPostStartHook("refresh-target-discovery", c.refreshDiscovery); err != nil {
			return nil, err
		}
	}
	if c.ExtraConfig.Loop != nil && c.ExtraConfig.Target != nil {
		startLoop := func(ctx genericapiserver.PostStartHookContext) error { return c.startLoop(ctx, caches, gate) }
		if err := generic.AddPostStartHook("start-composite-controller-loop", startLoop); err != nil {
			return nil, err
		}
	}
	for name, hook := range c.ExtraConfig.PostStartHooks {
		if err := generic.AddPostStartHook(name, hook); err != nil {
			return nil, err
		}
	}
	return &Server{GenericAPIServer: generic}, nil
}

// refreshDiscovery reads the target's discovery again now and then, on
// every replica: /sync uses it as much as the loop.
func (c completedConfig) refreshDiscovery(hookCtx genericapiserver.PostStartHookContext) error {
	interval := c.ExtraConfig.DiscoveryInterval
	if interval <= 0 {
		interval = target.DefaultDiscoveryRefresh
	}
	go c.ExtraConfig.Target.Discovery.Run(hookCtx, interval)
	return nil
}

// startLoop runs the controller loop in the background for as long as the
// server runs: on the leader only when leader election is on, on every
// replica for its share of the parents when shards are.
func (c completedConfig) startLoop(hookCtx genericapiserver.PostStartHookContext, caches *sharedinformers.Caches, gate *syncgate.Gate) error {
	client, err := clientset.NewForConfig(hookCtx.LoopbackClientConfig)
	if err != nil {
		return fmt.Errorf("can't create the loopback client of the controller loop: %w", err)
	}
	controller.RegisterMetrics()
	cluster, loop := c.ExtraConfig.Target, c.ExtraConfig.Loop
	newManager := func(shards syncgate.ParentShards) *controller.Manager {
		return controller.NewManager(controller.Config{
			Dynamic: cluster.Dynamic, Informers: cluster.Informers, Metadata: cluster.Metadata, Kube: cluster.Kube, Discovery: cluster.Discovery, Schemas: cluster.Schemas,
			Client: client, Settings: loop.Settings, ControllerSelector: loop.ControllerSelector,
			HookDestinations: c.ExtraConfig.HookDestinations, Caches: caches,
			Authorizer: c.GenericConfig.Authorization.Authorizer, Impersonator: cluster, Identity: c.ExtraConfig.Identity,
			Shards: shards, AuthorRecheck: loop.ResyncPeriod, Gate: gate,
		})
	}
	run := func(ctx context.Context, m *controller.Manager) {
		if err := m.Run(ctx); err != nil {
			klog.FromContext(ctx).Error(err, "The controller loop stopped")
		}
	}
	if loop.Shards != nil {
		shard.RegisterMetrics()
		member, err := shard.NewMember(*loop.Shards, cluster.Kube.CoordinationV1())
		if err != nil {
			return fmt.Errorf("can't join the replicas that share the loop: %w", err)
		}
		// The manager is told of every shard gained, the first ones too.
		m := newManager(member)
		gate.Sharded(member)
		go run(hookCtx, m)
		go member.Run(hookCtx)
		return nil
	}
	go func() {
		if loop.LeaderElection == nil {
			run(hookCtx, newManager(nil))
			return
		}
		// A new manager per leadership term: nothing of a lost term's
		// state carries over.
		if err := leader.Run(hookCtx, cluster.Kube, *loop.LeaderElection, func(ctx context.Context) {
			gate.Lead(ctx, func(ctx context.Context) { run(ctx, newManager(nil)) })
		}); err != nil {
			klog.FromContext(hookCtx).Error(err, "Leader election failed; the controller loop does not run")
		}
	}()
	return nil
}
