package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/labels"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/klog/v2"
)

// Metacontroller's operational surface: an operator who switches from
// Metacontroller keeps its flags where they mean the same here, is told
// which of ours to use where they do not, and can keep its plain-HTTP
// metrics and health probe endpoints and its metric names.

// metacontrollerAliases are Metacontroller's flags that mean what one of
// ours means, by our name.
var metacontrollerAliases = map[string]string{
	"client-go-qps":             "target-qps",
	"client-go-burst":           "target-burst",
	"leader-election":           "leader-elect",
	"leader-election-namespace": "leader-elect-namespace",
	"leader-election-id":        "leader-elect-lease-name",
	"cache-flush-interval":      "resync-period",
}

// addMetacontrollerAliases adds each of Metacontroller's names of our flags
// as a hidden flag that shares our flag's value. Aliases by flag rather
// than by the flag set's normalization: component-base's cli.Run, which
// runs the command, replaces the normalization with its own, and the
// aliases went with it ("unknown flag: --client-go-qps" from the binary
// while a test that parsed without cli.Run passed).
func addMetacontrollerAliases(fs *pflag.FlagSet) {
	for alias, ours := range metacontrollerAliases {
		f := fs.Lookup(ours)
		if f == nil {
			panic(fmt.Sprintf("Metacontroller's --%s names --%s, which is not a flag", alias, ours))
		}
		fs.AddFlag(&pflag.Flag{
			Name:        alias,
			Usage:       fmt.Sprintf("Metacontroller's name of --%s.", ours),
			Value:       f.Value,
			DefValue:    f.DefValue,
			NoOptDefVal: f.NoOptDefVal,
			Hidden:      true,
		})
	}
}

// canonicalFlagName is the name of our flag that name, given on the
// command line, sets.
func canonicalFlagName(name string) string {
	if ours, ok := metacontrollerAliases[name]; ok {
		return ours
	}
	return name
}

// metacontrollerOnly are Metacontroller's flags with no counterpart of the
// same meaning here: accepted with the one value that means what this
// server does (ok), refused with any other, naming what to use instead.
var metacontrollerOnly = []struct {
	name, ok, instead string
}{
	{"leader-election-resource-lock", "leases", "leader election always uses a Lease (coordination.k8s.io)"},
	{"apply-strategy", "server-side-apply", "children are always written with server-side apply"},
	{"apply-strategy-ssa-field-manager", "", "each controller applies as the field manager metacontroller.k8s.io/<controller>; children applied by Metacontroller are taken over from its manager"},
	{"pprof-address", "0", "profiles are served on the secure port at /debug/pprof (--profiling)"},
	{"zap-devel", "", "logging is klog's: use -v and --logging-format"},
	{"zap-log-level", "", "logging is klog's: use -v"},
	{"zap-encoder", "", "logging is klog's: use --logging-format"},
	{"zap-stacktrace-level", "", "logging is klog's"},
	{"zap-time-encoding", "", "logging is klog's"},
}

// MetacontrollerOptions are the options that give Metacontroller's
// operators what its flags gave them.
type MetacontrollerOptions struct {
	// MetricsAddress serves /metrics over plain HTTP, unauthenticated, as
	// Metacontroller's --metrics-address does; empty or "0" serves none
	// (the secure port's /metrics is always there).
	MetricsAddress string
	// HealthProbeAddress serves /healthz, /livez and /readyz over plain
	// HTTP for kubelet probes; empty or "0" serves none.
	HealthProbeAddress string
	// TargetLabelSelector restricts the loop to the CompositeControllers
	// it selects, so that several installations can share a cluster.
	TargetLabelSelector string
	// EventsQPS and EventsBurst limit the Events recorded per object.
	EventsQPS   float32
	EventsBurst int

	refused map[string]*string
}

func newMetacontrollerOptions() MetacontrollerOptions {
	// Metacontroller's defaults, which are client-go's: an object's Events
	// of one reason come at most 25 at once, then one every five minutes.
	return MetacontrollerOptions{EventsQPS: 1. / 300., EventsBurst: 25}
}

// AddFlags adds the flags of Metacontroller's kept here, and the hidden
// ones it refuses with a reason.
func (o *MetacontrollerOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.MetricsAddress, "metrics-address", o.MetricsAddress,
		"Also serve /metrics over plain HTTP at this address (e.g. :9999), as Metacontroller does. "+
			"UNAUTHENTICATED: anyone who reaches it reads the metrics. Empty or 0 serves none; the secure port's /metrics needs authorization.")
	fs.StringVar(&o.HealthProbeAddress, "health-probe-bind-address", o.HealthProbeAddress,
		"Also serve /healthz, /livez and /readyz over plain HTTP at this address (e.g. :8081), for probes that can't "+
			"speak TLS, as Metacontroller's flag does. Empty or 0 serves none.")
	fs.StringVar(&o.TargetLabelSelector, "target-label-selector", o.TargetLabelSelector,
		"Run the loop only for the CompositeControllers this label selector selects (e.g. controller-group=cicd), "+
			"as Metacontroller's flag does, so that several installations can share a cluster. Every controller is still served by the API.")
	fs.Float32Var(&o.EventsQPS, "events-qps", o.EventsQPS, "Events per second recorded for one object and reason, past --events-burst.")
	fs.IntVar(&o.EventsBurst, "events-burst", o.EventsBurst, "Events recorded for one object and reason at once.")
	o.refused = map[string]*string{}
	for _, f := range metacontrollerOnly {
		v := new(string)
		o.refused[f.name] = v
		fs.StringVar(v, f.name, "", "Metacontroller's; "+f.instead+".")
		_ = fs.MarkHidden(f.name)
		if f.name == "zap-devel" {
			// A boolean in Metacontroller: --zap-devel alone.
			fs.Lookup(f.name).NoOptDefVal = "true"
		}
	}
}

// Validate refuses Metacontroller's flags whose meaning is not ours, and
// checks the selector.
func (o *MetacontrollerOptions) Validate(changed func(string) bool) []error {
	var errs []error
	for _, f := range metacontrollerOnly {
		if !changed(f.name) {
			continue
		}
		if v := *o.refused[f.name]; f.ok == "" || v != f.ok {
			errs = append(errs, fmt.Errorf("--%s=%s is Metacontroller's and has no effect here: %s", f.name, v, f.instead))
		}
	}
	if _, err := labels.Parse(o.TargetLabelSelector); err != nil {
		errs = append(errs, fmt.Errorf("--target-label-selector: %w", err))
	}
	if o.EventsBurst < 1 || o.EventsQPS <= 0 {
		errs = append(errs, errors.New("--events-qps must be positive and --events-burst at least 1"))
	}
	return errs
}

// controllerSelector is the parsed --target-label-selector; nil selects
// every controller.
func (o *MetacontrollerOptions) controllerSelector() labels.Selector {
	sel, err := labels.Parse(o.TargetLabelSelector)
	if err != nil || sel.Empty() {
		return nil
	}
	return sel
}

// plainEndpoints listens, before the server starts, on the plain-HTTP
// addresses asked for (so that a taken port fails the start), and returns
// the post-start hooks that serve them: /metrics from the same registry as
// the secure port, the health checks from the generic server's own
// handlers, without authentication.
func (o *MetacontrollerOptions) plainEndpoints(health func() http.Handler) (map[string]genericapiserver.PostStartHookFunc, error) {
	hooks := map[string]genericapiserver.PostStartHookFunc{}
	serve := func(name, addr string, handler func() http.Handler) error {
		if addr == "" || addr == "0" {
			return nil
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("can't listen on --%s=%s: %w", name, addr, err)
		}
		hooks["serve-"+name] = func(ctx genericapiserver.PostStartHookContext) error {
			srv := &http.Server{Handler: handler(), ReadHeaderTimeout: 10 * time.Second}
			go func() {
				<-ctx.Done()
				shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				_ = srv.Shutdown(shutdown)
			}()
			go func() {
				klog.FromContext(ctx).Info("Serving over plain HTTP", "flag", name, "address", l.Addr().String())
				if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
					klog.FromContext(ctx).Error(err, "Plain HTTP endpoint stopped", "flag", name)
				}
			}()
			return nil
		}
		return nil
	}
	metrics := func() http.Handler {
		mux := http.NewServeMux()
		mux.Handle("/metrics", legacyregistry.Handler())
		return mux
	}
	if err := serve("metrics-address", o.MetricsAddress, metrics); err != nil {
		return nil, err
	}
	probes := func() http.Handler {
		mux := http.NewServeMux()
		h := health()
		for _, path := range []string{"/healthz", "/livez", "/readyz"} {
			mux.Handle(path, h)
			mux.Handle(path+"/", h)
		}
		return mux
	}
	if err := serve("health-probe-bind-address", o.HealthProbeAddress, probes); err != nil {
		return nil, err
	}
	return hooks, nil
}
