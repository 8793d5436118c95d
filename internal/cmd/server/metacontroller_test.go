package server

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	cliflag "k8s.io/component-base/cli/flag"
)

// parse reads args as the binary does, up to validation: with the flag
// normalization component-base's cli.Run installs before it executes the
// command (it replaces any the command set).
func parse(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	o := NewOptions(io.Discard, io.Discard)
	cmd := NewCommand(context.Background(), o)
	cmd.SetGlobalNormalizationFunc(cliflag.WordSepNormalizeFunc)
	if err := cmd.ParseFlags(append([]string{"--etcd-servers=http://127.0.0.1:2379"}, args...)); err != nil {
		return o, err
	}
	o.recordChangedFlags(cmd.Flags())
	if err := o.Complete(); err != nil {
		return o, err
	}
	return o, o.Validate()
}

// TestMetacontrollerFlagsMeanTheSameHere: Metacontroller's flags whose
// meaning is ours set our options.
func TestMetacontrollerFlagsMeanTheSameHere(t *testing.T) {
	o, err := parse(t, "--client-go-qps=7", "--client-go-burst=11", "--leader-election",
		"--leader-election-namespace=mc", "--leader-election-id=lock", "--cache-flush-interval=10m",
		"--leader-election-resource-lock=leases", "--apply-strategy=server-side-apply",
		"--target-label-selector=controller-group=cicd", "--events-qps=0.5", "--events-burst=3",
		"--metrics-address=127.0.0.1:0", "--health-probe-bind-address=127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if o.TargetQPS != 7 || o.TargetBurst != 11 {
		t.Errorf("--client-go-qps/--client-go-burst: target QPS %v, burst %d", o.TargetQPS, o.TargetBurst)
	}
	if !o.LeaderElect || o.LeaderElection.Namespace != "mc" || o.LeaderElection.Name != "lock" {
		t.Errorf("--leader-election*: %v %+v", o.LeaderElect, o.LeaderElection)
	}
	if o.ResyncPeriod != 10*time.Minute {
		t.Errorf("--cache-flush-interval: resync period %s", o.ResyncPeriod)
	}
	if sel := o.Metacontroller.controllerSelector(); sel == nil || sel.String() != "controller-group=cicd" {
		t.Errorf("--target-label-selector: %v", sel)
	}
	if o.Metacontroller.EventsQPS != 0.5 || o.Metacontroller.EventsBurst != 3 {
		t.Errorf("--events-qps/--events-burst: %v %d", o.Metacontroller.EventsQPS, o.Metacontroller.EventsBurst)
	}
}

// TestMetacontrollerFlagsThatMeanOtherwiseAreRefused: a flag of
// Metacontroller's whose meaning is not ours is refused, naming what to
// use, rather than silently ignored.
func TestMetacontrollerFlagsThatMeanOtherwiseAreRefused(t *testing.T) {
	for _, tc := range []struct{ arg, want string }{
		{"--apply-strategy=dynamic-apply", "always written with server-side apply"},
		{"--apply-strategy-ssa-field-manager=metacontroller", "metacontroller.k8s.io/<controller>"},
		{"--leader-election-resource-lock=configmaps", "always uses a Lease"},
		{"--zap-devel", "klog"},
		{"--zap-log-level=5", "use -v"},
		{"--pprof-address=:6060", "/debug/pprof"},
		{"--target-label-selector=a in", "--target-label-selector"},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			_, err := parse(t, tc.arg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%s: %v, want an error naming %q", tc.arg, err, tc.want)
			}
		})
	}
}
