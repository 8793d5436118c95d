package parentloop

import (
	"context"
	"strings"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/internal/definition"
)

// One queue for all of a controller's parent loops: a key names its loop's
// resource for a DecoratorController, so that objects of one name in two
// resources are two keys, each routed back to its loop with its parent key;
// a CompositeController's keys are the parents' own.
func TestQueueKeysRouteToTheirResourcesLoop(t *testing.T) {
	hellos, configMaps, roles, parents := &parentLoop{view: "hellos.example.com"}, &parentLoop{view: "configmaps"},
		&parentLoop{view: "clusterroles.rbac.authorization.k8s.io"}, &parentLoop{}
	decorator := &Run{def: &definition.Definition{Kind: definition.KindDecorator},
		views: map[string]*parentLoop{hellos.view: hellos, configMaps.view: configMaps, roles.view: roles}}
	composite := &Run{def: &definition.Definition{Kind: definition.KindComposite},
		views: map[string]*parentLoop{"": parents}}
	for _, tc := range []struct {
		name     string
		run      *Run
		pc       *parentLoop
		key      string
		wantQKey string
	}{
		{"a Hello", decorator, hellos, "ns/same", "hellos.example.com/ns/same"},
		{"a ConfigMap of the Hello's name", decorator, configMaps, "ns/same", "configmaps/ns/same"},
		{"a cluster-scoped object whose name has a colon", decorator, roles, "system:reader", "clusterroles.rbac.authorization.k8s.io/system:reader"},
		{"a CompositeController's parent", composite, parents, "ns/p", "ns/p"},
		{"a CompositeController's cluster-scoped parent", composite, parents, "system:p", "system:p"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			qkey := queueKey(tc.pc.view, tc.key)
			if qkey != tc.wantQKey {
				t.Errorf("queue key %q, want %q", qkey, tc.wantQKey)
			}
			if pc, key := tc.run.route(qkey); pc != tc.pc || key != tc.key {
				t.Errorf("route(%q) = %q of view %q, want %q of view %q", qkey, key, viewOf(pc), tc.key, tc.pc.view)
			}
		})
	}
	if pc, _ := decorator.route("pods/ns/p"); pc != nil {
		t.Errorf("a key of no view routed to %q", pc.view)
	}
}

func viewOf(pc *parentLoop) string {
	if pc == nil {
		return "<none>"
	}
	return pc.view
}

type recordedShards struct{ asked []string }

func (s *recordedShards) Owns(key string) bool { s.asked = append(s.asked, key); return true }
func (s *recordedShards) Begin(ctx context.Context, key string) (context.Context, func(), bool) {
	s.asked = append(s.asked, key)
	return ctx, func() {}, true
}
func (s *recordedShards) OnGained(func(func(string) bool)) {}

// A parent's shard is that of its namespace/name, whatever the resource its
// key in the queue names: replicas and shard moves go by parent keys.
func TestShardsAreAskedAboutTheParentKey(t *testing.T) {
	pc := &parentLoop{view: "configmaps"}
	run := &Run{def: &definition.Definition{Kind: definition.KindDecorator}, views: map[string]*parentLoop{pc.view: pc}}
	recorded := &recordedShards{}
	shards := routedShards(recorded, run.route)
	shards.Owns("configmaps/ns/a")
	shards.Begin(context.Background(), "configmaps/ns/b")
	if got := strings.Join(recorded.asked, ","); got != "ns/a,ns/b" {
		t.Errorf("shards asked about %s, want ns/a,ns/b", got)
	}
	if routedShards(nil, run.route) != nil {
		t.Errorf("no shards must stay a nil ParentShards: the queue and admit take nil as every parent")
	}
}
