// Package shard divides the controller loop's parents among the live
// replicas of the server with Leases (coordination.k8s.io), the way
// client-go's leader election runs one loop on one replica: a parent
// belongs to one of a fixed number of shards by a hash of its key; every
// replica keeps a membership Lease renewed; the live members are assigned
// the shards by a stable, balanced hash; and each shard has a Lease of its
// own that its owner acquires, renews and releases with compare-and-swap,
// so that two replicas never hold it at once.
package shard

import (
	"hash/fnv"
	"sort"
	"strconv"
)

// Of is the shard of a parent's queue key (namespace/name), among shards.
// The key, not the UID, because the key is what a workqueue holds and what
// an informer's delete still knows.
func Of(key string, shards int) int {
	if shards <= 1 {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	return int(mix(h.Sum64()) % uint64(shards))
}

// Assign gives each of shards to one of members: it returns the member of
// each shard, "" for all when there are none. It is rendezvous hashing
// with bounded load: every member ranks the shards by a hash of the pair,
// and the pairs are taken from the highest score down, each shard by the
// first member that has not reached its share (shards/members, and one
// more for the first shards%members to reach that). So every member gets
// its share within one shard, whatever the
// hash; and a member that leaves moves its own shards, plus the few a
// survivor can now take back as its share grew, never a shuffle of all.
// The result depends only on the set of members, so every replica that
// sees the same members computes the same owners.
func Assign(shards int, members []string) []string {
	owners := make([]string, shards)
	if len(members) == 0 || shards <= 0 {
		return owners
	}
	ms := append([]string(nil), members...)
	sort.Strings(ms)
	type pair struct {
		score  uint64
		shard  int
		member int
	}
	pairs := make([]pair, 0, shards*len(ms))
	for s := 0; s < shards; s++ {
		for i, m := range ms {
			pairs = append(pairs, pair{score: score(m, s), shard: s, member: i})
		}
	}
	sort.Slice(pairs, func(i, j int) bool {
		if pairs[i].score != pairs[j].score {
			return pairs[i].score > pairs[j].score
		}
		if pairs[i].shard != pairs[j].shard {
			return pairs[i].shard < pairs[j].shard
		}
		return pairs[i].member < pairs[j].member
	})
	// Every member gets share shards, and the first extra members to
	// reach it one more.
	share, extra := shards/len(ms), shards%len(ms)
	load := make([]int, len(ms))
	assigned := 0
	for _, p := range pairs {
		if owners[p.shard] != "" || load[p.member] > share || (load[p.member] == share && extra == 0) {
			continue
		}
		if load[p.member] == share {
			extra--
		}
		owners[p.shard] = ms[p.member]
		load[p.member]++
		if assigned++; assigned == shards {
			break
		}
	}
	return owners
}

func score(member string, shard int) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(member))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(strconv.Itoa(shard)))
	return mix(h.Sum64())
}

// mix is splitmix64's finalizer: FNV of short, similar strings differs
// mostly in its low bits, and both the modulo and the ranking need all of
// them.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
