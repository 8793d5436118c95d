// Package server holds composite-apiserver's command line: its options, how
// they become a server configuration, and running that server.
package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/rest"
	cliflag "k8s.io/component-base/cli/flag"
	"k8s.io/component-base/term"
	"k8s.io/klog/v2"
	netutils "k8s.io/utils/net"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/apiserver"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/leader"
	"github.com/composite-apiserver/composite-apiserver/internal/controller/parentloop"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
	"github.com/composite-apiserver/composite-apiserver/internal/reconcile"
	"github.com/composite-apiserver/composite-apiserver/internal/rights"
	"github.com/composite-apiserver/composite-apiserver/internal/standalone"
	"github.com/composite-apiserver/composite-apiserver/internal/target"
	generatedopenapi "github.com/composite-apiserver/composite-apiserver/pkg/generated/openapi"
)

// EtcdPathPrefix is where objects live in etcd, so that the server can share
// an etcd with others.
const EtcdPathPrefix = "/registry/metacontroller.k8s.io"

// DefaultSecurePort is the HTTPS port when --secure-port is not given.
const DefaultSecurePort = 8443

// version is the release the binary was built from, stamped by the image
// build (hack/build-image.sh, the Dockerfile) with
// -ldflags "-X github.com/composite-apiserver/composite-apiserver/internal/cmd/server.version=...".
// A plain `go build` or `go run` says "dev".
var version = "dev"

// Version is the release the binary was built from, "dev" when unstamped.
func Version() string { return version }

// Options is everything the command line sets.
type Options struct {
	RecommendedOptions *genericoptions.RecommendedOptions
	ServerRunOptions   *genericoptions.ServerRunOptions

	// Standalone runs with an embedded etcd and a single bearer token,
	// without kube-apiserver.
	Standalone bool
	// DataDir holds the standalone etcd data, serving certificate, token
	// and kubeconfig.
	DataDir string
	// WriteKubeconfig is where standalone mode writes its kubeconfig;
	// empty means DataDir/kubeconfig.
	WriteKubeconfig string

	// AlternateDNS are extra names for the self-signed serving certificate.
	AlternateDNS []string

	// ControllerLoop runs the embedded controller loop when a target
	// cluster is configured.
	ControllerLoop bool
	// Workers is each CompositeController's number of workers unless its
	// spec.workers says otherwise.
	Workers int
	// ChildEventsQPS and ChildEventsBurst are each controller's budget of
	// Events about what its syncs did to children (eventbudget).
	ChildEventsQPS   float32
	ChildEventsBurst int
	// LeaderElect runs the loop on one replica at a time.
	LeaderElect bool
	// LeaderElection are the Lease's settings, and those of the shards'
	// Leases.
	LeaderElection leader.Election
	// Shards divides the loop's parents into that many shards shared by
	// all replicas; 0 does not.
	Shards int
	// TargetQPS and TargetBurst limit requests to the target cluster.
	TargetQPS   float32
	TargetBurst int
	// ResyncPeriod is how often every parent is synced with nothing
	// changed.
	ResyncPeriod time.Duration
	// DiscoveryInterval is how often the target's discovery is refreshed.
	DiscoveryInterval time.Duration
	// FinalizeGrace bounds how long a finalized parent keeps its finalizer
	// while its children's deletes fail.
	FinalizeGrace time.Duration
	// EchoTimeout is how long the loop waits for the watch event of one
	// of its own writes before it syncs the parent anyway.
	EchoTimeout time.Duration
	// HookDeniedCIDRs are the address ranges hooks may not be called at.
	HookDeniedCIDRs []string
	// DefaultServiceAccount is NAMESPACE/NAME, the identity of every
	// controller that names none; RequireServiceAccount refuses
	// controllers without one.
	DefaultServiceAccount string
	RequireServiceAccount bool
	// MemoryLimit is the container's memory limit (a quantity), and
	// MemoryLimitRatio the share of it the Go runtime's soft limit is set
	// to (memory.go).
	MemoryLimit      string
	MemoryLimitRatio float64
	// GCPercent is the garbage collector's target (memory.go).
	GCPercent int
	// Metacontroller are Metacontroller's flags kept here.
	Metacontroller MetacontrollerOptions
	// APIService is the server registering its own APIService.
	APIService APIServiceOptions

	// PrintVersion prints the version and exits, so that an image can be
	// inspected without starting a server.
	PrintVersion bool

	Stdout io.Writer
	Stderr io.Writer

	// changedFlags are the flags given on the command line.
	changedFlags []string
}

// NewOptions returns the options with their defaults.
func NewOptions(stdout, stderr io.Writer) *Options {
	o := &Options{
		RecommendedOptions: genericoptions.NewRecommendedOptions(
			EtcdPathPrefix,
			apiserver.Codecs.LegacyCodec(v1alpha1.SchemeGroupVersion),
		),
		ServerRunOptions: genericoptions.NewServerRunOptions(),
		DataDir:          "composite-apiserver-data",
		ControllerLoop:   true,
		// No client-side limit: kube-apiserver's priority and fairness
		// protects it, and a limit of ours would be the loop's ceiling.
		TargetQPS:   -1,
		TargetBurst: 600,
		// Enough syncs in flight to keep one apiserver busy: a sync waits
		// on its hook and then on one write per child.
		Workers: 32,
		// One parent's Event each tenth of a second, after a burst of a
		// hundred: every Event while parents come a few at a time, and
		// the cluster spared thousands when thousands come at once.
		ChildEventsQPS:   10,
		ChildEventsBurst: 100,
		// Metacontroller flushes its caches, and so resyncs every parent,
		// every 30 minutes; its discovery is refreshed every 30 seconds.
		ResyncPeriod:      30 * time.Minute,
		DiscoveryInterval: target.DefaultDiscoveryRefresh,
		FinalizeGrace:     reconcile.DefaultFinalizeGrace,
		EchoTimeout:       parentloop.DefaultEchoTimeout,
		HookDeniedCIDRs:   hooks.DefaultDeniedDestinations,
		LeaderElection: leader.Election{
			Namespace: "composite-system", Name: "composite-apiserver",
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second,
		},
		MemoryLimit:      os.Getenv(MemoryLimitEnv),
		MemoryLimitRatio: DefaultMemoryLimitRatio,
		GCPercent:        DefaultGCPercent,
		Metacontroller:   newMetacontrollerOptions(),
		APIService:       newAPIServiceOptions(),
		Stdout:           stdout,
		Stderr:           stderr,
	}
	// Close open watches within a few seconds of a shutdown signal instead
	// of letting the HTTP server wait a minute for them to go idle.
	o.ServerRunOptions.ShutdownWatchTerminationGracePeriod = 5 * time.Second
	o.RecommendedOptions.Etcd.StorageConfig.EncodeVersioner = runtime.NewMultiGroupVersioner(
		v1alpha1.SchemeGroupVersion, schema.GroupKind{Group: v1alpha1.GroupName})
	o.RecommendedOptions.SecureServing.BindPort = DefaultSecurePort
	return o
}

// NewCommand returns the composite-apiserver command.
func NewCommand(ctx context.Context, o *Options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "composite-apiserver",
		Short: "Serve Metacontroller's CompositeController as an aggregated Kubernetes API",
		Long: `composite-apiserver serves compositecontrollers.metacontroller.k8s.io/v1alpha1:
Metacontroller's CompositeController, validated by the server, with a status.

Two ways to run it:

  --standalone   no cluster needed: an embedded etcd keeps its data in --data-dir,
                 the server makes its own serving certificate and a random token,
                 and writes a kubeconfig (--write-kubeconfig) for kubectl.
                 Only that token is accepted. Example:

                   composite-apiserver --standalone
                   KUBECONFIG=composite-apiserver-data/kubeconfig kubectl get cc

  (default)      behind kube-apiserver, registered with an APIService: objects
                 in an external etcd (--etcd-servers), authentication and
                 authorization delegated to kube-apiserver
                 (--authentication-kubeconfig, --authorization-kubeconfig, or
                 in-cluster configuration).`,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return fmt.Errorf("composite-apiserver takes no arguments, got %q", args)
			}
			if o.PrintVersion {
				// Before Complete and Validate: asking for the version
				// needs no etcd, certificates or cluster.
				_, err := fmt.Fprintf(o.Stdout, "composite-apiserver %s\n", Version())
				return err
			}
			o.recordChangedFlags(cmd.Flags())
			if err := o.Complete(); err != nil {
				return err
			}
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run(cmd.Context())
		},
	}
	cmd.SetContext(ctx)

	fss := cliflag.NamedFlagSets{}
	o.AddFlags(fss.FlagSet("composite-apiserver"))
	o.RecommendedOptions.AddFlags(fss.FlagSet("generic"))
	o.ServerRunOptions.AddUniversalFlags(fss.FlagSet("generic"))
	o.Metacontroller.AddFlags(fss.FlagSet("metacontroller"))
	o.APIService.AddFlags(fss.FlagSet("apiservice"))
	for _, f := range fss.Order {
		cmd.Flags().AddFlagSet(fss.FlagSets[f])
	}
	// Metacontroller's names of our flags (--client-go-qps for
	// --target-qps, ...) set ours.
	addMetacontrollerAliases(cmd.Flags())
	cols, _, _ := term.TerminalSize(cmd.OutOrStdout())
	cliflag.SetUsageAndHelpFunc(cmd, fss, cols)
	return cmd
}

// AddFlags adds composite-apiserver's own flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&o.PrintVersion, "version", o.PrintVersion, "Print the version and exit.")
	fs.BoolVar(&o.Standalone, "standalone", o.Standalone,
		"Run without kube-apiserver: embedded etcd in --data-dir (or the etcd of --etcd-servers, when given), a self-signed serving certificate, "+
			"and one random bearer token written in a kubeconfig. Nothing else is accepted, not even anonymous requests.")
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir,
		"Standalone mode: directory of the embedded etcd's data, the serving certificate, the token and the kubeconfig. It survives restarts.")
	fs.StringVar(&o.WriteKubeconfig, "write-kubeconfig", o.WriteKubeconfig,
		"Standalone mode: where to write the kubeconfig for kubectl (default <data-dir>/kubeconfig).")
	fs.StringSliceVar(&o.AlternateDNS, "alternate-dns", o.AlternateDNS,
		"Extra DNS names for the self-signed serving certificate made when no --tls-cert-file is given.")

	fs.BoolVar(&o.ControllerLoop, "controller-loop", o.ControllerLoop,
		"Run the embedded controller loop that syncs every CompositeController's parents in the target cluster "+
			"(the cluster of --kubeconfig, or the one the server runs in). Off in standalone mode, which has no target cluster.")
	fs.Float32Var(&o.TargetQPS, "target-qps", o.TargetQPS,
		"Requests per second to the target cluster (reading parents, applying children, writing status, recording Events). "+
			"Negative (the default) sets no client-side limit and leaves fairness to kube-apiserver's priority and fairness, "+
			"which protects it better than a fixed rate would; a positive value caps this server's requests (client-go's own default, 5, "+
			"would make a controller of a few hundred parents take minutes to converge).")
	fs.IntVar(&o.TargetBurst, "target-burst", o.TargetBurst, "Burst of requests to the target cluster above --target-qps, when that is positive.")
	fs.DurationVar(&o.ResyncPeriod, "resync-period", o.ResyncPeriod,
		"How often every parent is synced even when nothing changed, so that hooks reading the world outside the cluster "+
			"are called (Metacontroller resyncs as often through its cache flush); 0 turns it off. "+
			"A CompositeController's spec.resyncPeriodSeconds and a hook's resyncAfterSeconds resync its parents more often. "+
			"The recorded author of every running controller is checked again as often (every 30m when 0), and on every start: "+
			"a controller whose author may no longer do what it does stops, Ready False with reason Forbidden.")
	fs.DurationVar(&o.DiscoveryInterval, "discovery-interval", o.DiscoveryInterval,
		"How often the target cluster's discovery is read again, so that a CompositeController whose CRD was installed later starts; "+
			"a resource that is not found is looked up again at once too.")
	fs.StringSliceVar(&o.HookDeniedCIDRs, "hook-denied-cidrs", o.HookDeniedCIDRs,
		"Address ranges (CIDRs) hooks may not be called at, whoever writes the controller: a URL naming an address in one "+
			"is refused when the controller is written, and every address a hook's host name resolves to is checked when "+
			"connecting (hooks use no proxy). The default keeps hooks off link-local addresses and the cloud metadata "+
			"endpoints, which would answer with this server's credentials; an empty value denies nothing.")
	fs.StringVar(&o.DefaultServiceAccount, "default-controller-service-account", o.DefaultServiceAccount,
		"NAMESPACE/NAME of a ServiceAccount that every controller naming none in spec.serviceAccount acts as, so that the "+
			"server's own rights serve nobody's controller (Flux's --default-service-account). The server must be allowed to "+
			"impersonate it; authors still need the rights their controller's loop uses. Related objects and hook credentials "+
			"are checked against both the account and the controller's author, so the account's rights are not pooled among "+
			"authors; unlike Flux's flag, the account is not looked up in each parent's namespace, which would need one there "+
			"for every controller installed without one.")
	fs.BoolVar(&o.RequireServiceAccount, "require-controller-service-account", o.RequireServiceAccount,
		"Refuse controllers that name no ServiceAccount in spec.serviceAccount (unless --default-controller-service-account gives them one), "+
			"and run none stored before with the server's own rights: each controller then acts only as its own identity, "+
			"whose rights kube-apiserver's RBAC judges.")
	fs.DurationVar(&o.FinalizeGrace, "finalize-grace", o.FinalizeGrace,
		"Once a parent's finalize hook has answered finalized, how long (from the parent's deletion) the loop keeps retrying "+
			"child deletes that fail before it removes the finalizer anyway and leaves the children to the garbage collector, "+
			"as Metacontroller does at once. Events say so on the parent meanwhile.")
	fs.DurationVar(&o.EchoTimeout, "echo-timeout", o.EchoTimeout,
		"How long the loop waits for the watch event of one of its own writes (a child, a parent's status) before it syncs the "+
			"parent anyway, to be safe: such an event normally comes within milliseconds, and one that does not was lost by a "+
			"watch that relisted past it.")
	fs.IntVar(&o.Workers, "workers", o.Workers,
		"Parents of one CompositeController synced at once, unless its spec.workers says otherwise. "+
			"A sync spends most of its time waiting (on the hook, then on one write per changed child), so the default of 32 "+
			"keeps one kube-apiserver busy; workers are goroutines, and an idle one costs nothing.")
	fs.Float32Var(&o.ChildEventsQPS, "child-events-qps", o.ChildEventsQPS,
		"Normal Events saying what syncs did to children (ChildCreated, ChildUpdated, ChildDeleted, ...) that one controller records per second, "+
			"past --child-events-burst; the others are not recorded, counted in composite_controller_child_events_dropped_total and said on the "+
			"controller once a minute. An Event costs kube-apiserver and etcd nearly what creating a ConfigMap does, one per parent whose children changed, "+
			"so this bounds what a thousand parents created at once add to the cluster. Warnings and rollout Events are always recorded. "+
			"0 records every one.")
	fs.IntVar(&o.ChildEventsBurst, "child-events-burst", o.ChildEventsBurst, "Normal Events about children one controller records at once, before --child-events-qps applies.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect,
		"Run the controller loop on one replica at a time, chosen with a Lease; every replica serves the API. Turn it on when running more than one replica.")
	fs.StringVar(&o.LeaderElection.Namespace, "leader-elect-namespace", o.LeaderElection.Namespace, "Namespace of the leader election Lease.")
	fs.StringVar(&o.LeaderElection.Name, "leader-elect-lease-name", o.LeaderElection.Name, "Name of the leader election Lease.")
	fs.DurationVar(&o.LeaderElection.LeaseDuration, "leader-elect-lease-duration", o.LeaderElection.LeaseDuration,
		"How long a leader's Lease lasts without renewal: how long a crashed leader's loop stays unrun.")
	fs.DurationVar(&o.LeaderElection.RenewDeadline, "leader-elect-renew-deadline", o.LeaderElection.RenewDeadline, "How long the leader tries to renew before giving the loop up.")
	fs.DurationVar(&o.LeaderElection.RetryPeriod, "leader-elect-retry-period", o.LeaderElection.RetryPeriod, "How often replicas try to get or renew the Lease.")
	fs.IntVar(&o.Shards, "shards", o.Shards,
		"Run the controller loop on every replica, each syncing a share of the parents: parents are hashed by namespace/name into "+
			"this many shards, and the live replicas divide the shards evenly among them with Leases (coordination.k8s.io) named "+
			"<--leader-elect-lease-name>-member-<replica> and <--leader-elect-lease-name>-shard-<n> in --leader-elect-namespace, "+
			"with the --leader-elect-lease-duration, -renew-deadline and -retry-period above: a replica stops syncing a shard it "+
			"cannot renew within the renew deadline, and a dead replica's shards are taken over once its Leases expire. "+
			"Every replica must have the same number; 32 divides evenly among up to about 10 replicas. 0 (the default) runs the loop "+
			"on every replica for all parents, or on the leader only with --leader-elect, which it excludes.")
	o.addMemoryFlags(fs)
}

// flagsWithoutEffectInStandalone are flags of the delegated mode that
// standalone mode would silently ignore; they are refused instead.
// --etcd-servers is not among them: standalone mode then uses that etcd
// instead of an embedded one (an etcd cluster's behaviour is tested so).
var flagsWithoutEffectInStandalone = []string{
	"etcd-servers-overrides", "authentication-", "authorization-", "requestheader-", "client-ca-file",
	"kubeconfig", "admission-", "enable-admission-plugins", "disable-admission-plugins", "leader-elect", "shards", "workers", "controller-loop", "target-",
	"register-apiservice", "apiservice-",
}

// Complete fills in what depends on other options.
func (o *Options) Complete() error {
	if err := o.ServerRunOptions.Complete(); err != nil {
		return err
	}
	if !o.Standalone {
		return nil
	}
	abs, err := filepath.Abs(o.DataDir)
	if err != nil {
		return fmt.Errorf("can't resolve --data-dir: %w", err)
	}
	o.DataDir = abs
	if o.WriteKubeconfig == "" {
		o.WriteKubeconfig = filepath.Join(o.DataDir, "kubeconfig")
	}
	ro := o.RecommendedOptions
	// Standalone mode authenticates and authorizes on its own and has no
	// Kubernetes API to ask: no delegation, no admission webhooks, no
	// priority and fairness (which watches kube-apiserver's objects).
	ro.Authentication = nil
	ro.Authorization = nil
	ro.CoreAPI = nil
	ro.Admission = nil
	ro.Features.EnablePriorityAndFairness = false
	if !o.flagChanged("bind-address") {
		ro.SecureServing.BindAddress = netutils.ParseIPSloppy("127.0.0.1")
	}
	if !o.flagChanged("cert-dir") {
		// Keep the certificate with the data, so the kubeconfig's CA stays
		// valid across restarts.
		ro.SecureServing.ServerCert.CertDirectory = filepath.Join(o.DataDir, "certs")
	}
	return nil
}

// Validate says what is wrong with the options, all at once.
func (o *Options) Validate() error {
	var errs []error
	etcd := &o.RecommendedOptions.Etcd.StorageConfig.Transport
	if o.Standalone && len(etcd.ServerList) == 0 {
		// The embedded etcd's address is known only once it runs; validate
		// the rest of the etcd options as if it were there.
		etcd.ServerList = []string{"http://127.0.0.1:2379"}
		defer func() { etcd.ServerList = nil }()
	}
	errs = append(errs, o.RecommendedOptions.Validate()...)
	errs = append(errs, o.ServerRunOptions.Validate()...)
	if o.Standalone {
		for _, name := range o.changedFlags {
			for _, prefix := range flagsWithoutEffectInStandalone {
				if strings.HasPrefix(name, prefix) {
					errs = append(errs, fmt.Errorf("--%s has no effect with --standalone, which runs its own etcd and authentication", name))
				}
			}
		}
	} else {
		for _, name := range []string{"data-dir", "write-kubeconfig"} {
			if o.flagChanged(name) {
				errs = append(errs, fmt.Errorf("--%s needs --standalone", name))
			}
		}
		if o.Workers < 1 {
			errs = append(errs, fmt.Errorf("--workers must be at least 1"))
		}
		if o.ChildEventsQPS < 0 || o.ChildEventsBurst < 1 {
			errs = append(errs, fmt.Errorf("--child-events-qps must not be negative and --child-events-burst must be at least 1"))
		}
		if o.Shards < 0 {
			errs = append(errs, fmt.Errorf("--shards must not be negative"))
		}
		if o.Shards > 0 && o.LeaderElect {
			errs = append(errs, fmt.Errorf("--shards and --leader-elect exclude each other: with shards every replica runs the loop for its share, with leader election one runs it for all"))
		}
		if len(o.RecommendedOptions.Etcd.StorageConfig.Transport.ServerList) == 0 {
			errs = append(errs, fmt.Errorf("--etcd-servers is required (or run with --standalone for an embedded etcd)"))
		}
	}
	errs = append(errs, o.Metacontroller.Validate(o.flagChanged)...)
	errs = append(errs, o.APIService.Validate()...)
	if _, err := hooks.ParseDestinations(o.HookDeniedCIDRs); err != nil {
		errs = append(errs, fmt.Errorf("--hook-denied-cidrs: %w", err))
	}
	if _, err := o.identityPolicy(); err != nil {
		errs = append(errs, err)
	}
	if err := o.validateGCPercent(); err != nil {
		errs = append(errs, err)
	}
	if _, err := o.goMemoryLimit(); err != nil {
		errs = append(errs, err)
	}
	return utilerrors.NewAggregate(errs)
}

// identityPolicy reads --default-controller-service-account and
// --require-controller-service-account.
func (o *Options) identityPolicy() (rights.IdentityPolicy, error) {
	p := rights.IdentityPolicy{Required: o.RequireServiceAccount}
	if o.DefaultServiceAccount == "" {
		return p, nil
	}
	namespace, name, ok := strings.Cut(o.DefaultServiceAccount, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return p, fmt.Errorf("--default-controller-service-account=%q: must be NAMESPACE/NAME", o.DefaultServiceAccount)
	}
	p.Default = &v1alpha1.ServiceAccountReference{Namespace: namespace, Name: name}
	return p, nil
}

// recordChangedFlags notes the flags given on the command line, by our
// names (Metacontroller's aliases count as the flag they set).
func (o *Options) recordChangedFlags(fs *pflag.FlagSet) {
	fs.Visit(func(f *pflag.Flag) { o.changedFlags = append(o.changedFlags, canonicalFlagName(f.Name)) })
}

func (o *Options) flagChanged(name string) bool {
	for _, n := range o.changedFlags {
		if n == name {
			return true
		}
	}
	return false
}

// Config turns the options into a server configuration.
func (o *Options) Config(ctx context.Context) (*apiserver.Config, error) {
	ro := o.RecommendedOptions
	if err := ro.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", o.AlternateDNS, []net.IP{netutils.ParseIPSloppy("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("can't create a self-signed serving certificate: %w", err)
	}

	serverConfig := genericapiserver.NewRecommendedConfig(apiserver.Codecs)
	namer := openapi.NewDefinitionNamer(apiserver.Scheme)
	serverConfig.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(generatedopenapi.GetOpenAPIDefinitions, namer)
	serverConfig.OpenAPIConfig.Info.Title = "composite-apiserver"
	serverConfig.OpenAPIConfig.Info.Version = "v1alpha1"
	serverConfig.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(generatedopenapi.GetOpenAPIDefinitions, namer)
	serverConfig.OpenAPIV3Config.Info.Title = "composite-apiserver"
	serverConfig.OpenAPIV3Config.Info.Version = "v1alpha1"
	if err := o.ServerRunOptions.ApplyTo(&serverConfig.Config); err != nil {
		return nil, err
	}
	if ro.Admission != nil {
		ro.ExtraAdmissionInitializers = disableAdmissionWithoutAPIs(ctx, ro.Admission)
	}
	if err := ro.ApplyTo(serverConfig); err != nil {
		return nil, err
	}
	config := &apiserver.Config{GenericConfig: serverConfig}
	destinations, err := hooks.ParseDestinations(o.HookDeniedCIDRs)
	if err != nil {
		return nil, fmt.Errorf("--hook-denied-cidrs: %w", err)
	}
	config.ExtraConfig.HookDestinations = destinations
	if config.ExtraConfig.Identity, err = o.identityPolicy(); err != nil {
		return nil, err
	}
	// The cluster of --kubeconfig (or the one the server runs in) is the
	// one whose parents and children are synced.
	if serverConfig.ClientConfig != nil {
		targetConfig := rest.CopyConfig(serverConfig.ClientConfig)
		targetConfig.QPS, targetConfig.Burst = o.TargetQPS, o.TargetBurst
		if ro.Traces == nil || ro.Traces.ConfigFile == "" {
			// Tracing nothing itself, the server only passes traces
			// on: the loop's requests, in none, skip the tracing
			// wrapper.
			target.TraceOnlyWithin(targetConfig)
		}
		cluster, err := target.New(targetConfig)
		if err != nil {
			return nil, err
		}
		config.ExtraConfig.Target = cluster
		config.ExtraConfig.DiscoveryInterval = o.DiscoveryInterval
		if o.ControllerLoop {
			config.ExtraConfig.Loop = &apiserver.LoopConfig{
				Settings: parentloop.Settings{
					Workers: o.Workers, ResyncPeriod: o.ResyncPeriod,
					EventsQPS: o.Metacontroller.EventsQPS, EventsBurst: o.Metacontroller.EventsBurst,
					ChildEventsQPS: o.ChildEventsQPS, ChildEventsBurst: o.ChildEventsBurst,
					FinalizeGrace: o.FinalizeGrace, EchoTimeout: o.EchoTimeout,
					// The Lease timings bound it in every mode: shards
					// take them too (shardConfig).
					StopGrace: o.LeaderElection.StopGrace(),
				},
				ControllerSelector: o.Metacontroller.controllerSelector(),
			}
			if o.LeaderElect {
				le := o.LeaderElection
				config.ExtraConfig.Loop.LeaderElection = &le
			}
			if o.Shards > 0 {
				config.ExtraConfig.Loop.Shards = o.shardConfig()
			}
		}
	}
	return config, nil
}

// Run runs the server until ctx is done.
func (o *Options) Run(ctx context.Context) error {
	logger := klog.FromContext(ctx)
	// First: the informers' first lists are the server's largest burst of
	// allocations.
	if err := o.applyMemoryLimit(logger); err != nil {
		return err
	}
	o.applyGCPercent(logger)
	var token string
	if o.Standalone {
		if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
			return fmt.Errorf("can't create --data-dir: %w", err)
		}
		if etcdServers := o.RecommendedOptions.Etcd.StorageConfig.Transport.ServerList; len(etcdServers) > 0 {
			logger.Info("Standalone mode with an external etcd", "etcdServers", etcdServers)
		} else {
			etcd, err := standalone.StartEtcd(o.DataDir)
			if err != nil {
				return err
			}
			// Stop etcd only after the server stopped using it.
			defer etcd.Close()
			logger.Info("Embedded etcd is serving", "dataDir", o.DataDir, "url", etcd.ClientURL)
			o.RecommendedOptions.Etcd.StorageConfig.Transport.ServerList = []string{etcd.ClientURL}
		}
		var err error
		if token, err = standalone.LoadOrCreateToken(o.DataDir); err != nil {
			return err
		}
	}

	config, err := o.Config(ctx)
	if err != nil {
		return err
	}
	if o.Standalone {
		config.GenericConfig.Authentication.Authenticator = standalone.Authenticator(token)
		config.GenericConfig.Authorization.Authorizer = standalone.Authorizer()
		config.ExtraConfig.PostStartHooks = map[string]genericapiserver.PostStartHookFunc{
			"standalone-kubeconfig": o.announceWhenReady(token, config.GenericConfig.SecureServing.Listener.Addr()),
		}
		logger.Info("Standalone mode: the controller loop is off, it needs a target cluster")
	}

	server, err := config.Complete().New()
	if err != nil {
		return err
	}
	generic := server.GenericAPIServer
	endpoints, err := o.Metacontroller.plainEndpoints(func() http.Handler { return generic.Handler.NonGoRestfulMux })
	if err != nil {
		return err
	}
	for name, hook := range endpoints {
		if err := generic.AddPostStartHook(name, hook); err != nil {
			return err
		}
	}
	if o.APIService.Register {
		hook, err := o.APIService.postStartHook(config.GenericConfig.ClientConfig)
		if err != nil {
			return err
		}
		if err := generic.AddPostStartHook("register-apiservice", hook); err != nil {
			return err
		}
	}
	// k8s.io/apiserver says so only at -v=1: whoever sees a pod keep
	// running after SIGTERM reads why, and for how long.
	stopLogging := context.AfterFunc(ctx, func() {
		logger.Info("Shutting down: /readyz fails from now on, requests are still served for --shutdown-delay-duration so that "+
			"load balancers and Services stop sending them here, then the server stops listening and drains those in flight",
			"shutdownDelayDuration", o.ServerRunOptions.ShutdownDelayDuration)
	})
	defer stopLogging()
	return generic.PrepareRun().RunWithContext(ctx)
}

// announceWhenReady writes the kubeconfig and prints its path once the
// server answers /readyz, so that whoever waits for that line can use it
// at once.
func (o *Options) announceWhenReady(token string, addr net.Addr) genericapiserver.PostStartHookFunc {
	return func(hookCtx genericapiserver.PostStartHookContext) error {
		// The self-signed certificate file holds the serving certificate
		// and the CA that signed it: trusting it is trusting the server.
		caPEM, err := os.ReadFile(o.RecommendedOptions.SecureServing.ServerCert.CertKey.CertFile)
		if err != nil {
			return fmt.Errorf("can't read the serving certificate for the kubeconfig: %w", err)
		}
		tcp, ok := addr.(*net.TCPAddr)
		if !ok {
			return fmt.Errorf("can't tell the serving address from %v", addr)
		}
		host := tcp.IP.String()
		if tcp.IP.IsUnspecified() {
			host = "127.0.0.1"
		}
		server := "https://" + net.JoinHostPort(host, fmt.Sprint(tcp.Port))
		if err := standalone.WriteKubeconfig(o.WriteKubeconfig, server, caPEM, token); err != nil {
			return err
		}
		// /readyz waits for every post-start hook, this one included, so
		// the wait runs on its own.
		go o.waitReadyAndPrint(hookCtx, hookCtx.LoopbackClientConfig)
		return nil
	}
}

func (o *Options) waitReadyAndPrint(ctx context.Context, loopback *rest.Config) {
	if err := waitReady(ctx, loopback); err != nil {
		return
	}
	fmt.Fprintf(o.Stdout, "composite-apiserver is ready. Use it with:\n  export KUBECONFIG=%s\n  kubectl get compositecontrollers\n", o.WriteKubeconfig)
}

// waitReady waits until the server's own /readyz passes, or ctx is done
// (then it returns ctx's error).
func waitReady(ctx context.Context, loopback *rest.Config) error {
	cfg := rest.CopyConfig(loopback)
	cfg.NegotiatedSerializer = apiserver.Codecs.WithoutConversion()
	client, err := rest.UnversionedRESTClientFor(cfg)
	if err != nil {
		klog.FromContext(ctx).Error(err, "Can't create a loopback client to wait for readiness")
		return err
	}
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		return client.Get().AbsPath("/readyz").Do(ctx).Error() == nil, nil
	})
}
