package controller

import (
	"github.com/composite-apiserver/composite-apiserver/internal/controller/rolloutdriver"
	"github.com/composite-apiserver/composite-apiserver/internal/shard"
)

// The manager finds a rollout's shard group by asserting its --shards
// member is a rolloutdriver.ShardGroup: were a method missing, sharded
// rollouts would silently run without their group. This fails to compile
// instead.
var _ rolloutdriver.ShardGroup = (*shard.Member)(nil)
