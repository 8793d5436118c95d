package server

import (
	"strings"
	"testing"
	"time"
)

// TestShardsFlagJoinsTheGroupOfTheLeaseFlags: --shards runs the loop in the
// group named by the leader election flags, with their timings, and works
// with Metacontroller's --target-label-selector.
func TestShardsFlagJoinsTheGroupOfTheLeaseFlags(t *testing.T) {
	o, err := parse(t, "--shards=16", "--leader-elect-namespace=ops", "--leader-elect-lease-name=loop",
		"--leader-elect-lease-duration=20s", "--target-label-selector=controller-group=cicd")
	if err != nil {
		t.Fatal(err)
	}
	c := o.shardConfig()
	if c.Namespace != "ops" || c.Name != "loop" || c.Shards != 16 || c.LeaseDuration != 20*time.Second || c.RenewDeadline != 10*time.Second {
		t.Errorf("shard config %+v", c)
	}
	if c.Identity == "" || strings.Trim(c.Identity, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
		t.Errorf("identity %q is not a valid part of a Lease name", c.Identity)
	}
	if other := o.shardConfig(); other.Identity == c.Identity {
		t.Errorf("two replicas on one host share the identity %q", c.Identity)
	}
}

func TestShardsFlagIsRefusedWithLeaderElectionOrNegative(t *testing.T) {
	for args, want := range map[string]string{
		"--shards=4 --leader-elect": "exclude each other",
		"--shards=-1":               "must not be negative",
	} {
		if _, err := parse(t, strings.Fields(args)...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", args, err, want)
		}
	}
}
