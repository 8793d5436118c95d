package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestRollingRestartFailsNoRequest restarts, one by one, every replica of
// the Deployment the chart renders with its default values (rollingRestarts
// rounds), while `kubectl
// get compositecontrollers` runs in a loop through kube-apiserver: none of
// its requests may fail. The replicas run the Deployment's own arguments
// (but for where they run), and framework.Prober and framework.Service
// play kubelet's and the Service's parts from the Deployment's probes: a
// replica gets connections while its readiness probe, run at the rendered
// period and thresholds, says it is ready. Each restart is what a drain
// does to a pod: SIGTERM, up to terminationGracePeriodSeconds for it to
// end, then its replacement from the same arguments, ready before the next
// replica goes. Without a shutdown delay a replica stops listening at once
// while the Service still sends it new connections, and the aggregator
// answers those requests 503.
func TestRollingRestartFailsNoRequest(t *testing.T) {
	// Sequential: it starts replicas, routes the APIService every other test uses to them, and restarts them.
	suite.SetUp(t)
	ctx := context.Background()
	d, err := framework.ChartDeployment(framework.CompositeNamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	replicas := int(ptr.Deref(d.Spec.Replicas, 1))
	if replicas < 2 {
		t.Fatalf("the chart's Deployment runs %d replica: a restart can't keep serving", replicas)
	}
	grace := time.Duration(ptr.Deref(d.Spec.Template.Spec.TerminationGracePeriodSeconds, corev1.DefaultTerminationGracePeriodSeconds)) * time.Second
	args := framework.DeploymentServerArgs(d)
	t.Logf("%d replicas with %q, terminationGracePeriodSeconds %s", replicas, args, grace)

	svc, err := framework.StartService()
	if err != nil {
		t.Fatal(err)
	}
	defer svc.Close()
	pods := make([]*pod, replicas)
	for i := range pods {
		pods[i] = startPod(t, svc, d, fmt.Sprintf("rolling-%d", i), args)
	}
	restore, err := suite.RouteAPIServiceTo(ctx, svc.Port())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := restore(); err != nil {
			t.Error(err)
		}
	}()
	if err := suite.WaitServedThrough(ctx, svc); err != nil {
		t.Fatal(err)
	}

	loop := startKubectlLoop(ctx, 2, t.TempDir())
	started := time.Now()
	for round := 1; round <= rollingRestarts; round++ {
		for i := range pods {
			pods[i] = restartPod(t, svc, d, pods[i], fmt.Sprintf("rolling-%d-%d", i, round), args, grace, loop)
		}
	}
	runs := loop.stop()
	for _, p := range pods {
		p.stop(t, svc)
	}

	var failed []string
	for _, r := range runs {
		if r.err != nil {
			failed = append(failed, fmt.Sprintf("at +%s: %v: %s", r.start.Sub(started).Round(100*time.Millisecond), r.err, strings.TrimSpace(r.stderr)))
		}
	}
	t.Logf("rolling restart of %d replicas in %s: %d kubectl requests, %d failed; connections by replica %v; connections refused %d",
		replicas, time.Since(started).Round(100*time.Millisecond), len(runs), len(failed), svc.Routed(), len(svc.Unrouted()))
	if len(failed) > 0 {
		t.Errorf("%d of %d requests through kube-apiserver failed during the rolling restart:\n%s\nconnections the Service refused: %v",
			len(failed), len(runs), strings.Join(failed, "\n"), svc.Unrouted())
	}
}

// TestEtcdOutageMakesReplicasUnreadyNotRestarted runs a replica of each
// Deployment an admin installs (the chart's, artifacts/deploy's) with its
// own arguments and probes, and kills etcd: each replica's readiness probe
// fails, so the Service sends it nothing, while its liveness probe keeps
// passing for as long as kubelet would take to restart it
// (failureThreshold probes): an etcd outage does not put every replica
// into a restart loop, and once etcd is back they are ready again at once.
func TestEtcdOutageMakesReplicasUnreadyNotRestarted(t *testing.T) {
	// Sequential: it kills the etcd every other test's objects of ours are stored in.
	suite.SetUp(t)
	ctx := context.Background()
	chart, err := framework.ChartDeployment(framework.CompositeNamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := framework.ShippedDeployment()
	if err != nil {
		t.Fatal(err)
	}
	pods := []*pod{
		startPod(t, nil, chart, "etcd-outage-chart", framework.DeploymentServerArgs(chart)),
		startPod(t, nil, shipped, "etcd-outage-deploy", framework.DeploymentServerArgs(shipped)),
	}

	suite.KillEtcd()
	back := false
	defer func() {
		if !back {
			if err := suite.RestartEtcd(ctx); err != nil {
				t.Error(err)
			}
		}
	}()
	for _, p := range pods {
		if err := p.prober.WaitReady(ctx, false, 2*time.Minute); err != nil {
			t.Fatalf("with etcd down: %v", err)
		}
	}
	unready := time.Now()
	for _, p := range pods {
		probe := p.container.LivenessProbe
		if probe == nil {
			t.Fatalf("%s has no liveness probe", p.proc.Name)
		}
		// kubelet restarts a container after failureThreshold failures in
		// a row (3 by default, every 10 s by default).
		want := int(max(probe.FailureThreshold, 3))
		period := time.Duration(max(probe.PeriodSeconds, 10)) * time.Second
		var results []framework.ProbeResult
		err := wait.PollUntilContextTimeout(ctx, time.Second, time.Duration(want)*period+2*time.Minute, true, func(ctx context.Context) (bool, error) {
			results = p.prober.LivenessSince(unready)
			return len(results) >= want, nil
		})
		if err != nil {
			t.Fatalf("%s's liveness probe ran %d times with etcd down, want %d: %v", p.proc.Name, len(results), want, err)
		}
		for _, r := range results {
			if !r.Passed {
				t.Errorf("%s's liveness probe %s failed with etcd down: %s", p.proc.Name, probe.HTTPGet.Path, r.Detail)
			}
		}
		if restarts := p.prober.Restarts(); len(restarts) > 0 {
			t.Errorf("kubelet would have restarted %s with etcd down: %v", p.proc.Name, restarts)
		}
		t.Logf("%s: unready with etcd down, liveness %s passed %d times in a row over %s", p.proc.Name, probe.HTTPGet.Path,
			len(results), time.Since(unready).Round(time.Second))
	}

	back = true
	if err := suite.RestartEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if err := p.prober.WaitReady(ctx, true, 2*time.Minute); err != nil {
			t.Errorf("with etcd back: %v", err)
		}
		p.stop(t, nil)
	}
	if err := suite.WaitAuthenticatedRequests(ctx); err != nil {
		t.Fatal(err)
	}
}

// rollingRestarts is how many times every replica is restarted: each
// restart of the replica that holds kube-apiserver's connection makes the
// aggregator connect anew, through the Service, which without a shutdown
// delay may pick the replica that has stopped listening; two rounds make
// that chance come at least three times.
const rollingRestarts = 2

// restartPod stops old as kubelet stops a container (SIGTERM, then up to
// grace), starts its replacement named name from the same arguments, and
// returns it once ready.
func restartPod(t *testing.T, svc *framework.Service, d *appsv1.Deployment, old *pod, name string, args []string, grace time.Duration, loop *kubectlLoop) *pod {
	t.Helper()
	sigterm := time.Now()
	if err := old.proc.Stop(grace); err != nil {
		t.Errorf("%v: past terminationGracePeriodSeconds kubelet kills it, cutting its requests", err)
	}
	exited := time.Now()
	old.stop(t, svc)
	if log := old.proc.Tail(1 << 20); !strings.Contains(log, "Shutting down") {
		t.Errorf("%s logged no line saying it was shutting down (%s)", old.proc.Name, old.proc.LogFile)
	}
	replacement := startPod(t, svc, d, name, args)
	during := loop.completedBetween(sigterm, exited)
	t.Logf("%s ended %s after SIGTERM, %d requests completed meanwhile; %s was ready %s after that",
		old.proc.Name, exited.Sub(sigterm).Round(100*time.Millisecond), during, name, time.Since(exited).Round(100*time.Millisecond))
	if during == 0 {
		t.Errorf("no request completed while %s shut down: the measurement measured nothing", old.proc.Name)
	}
	return replacement
}

// pod is one replica of a Deployment run as a process, probed as kubelet
// would probe it and an endpoint of a Service while ready.
type pod struct {
	proc      *framework.Process
	prober    *framework.Prober
	container corev1.Container
}

// startPod starts a replica of d named name with args, an endpoint of svc
// when given, and returns it once its probes say it is ready. It is
// stopped when the test ends.
func startPod(t *testing.T, svc *framework.Service, d *appsv1.Deployment, name string, args []string) *pod {
	t.Helper()
	ctx := context.Background()
	c := d.Spec.Template.Spec.Containers[0]
	proc := suite.MustStartReplica(t, ctx, name, args...)
	pr, err := framework.StartProber(proc, c)
	if err != nil {
		proc.Kill()
		t.Fatal(err)
	}
	p := &pod{proc: proc, prober: pr, container: c}
	t.Cleanup(func() {
		pr.Stop()
		if err := proc.Stop(time.Minute); err != nil {
			t.Error(err)
		}
	})
	if svc != nil {
		if err := svc.Add(proc, pr); err != nil {
			t.Fatal(err)
		}
	}
	if err := pr.WaitReady(ctx, true, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	return p
}

// stop stops probing the replica and takes it out of the Service, failing
// t if kubelet would have restarted it meanwhile.
func (p *pod) stop(t *testing.T, svc *framework.Service) {
	t.Helper()
	p.prober.Stop()
	if svc != nil {
		svc.Remove(p.proc)
	}
	if restarts := p.prober.Restarts(); len(restarts) > 0 {
		t.Errorf("kubelet would have restarted %s: %v", p.proc.Name, restarts)
	}
}

// kubectlLoop runs `kubectl get compositecontrollers` through
// kube-apiserver, over and over, recording each run.
type kubectlLoop struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	runs   []kubectlRun
}

type kubectlRun struct {
	start, end time.Time
	err        error
	stderr     string
}

// startKubectlLoop runs loops loops side by side, sharing the discovery
// cache cacheDir as a user's kubectl runs do.
func startKubectlLoop(ctx context.Context, loops int, cache string) *kubectlLoop {
	ctx, cancel := context.WithCancel(ctx)
	l := &kubectlLoop{cancel: cancel}
	for range loops {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for ctx.Err() == nil {
				r := kubectlRun{start: time.Now()}
				_, r.stderr, r.err = suite.Kubectl(ctx, "get", "compositecontrollers", "-o", "name", "--cache-dir", cache)
				r.end = time.Now()
				if ctx.Err() != nil {
					// Cut short by stop: not a request that failed.
					return
				}
				l.mu.Lock()
				l.runs = append(l.runs, r)
				l.mu.Unlock()
			}
		}()
	}
	return l
}

// completedBetween counts the runs that started and ended within [from, to].
func (l *kubectlLoop) completedBetween(from, to time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.runs {
		if !r.start.Before(from) && !r.end.After(to) {
			n++
		}
	}
	return n
}

// stop ends the loops and returns every run.
func (l *kubectlLoop) stop() []kubectlRun {
	l.cancel()
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.runs
}
