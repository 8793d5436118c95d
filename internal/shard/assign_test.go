package shard

import (
	"fmt"
	"testing"
)

func TestOfIsStableAndInRange(t *testing.T) {
	for _, key := range []string{"ns/a", "ns/b", "cluster-scoped", ""} {
		s := Of(key, 32)
		if s < 0 || s >= 32 {
			t.Fatalf("Of(%q, 32) = %d, out of range", key, s)
		}
		if again := Of(key, 32); again != s {
			t.Errorf("Of(%q) changed from %d to %d", key, s, again)
		}
	}
	if got := Of("ns/a", 1); got != 0 {
		t.Errorf("Of with one shard = %d, want 0", got)
	}
}

func TestAssignIsStableWhateverTheMembersOrder(t *testing.T) {
	a := Assign(32, []string{"a", "b", "c"})
	b := Assign(32, []string{"c", "a", "b"})
	for s := range a {
		if a[s] != b[s] {
			t.Fatalf("shard %d: %q with one order of members, %q with another", s, a[s], b[s])
		}
	}
}

// TestParentsAreBalancedOverThreeReplicas checks what B7 measures: each of
// three replicas gets a third of the parents within 20%, for the default
// number of shards and parents named as a user names them.
func TestParentsAreBalancedOverThreeReplicas(t *testing.T) {
	members := []string{"composite-apiserver-7d9f-abcde", "composite-apiserver-7d9f-fghij", "composite-apiserver-7d9f-klmno"}
	for _, parents := range []int{300, 3000} {
		owners := Assign(DefaultShards, members)
		share := map[string]int{}
		for i := 0; i < parents; i++ {
			share[owners[Of(fmt.Sprintf("bench-%d/parent-%d", i/100, i), DefaultShards)]]++
		}
		third := float64(parents) / 3
		for _, m := range members {
			if r := float64(share[m]) / third; r < 0.8 || r > 1.2 {
				t.Errorf("%d parents: %s syncs %d, %.2f of a third (want within 20%%)", parents, m, share[m], r)
			}
		}
	}
}

func TestAssignGivesEachMemberItsShare(t *testing.T) {
	for n := 1; n <= 7; n++ {
		var members []string
		for i := 0; i < n; i++ {
			members = append(members, fmt.Sprintf("replica-%d", i))
		}
		load := map[string]int{}
		for _, m := range Assign(DefaultShards, members) {
			if m == "" {
				t.Fatalf("%d members: a shard has no owner", n)
			}
			load[m]++
		}
		for _, m := range members {
			if lo := DefaultShards / n; load[m] < lo || load[m] > lo+1 {
				t.Errorf("%d members: %s owns %d shards, want %d or %d", n, m, load[m], lo, lo+1)
			}
		}
	}
}

// TestAReplicaLeavingMovesLittle: when one of three replicas leaves, its
// shards move, and of the survivors' own at most a handful (their share
// grew, so a survivor may take back a shard it ranks first).
func TestAReplicaLeavingMovesLittle(t *testing.T) {
	worst := 0
	for trial := 0; trial < 200; trial++ {
		members := []string{fmt.Sprintf("a-%d", trial), fmt.Sprintf("b-%d", trial), fmt.Sprintf("c-%d", trial)}
		before := Assign(DefaultShards, members)
		after := Assign(DefaultShards, members[:2])
		leaverShards, moved := 0, 0
		for s := range before {
			if before[s] == members[2] {
				leaverShards++
				continue
			}
			if before[s] != after[s] {
				moved++
			}
		}
		if after[0] == members[2] {
			t.Fatal("the leaver still owns a shard")
		}
		worst = max(worst, moved)
		// The minimum is the leaver's own; a survivor's shard moving
		// too is allowed for a third of the leaver's (3 of 21 here).
		if moved > leaverShards/3 {
			t.Errorf("trial %d: %d of the survivors' shards moved besides the leaver's %d", trial, moved, leaverShards)
		}
	}
	t.Logf("at most %d of the survivors' shards moved", worst)
}
