package replicas

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	"github.com/composite-apiserver/composite-apiserver/internal/cmd/server"
)

// TestShippedDeploymentsSetTheGoMemoryLimitFromTheContainersLimit: each
// Deployment an admin can install (the chart with its default values, and
// artifacts/deploy) has a memory limit and passes it to the server
// ($COMPOSITE_MEMORY_LIMIT, from the downward API); a server run with that
// Deployment's arguments, in the environment the kubelet would give its
// container, runs with the Go runtime's soft memory limit (GOMEMLIMIT, as
// its /metrics' go_gc_gomemlimit_bytes reports it) at the Deployment's
// --memory-limit-ratio (or the default's) of the container's limit, and
// with the collector's target of the Deployment's --gc-percent (or the
// default's, 200: go_gc_gogc_percent), and says both in its log.
func TestShippedDeploymentsSetTheGoMemoryLimitFromTheContainersLimit(t *testing.T) {
	// Sequential: starts replicas, and t.Setenv may not be used in a parallel test.
	suite.SetUpHellos(t)
	for _, c := range []struct {
		name       string
		deployment func() (*appsv1.Deployment, error)
	}{
		{"chart", func() (*appsv1.Deployment, error) {
			return framework.ChartDeployment(framework.CompositeNamespace, "")
		}},
		{"artifacts-deploy", framework.ShippedDeployment},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, err := c.deployment()
			if err != nil {
				t.Fatal(err)
			}
			limit := d.Spec.Template.Spec.Containers[0].Resources.Limits.Memory()
			if limit.IsZero() {
				t.Fatalf("Deployment %s sets no memory limit", d.Name)
			}
			value, err := framework.ContainerEnvVar(d, server.MemoryLimitEnv)
			if err != nil {
				t.Fatal(err)
			}
			o, err := framework.DeploymentOptions(d)
			if err != nil {
				t.Fatal(err)
			}
			want := int64(float64(limit.Value()) * o.MemoryLimitRatio)

			// The replica inherits this process's environment.
			t.Setenv("GOMEMLIMIT", "")
			t.Setenv("GOGC", "")
			t.Setenv(server.MemoryLimitEnv, value)
			// Its loop is off: it would sync, beside the stack's server,
			// the parents that other tests leave behind; the memory limit
			// is set before the loop would start, whether or not it runs.
			args := append(framework.DeploymentServerArgs(d), "--controller-loop=false")
			p := suite.MustStartReplica(t, context.Background(), "memory-limit-"+c.name, args...)
			defer p.Stop(30 * time.Second)

			// Ready, the replica may not have read kube-apiserver's
			// front-proxy CA yet (it does so in the background), and
			// answers the test's first requests as anonymous's.
			got := replicaMetric(t, p, "go_gc_gomemlimit_bytes")
			if int64(got) != want {
				t.Errorf("the server runs with a Go memory limit of %.0f bytes, want %d: %.2f of the container's limit %s ($%s=%s)",
					got, want, o.MemoryLimitRatio, limit, server.MemoryLimitEnv, value)
			}
			gogc := replicaMetric(t, p, "go_gc_gogc_percent")
			if int(gogc) != o.GCPercent {
				t.Errorf("the server runs with the collector's target GOGC=%.0f, want the Deployment's --gc-percent %d (the default: %d)",
					gogc, o.GCPercent, server.DefaultGCPercent)
			}
			log, err := os.ReadFile(p.LogFile)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range []string{"Go runtime's soft memory limit set from the container's", "Garbage collector's target set"} {
				if !strings.Contains(string(log), want) {
					t.Errorf("the server's log does not say %q:\n%s", want, p.Tail(2000))
				}
			}
		})
	}
}

// TestGOGCInTheEnvironmentWinsOverTheServersTarget: an operator who sets
// GOGC in the container's environment gets that target, not --gc-percent,
// and the log says which was ignored.
func TestGOGCInTheEnvironmentWinsOverTheServersTarget(t *testing.T) {
	// Sequential: starts a replica, and t.Setenv may not be used in a parallel test.
	suite.SetUpHellos(t)
	t.Setenv("GOGC", "150")
	p := suite.MustStartReplica(t, context.Background(), "gogc-env", "--controller-loop=false", "--gc-percent=300")
	defer p.Stop(30 * time.Second)
	gogc := replicaMetric(t, p, "go_gc_gogc_percent")
	if gogc != 150 {
		t.Errorf("the server runs with GOGC=%.0f, want the environment's 150 over --gc-percent=300", gogc)
	}
	log, err := os.ReadFile(p.LogFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "GOGC is set: the garbage collector's target is left as it says") || !strings.Contains(string(log), "ignoredGCPercent=300") {
		t.Errorf("the server's log does not say that GOGC wins over --gc-percent=300:\n%s", p.Tail(2000))
	}
}

// replicaMetric is the value of metric (one sample) on p's /metrics, read
// until the replica answers.
func replicaMetric(t *testing.T, p *framework.Process, metric string) float64 {
	t.Helper()
	var got float64
	suite.Eventually(t, "the replica's "+metric, func() (bool, error) {
		var err error
		got, err = metricOf(p, metric, "")
		return err == nil, err
	})
	return got
}
