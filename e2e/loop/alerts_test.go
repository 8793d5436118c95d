package loop

import (
	"context"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestAlertRulesNameServedMetrics renders the chart's PrometheusRule
// (ci/managed-values.yaml) and holds every metric its alerts name to what
// is really served: the server's /metrics, once its loop has synced a
// parent and a hook has failed (a series appears with its first sample),
// or, for the APIService's availability, kube-apiserver's /metrics. An
// alert on a metric nobody exports never fires.
func TestAlertRulesNameServedMetrics(t *testing.T) {
	t.Parallel()
	hook := suite.HelloHook(t)
	const name = "loop-alert-metrics"
	ns := suite.Namespace(t, name)
	framework.HelloController{Name: name, HookURL: hook.URL}.Create(t, suite)
	suite.CreateHello(t, ns, "p", name, framework.HelloSpec("blue", "a"))
	suite.WaitConfigMaps(t, ns, "p-a")
	if err := hook.SetMode("error500"); err != nil {
		t.Fatal(err)
	}
	suite.SetHelloSpec(t, ns, "p", framework.HelloSpec("green", "a"))
	suite.Eventually(t, "a failed hook call in /metrics", func() (bool, error) {
		return strings.Contains(suite.CompositeGet(t, "/metrics"), `composite_hook_errors_total{controller="`+name+`"`), nil
	})

	server := sampleNames(suite.CompositeGet(t, "/metrics"))
	raw, err := suite.Kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	kubeAPIServer := sampleNames(string(raw))

	alerts := chartAlerts(t)
	if len(alerts) < 4 {
		t.Fatalf("the chart's PrometheusRule has %d alerts, want one each for hook errors, sync latency, queue depth and the APIService: %v", len(alerts), alerts)
	}
	for alert, metrics := range alerts {
		if len(metrics) == 0 {
			t.Errorf("alert %s names no metric", alert)
		}
		for _, m := range metrics {
			switch {
			case server[m]:
			case kubeAPIServer[m] && strings.HasPrefix(m, "aggregator_"):
			default:
				t.Errorf("alert %s names %s, which neither composite-apiserver's /metrics nor (for the aggregator's) kube-apiserver's serves", alert, m)
			}
		}
	}
}

// sampleNames are the names of the samples of a Prometheus text
// exposition.
func sampleNames(exposition string) map[string]bool {
	out := map[string]bool{}
	for _, line := range strings.Split(exposition, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			out[line[:i]] = true
		}
	}
	return out
}

// selectorName is a metric name followed by its label matchers, as the
// chart's alert expressions write every series they read.
var selectorName = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{`)

// chartAlerts are the alerts of the chart's PrometheusRule with the
// metrics each expression reads.
func chartAlerts(t *testing.T) map[string][]string {
	t.Helper()
	modes, err := framework.ChartModes()
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := framework.RenderChart(framework.CompositeNamespace, modes["managed"])
	if err != nil {
		t.Fatal(err)
	}
	objs, err := framework.SplitManifests(rendered)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	for _, o := range objs {
		if o.Kind != "PrometheusRule" {
			continue
		}
		var rule struct {
			Spec struct {
				Groups []struct {
					Rules []struct{ Alert, Expr string }
				}
			}
		}
		if err := yaml.Unmarshal([]byte(o.YAML), &rule); err != nil {
			t.Fatal(err)
		}
		for _, g := range rule.Spec.Groups {
			for _, r := range g.Rules {
				metrics := []string{}
				for _, m := range selectorName.FindAllStringSubmatch(r.Expr, -1) {
					metrics = append(metrics, m[1])
				}
				sort.Strings(metrics)
				out[r.Alert] = metrics
			}
		}
	}
	return out
}
