package controllerstatus

import (
	"testing"
	"time"
)

// The status is written every interval while counting the controller's
// parents and children is cheap, and less often once a count would take
// more than countingShare of a core at that rate: a count of 0.1 s (10,000
// parents × 10 children on a busy machine) every 10 s, not every 5 s.
func TestPaceBoundsTheShareOfACoreSpentCounting(t *testing.T) {
	for _, tc := range []struct {
		interval, took, want time.Duration
	}{
		{5 * time.Second, 0, 5 * time.Second},
		{5 * time.Second, time.Millisecond, 5 * time.Second},
		{5 * time.Second, 50 * time.Millisecond, 5 * time.Second},
		{5 * time.Second, 100 * time.Millisecond, 10 * time.Second},
		{5 * time.Second, 300 * time.Millisecond, 30 * time.Second},
		{time.Second, 20 * time.Millisecond, 2 * time.Second},
	} {
		if got := pace(tc.interval, tc.took); got != tc.want {
			t.Errorf("pace(%v, %v) = %v, want %v", tc.interval, tc.took, got, tc.want)
		}
	}
}
