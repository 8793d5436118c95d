package eventbudget

import (
	"slices"
	"testing"
	"time"

	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/testutil"
)

// A burst, then nothing (the rate refills nothing within the test): the
// Events past it are counted, and the first drop of each minute is told.
func TestBudget(t *testing.T) {
	// A metric of component-base counts once registered.
	metrics.NewKubeRegistry().MustRegister(Metrics()...)
	notices := 0
	b := New(0.0001, 2, "t", func() { notices++ })
	now := time.Unix(1000, 0)
	b.now = func() time.Time { return now }
	var allowed []bool
	for range 4 {
		allowed = append(allowed, b.Allow())
	}
	if want := []bool{true, true, false, false}; !slices.Equal(allowed, want) {
		t.Errorf("allowed %v, want %v", allowed, want)
	}
	if notices != 1 {
		t.Errorf("%d notices after two drops within a minute, want 1", notices)
	}
	now = now.Add(NoticeInterval)
	b.Allow()
	if notices != 2 {
		t.Errorf("%d notices after a drop a minute later, want 2", notices)
	}
	got, err := testutil.GetCounterMetricValue(droppedTotal.WithLabelValues("t"))
	if err != nil {
		t.Fatal(err)
	}
	if got != 3 {
		t.Errorf("dropped %v, want 3", got)
	}
}

// No rate means no budget: every Event is recorded.
func TestNoBudget(t *testing.T) {
	b := New(0, 1, "none", nil)
	if b != nil {
		t.Fatalf("New(0, ...) = %v, want nil", b)
	}
	for range 1000 {
		if !b.Allow() {
			t.Fatal("a nil budget refused an Event")
		}
	}
}
