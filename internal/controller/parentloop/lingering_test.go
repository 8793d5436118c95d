package parentloop

import (
	"context"
	"testing"
	"time"
)

// A sync in flight when the loop stops goes on: its context outlives the
// loop's by the grace, and no longer.
func TestSyncsOutliveTheLoopByTheGrace(t *testing.T) {
	type key struct{}
	loop, stop := context.WithCancel(context.WithValue(context.Background(), key{}, "loop's"))
	syncs, cancel := lingering(loop, time.Hour)
	defer cancel()
	if syncs.Value(key{}) != "loop's" {
		t.Error("the syncs' context lost the loop's values (its logger)")
	}
	stop()
	if err := syncs.Err(); err != nil {
		t.Fatalf("a sync in flight was cancelled as the loop stopped, with an hour's grace: %v", err)
	}
	cancel()
	if syncs.Err() == nil {
		t.Fatal("the syncs' context goes on after the loop's Stop ended it")
	}

	loop, stop = context.WithCancel(context.Background())
	syncs, cancel = lingering(loop, 10*time.Millisecond)
	defer cancel()
	stop()
	select {
	case <-syncs.Done():
	case <-time.After(time.Minute):
		t.Fatal("a sync in flight is never cancelled once the grace has passed")
	}
	if err := context.Cause(syncs); err != context.Canceled {
		// The worker tells a lost shard from a stop by the cause.
		t.Errorf("cause %v, want context.Canceled", err)
	}
}
