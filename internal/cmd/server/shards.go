package server

import (
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"

	"github.com/composite-apiserver/composite-apiserver/internal/shard"
)

// shardConfig is this replica's part in the group of --shards.
func (o *Options) shardConfig() *shard.Config {
	le := o.LeaderElection
	return &shard.Config{
		Namespace: le.Namespace, Name: le.Name, Shards: o.Shards, Identity: replicaIdentity(),
		LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod,
	}
}

// replicaIdentity names this replica in Lease names: its host name (a
// pod's name) and a random suffix, so that a restarted pod of the same name
// is a new member, not a holder of its predecessor's shards.
func replicaIdentity() string {
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			return r
		case r >= 'A' && r <= 'Z':
			return r + 'a' - 'A'
		}
		return '-'
	}, host)
	host = strings.Trim(host, "-")
	if len(host) > 40 {
		host = host[:40]
	}
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	if host == "" {
		return hex.EncodeToString(suffix)
	}
	return host + "-" + hex.EncodeToString(suffix)
}
