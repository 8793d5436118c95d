package framework

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/utils/ptr"
)

// e2e/cluster proves the chart's probes and shutdown delay through a
// rolling restart and an etcd outage (TestRollingRestartFailsNoRequest,
// TestEtcdOutageMakesReplicasUnreadyNotRestarted); artifacts/deploy's
// Deployment must carry the same, and the chart's the delay its values
// give.
func TestShippedDeploymentProbesAndStopsAsTheChart(t *testing.T) {
	chart, err := ChartDeployment(chartNamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	shipped, err := ShippedDeployment()
	if err != nil {
		t.Fatal(err)
	}
	c, s := chart.Spec.Template.Spec.Containers[0], shipped.Spec.Template.Spec.Containers[0]
	for name, probes := range map[string][2]any{
		"startupProbe":   {c.StartupProbe, s.StartupProbe},
		"readinessProbe": {c.ReadinessProbe, s.ReadinessProbe},
		"livenessProbe":  {c.LivenessProbe, s.LivenessProbe},
	} {
		if !equality.Semantic.DeepEqual(probes[0], probes[1]) {
			t.Errorf("%s: the chart's is %+v, artifacts/deploy's %+v", name, probes[0], probes[1])
		}
	}
	grace := func(g *int64) int64 { return ptr.Deref(g, 30) }
	if g, h := grace(chart.Spec.Template.Spec.TerminationGracePeriodSeconds), grace(shipped.Spec.Template.Spec.TerminationGracePeriodSeconds); g != h {
		t.Errorf("terminationGracePeriodSeconds: the chart's is %d, artifacts/deploy's %d", g, h)
	}
	co, err := DeploymentOptions(chart)
	if err != nil {
		t.Fatal(err)
	}
	so, err := DeploymentOptions(shipped)
	if err != nil {
		t.Fatal(err)
	}
	delay, shippedDelay := co.ServerRunOptions.ShutdownDelayDuration, so.ServerRunOptions.ShutdownDelayDuration
	if delay != shippedDelay {
		t.Errorf("--shutdown-delay-duration: the chart's is %s, artifacts/deploy's %s", delay, shippedDelay)
	}
	if delay == 0 {
		t.Errorf("the chart's Deployment has no --shutdown-delay-duration: a stopped replica stops listening while its Service still sends it connections")
	}

	// The values set the delay and the grace period.
	custom, err := ChartDeployment(chartNamespace, "", "shutdown.delaySeconds=30", "shutdown.terminationGracePeriodSeconds=90")
	if err != nil {
		t.Fatal(err)
	}
	o, err := DeploymentOptions(custom)
	if err != nil {
		t.Fatal(err)
	}
	if got := o.ServerRunOptions.ShutdownDelayDuration.String(); got != "30s" {
		t.Errorf("shutdown.delaySeconds=30 renders --shutdown-delay-duration=%s", got)
	}
	if got := grace(custom.Spec.Template.Spec.TerminationGracePeriodSeconds); got != 90 {
		t.Errorf("shutdown.terminationGracePeriodSeconds=90 renders %d", got)
	}
}
