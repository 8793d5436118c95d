package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	"github.com/composite-apiserver/composite-apiserver/internal/rollout"
)

// upgradeParents are few enough to converge in seconds, enough that the
// first step's 50 % moves some and leaves others.
const upgradeParents = 10

// rollbackRollout is spec.rollout of a change that drops children: half
// the parents, then all, gated on the count of children the v1 hook
// reports, rolled back at once when a step fails.
const rollbackRollout = `    - percent: 50
    - percent: 100
    health:
      condition: 'has(parent.status.count) && parent.status.count == 3'
      deadlineSeconds: 5
    onFailure: Rollback
`

// TestStoredRolloutStatusesOfAnEarlierServerAreReadSafely: a change of a
// controller of 10 parents fails its first step and is rolled back; the
// operator then runs kubectl composite rollout pause, which an earlier
// server wrote over the failure as Paused/PausedByUser, keeping its
// pausedTime, so that the failed revision ran again once paused. The
// current server, started on that stored status, reads it as the rollback
// it was: status.rollout says RolledBack again, no parent meets the
// change's hook after the start, every parent keeps its children, and
// kubectl composite rollout status says rolled back.
func TestStoredRolloutStatusesOfAnEarlierServerAreReadSafely(t *testing.T) {
	// Sequential: stops and starts the server.
	suite.SetUpHellos(t)
	hook := startChildrenHook(t)
	ctx := context.Background()
	const name, ns = "rollout-upgrade", "rollout-upgrade"
	suite.MustCreateNamespace(t, ns)
	suite.ApplyController(t, name, rolloutControllerWith(name, hook.url, "v1", rollbackRollout))
	var parents []string
	for i := 0; i < upgradeParents; i++ {
		p := fmt.Sprintf("p-%02d", i)
		suite.CreateHello(t, ns, p, name, map[string]interface{}{"greeting": "hello"})
		parents = append(parents, ns+"/"+p)
	}
	waitChildren(t, ns, parents, "every parent with its ConfigMaps")

	changed := time.Now()
	suite.MustApply(t, rolloutControllerWith(name, hook.url, "v2", rollbackRollout))
	controllerEvent(t, name, "RolloutRolledBack", "rolled back to revision 1", changed)
	if moved := hook.calledAbout("v2"); len(moved) == 0 {
		t.Fatalf("the change was rolled back before its hook met any parent")
	}
	waitChildren(t, ns, parents, "every parent back on v1, with its ConfigMaps")
	if r := kubectlComposite(t, "rollout", "pause", name); r.code != 0 {
		t.Fatalf("kubectl composite rollout pause: exit %d", r.code)
	}

	// The tests after this one need the server, whatever becomes of it.
	t.Cleanup(func() {
		if exited, _ := suite.CompositeProcess().Exited(); exited {
			if err := startComposite(context.Background()); err != nil {
				t.Error(err)
			}
		}
	})
	if err := suite.StopComposite(); err != nil {
		t.Fatal(err)
	}
	plantEarlierPause(t, name)
	started := time.Now()
	if err := startComposite(ctx); err != nil {
		t.Fatal(err)
	}

	suite.Within(t, "status.rollout written RolledBack by the started server", time.Minute, func() (bool, error) {
		got, err := suite.Client.MetacontrollerV1alpha1().CompositeControllers().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		if st := got.Status.Rollout; st == nil || st.Phase != v1alpha1.RolloutRolledBack {
			return false, fmt.Errorf("status.rollout = %s, want RolledBack", describe(st))
		}
		return true, nil
	})
	suite.Within(t, "every parent synced by the started server", time.Minute, func() (bool, error) {
		for _, p := range parents {
			if !hook.calledSince(p, started) {
				return false, fmt.Errorf("%s not synced since the start", p)
			}
		}
		return true, nil
	})
	if met := calledSinceBy(hook, "v2", started); len(met) > 0 {
		t.Errorf("the rolled-back change's hook was called about %v after the start, want no parent", met)
	}
	waitChildren(t, ns, parents, "every parent with its ConfigMaps after the start")
	r := kubectlComposite(t, "rollout", "status", name, "--watch=false")
	if r.code != 1 || !strings.Contains(r.stdout, "rolledback") {
		t.Errorf("kubectl composite rollout status after the start: exit %d, %q; want exit 1 saying rolled back", r.code, r.stdout)
	}
}

// waitChildren waits until each parent of parents (namespace/name) in ns
// has the ConfigMaps of childrenHook's v1.
func waitChildren(t *testing.T, ns string, parents []string, what string) {
	t.Helper()
	suite.Within(t, what, 2*time.Minute, func() (bool, error) {
		counts := childCounts(t, ns)
		for _, p := range parents {
			if n := counts[strings.TrimPrefix(p, ns+"/")]; n != childrenPerParent {
				return false, fmt.Errorf("%s has %d of its %d ConfigMaps", p, n, childrenPerParent)
			}
		}
		return true, nil
	})
}

// calledSinceBy are the parents (namespace/name) revision's hook was
// called about at or after since, sorted.
func calledSinceBy(h *childrenHook, revision string, since time.Time) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for key, at := range h.calls[revision] {
		if slices.ContainsFunc(at, func(c time.Time) bool { return !c.Before(since) }) {
			out = append(out, key)
		}
	}
	slices.Sort(out)
	return out
}

// startComposite starts the stopped composite-apiserver with its usual
// flags and args, and waits until kube-apiserver proxies to it again.
func startComposite(ctx context.Context) error {
	if err := suite.StartComposite(ctx); err != nil {
		return err
	}
	if err := suite.WaitAPIServiceAvailable(ctx, true); err != nil {
		return err
	}
	return suite.WaitAuthenticatedRequests(ctx)
}

// plantEarlierPause rewrites the stored rollout status of the
// CompositeController name, in etcd while no server runs, as an earlier
// server wrote kubectl composite rollout pause over a failed step: Paused
// by the user, the failure's pausedTime kept. The pause's spec
// (spec.rollout.paused) must be stored already.
func plantEarlierPause(t *testing.T, name string) {
	t.Helper()
	editStoredController(t, name, func(obj map[string]any) {
		spec, _ := obj["spec"].(map[string]any)
		specRollout, _ := spec["rollout"].(map[string]any)
		if specRollout["paused"] != true {
			t.Fatalf("the stored spec.rollout is %v, want paused", specRollout)
		}
		status, _ := obj["status"].(map[string]any)
		st, _ := status["rollout"].(map[string]any)
		if st["phase"] != string(v1alpha1.RolloutRolledBack) || st["pausedTime"] == nil {
			t.Fatalf("the stored status.rollout is %v, want RolledBack with a pausedTime", st)
		}
		st["phase"], st["reason"], st["message"] = string(v1alpha1.RolloutPaused), rollout.ReasonPausedByUser, "spec.rollout.paused is true"
		t.Logf("planted status.rollout %v", st)
	})
}

// editStoredController changes the CompositeController name as stored in
// etcd, under the prefix the stack gives composite-apiserver.
func editStoredController(t *testing.T, name string, change func(obj map[string]any)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{suite.EtcdURL}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatalf("can't reach the stack's etcd: %v", err)
	}
	defer func() { _ = client.Close() }()
	keys, err := client.Get(ctx, framework.CompositeEtcdPrefix+"/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		t.Fatalf("can't list the keys under %s: %v", framework.CompositeEtcdPrefix, err)
	}
	var key string
	for _, kv := range keys.Kvs {
		if strings.HasSuffix(string(kv.Key), "/compositecontrollers/"+name) {
			key = string(kv.Key)
		}
	}
	if key == "" {
		t.Fatalf("no etcd key of CompositeController %s under %s", name, framework.CompositeEtcdPrefix)
	}
	stored, err := client.Get(ctx, key)
	if err != nil || len(stored.Kvs) != 1 {
		t.Fatalf("can't get %s: %v", key, err)
	}
	kv := stored.Kvs[0]
	if bytes.HasPrefix(kv.Value, []byte("k8s\x00")) {
		t.Fatalf("%s is stored as protobuf; this test edits JSON", key)
	}
	var obj map[string]any
	if err := json.Unmarshal(kv.Value, &obj); err != nil {
		t.Fatalf("can't read %s as JSON: %v", key, err)
	}
	change(obj)
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	// Only over the version read: a server still writing would be lost.
	txn, err := client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", kv.ModRevision)).
		Then(clientv3.OpPut(key, string(data))).Commit()
	if err != nil || !txn.Succeeded {
		t.Fatalf("can't write %s over mod revision %d: %v (succeeded %v)", key, kv.ModRevision, err, txn != nil && txn.Succeeded)
	}
}
