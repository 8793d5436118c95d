package shard

// DefaultShards is enough shards that three replicas each get a third of
// them within one shard (11, 11, 10: 3%), and few enough that their Leases
// cost little: each is renewed every retry period, so a group costs
// (shards + replicas) / retryPeriod Lease writes a second.
const DefaultShards = 32
