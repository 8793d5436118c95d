package replicas

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// TestLeaderElectionRunsTheLoopOnOneReplica starts two replicas with
// leader election: one leads and runs the loop, the other serves the API
// only and syncs nothing, as each one's own /metrics shows; killing the
// leader hands the loop to the other.
func TestLeaderElectionRunsTheLoopOnOneReplica(t *testing.T) {
	// Sequential: starts replicas.
	hook := suite.HelloHook(t)
	ctx := context.Background()
	const lease = "e2e-leader-election"
	args := []string{"--leader-elect", "--leader-elect-lease-name=" + lease,
		"--leader-elect-lease-duration=4s", "--leader-elect-renew-deadline=3s", "--leader-elect-retry-period=500ms"}
	a := suite.MustStartReplica(t, ctx, "replica-a", args...)
	defer a.Stop(30 * time.Second)
	b := suite.MustStartReplica(t, ctx, "replica-b", args...)
	defer b.Stop(30 * time.Second)

	holderOf := func() (string, *framework.Process, error) {
		return leaseHolder(ctx, framework.CompositeNamespace, lease, a, b)
	}
	var holder string
	var leader *framework.Process
	suite.Eventually(t, "a replica holding the Lease", func() (bool, error) {
		var err error
		holder, leader, err = holderOf()
		return leader != nil, err
	})
	follower := b
	if leader == b {
		follower = a
	}
	t.Logf("%s leads (%s)", leader.Name, holder)

	// A parent to sync: the stack's own composite-apiserver (not leader
	// elected) syncs it, and so must the leader, and only the leader.
	ns := suite.Namespace(t, "loop-replicas")
	c := framework.HelloController{Name: "loop-replicas", HookURL: hook.URL}
	c.Create(t, suite)
	parent := suite.CreateHello(t, ns, "p", c.Name, framework.HelloSpec("blue", "a"))
	suite.WaitObserved(t, ns, "p", parent.GetGeneration())
	suite.Eventually(t, leader.Name+" (the leader) syncing the parent", func() (bool, error) {
		n, err := syncsOf(leader, c.Name)
		return n > 0, err
	})
	// The leader's syncs are the fresh signal: the follower has the same
	// controller, parent and informers, and must not have synced at all.
	if n, err := syncsOf(follower, c.Name); err != nil {
		t.Fatal(err)
	} else if n != 0 {
		t.Errorf("%s, the follower, synced %v times: only the leader may run the loop", follower.Name, n)
	}
	if n, err := syncsOf(follower, ""); err != nil {
		t.Fatal(err)
	} else if n != 0 {
		t.Errorf("%s, the follower, synced %v times across all controllers", follower.Name, n)
	}

	leader.Kill()
	suite.Eventually(t, follower.Name+" taking the Lease over", func() (bool, error) {
		_, p, err := holderOf()
		return p == follower, err
	})
	generation := suite.SetHelloSpec(t, ns, "p", framework.HelloSpec("green", "a"))
	suite.WaitObserved(t, ns, "p", generation)
	suite.Eventually(t, follower.Name+" (the new leader) syncing the parent", func() (bool, error) {
		n, err := syncsOf(follower, c.Name)
		return n > 0, err
	})
}

// syncsOf sums composite_controller_syncs_total of controller (every
// controller when empty), all results, from p's own /metrics; absent
// series count 0.
func syncsOf(p *framework.Process, controller string) (float64, error) {
	label := ""
	if controller != "" {
		label = `controller="` + controller + `"`
	}
	return metricOf(p, "composite_controller_syncs_total", label)
}

// metricOf sums the series of metric whose labels contain label (all when
// empty) from p's own /metrics; absent series count 0.
func metricOf(p *framework.Process, metric, label string) (float64, error) {
	// kube-apiserver's own front-proxy client certificate. Issuing one
	// would rewrite its files, and client-go's cached transport of those
	// files, seeing them change at its next TLS handshake, closes all of
	// its connections, the one being opened included.
	cert := suite.Certs.FrontProxyClient
	client, err := suite.CompositeHTTPClient(&cert)
	if err != nil {
		return 0, err
	}
	req, err := http.NewRequest(http.MethodGet, p.URL+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-Remote-User", "admin")
	req.Header.Set("X-Remote-Group", "system:masters")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return 0, fmt.Errorf("%s /metrics: %d %s", p.Name, resp.StatusCode, data)
	}
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, metric+"{") && !strings.HasPrefix(line, metric+" ") {
			continue
		}
		if label != "" && !strings.Contains(line, label) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("%s /metrics: can't read %q: %w", p.Name, line, err)
		}
		sum += v
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return sum, nil
}
