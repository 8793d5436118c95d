package server

import (
	"runtime/debug"
	"strings"
	"testing"
)

// TestGoMemoryLimitIsTheRatioOfTheContainersLimit: the limit as the
// downward API gives it (bytes) or as a quantity, from the flag or from
// $COMPOSITE_MEMORY_LIMIT, times the ratio; none when no limit is given.
func TestGoMemoryLimitIsTheRatioOfTheContainersLimit(t *testing.T) {
	for _, c := range []struct {
		env  string
		args []string
		want int64
	}{
		{env: "1610612736", want: 1449551462}, // 1536Mi × 0.9, rounded down
		{env: "", args: []string{"--memory-limit=1536Mi"}, want: 1449551462},
		{env: "1Gi", args: []string{"--memory-limit-ratio=0.5"}, want: 1 << 29},
		{env: "1Gi", args: []string{"--memory-limit=2Gi"}, want: 1932735283},
		{env: "", want: 0},
		{env: "0", want: 0},
	} {
		t.Setenv(MemoryLimitEnv, c.env)
		o, err := parse(t, c.args...)
		if err != nil {
			t.Fatalf("$%s=%q %q: %v", MemoryLimitEnv, c.env, c.args, err)
		}
		if got, err := o.goMemoryLimit(); err != nil || got != c.want {
			t.Errorf("$%s=%q %q: soft limit %d (%v), want %d", MemoryLimitEnv, c.env, c.args, got, err, c.want)
		}
	}
}

func TestMemoryLimitFlagsAreRefusedWhenTheyMakeNoSense(t *testing.T) {
	t.Setenv(MemoryLimitEnv, "")
	for args, want := range map[string]string{
		"--memory-limit=lots":      "not a number of bytes or a quantity",
		"--memory-limit=-1Gi":      "must not be negative",
		"--memory-limit-ratio=0":   "must be above 0 and at most 1",
		"--memory-limit-ratio=1.5": "must be above 0 and at most 1",
		"--gc-percent=0":           "must be at least 1",
		"--gc-percent=-1":          "must be at least 1",
	} {
		if _, err := parse(t, strings.Fields(args)...); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", args, err, want)
		}
	}
}

// TestCurrentGCPercentReadsTheRuntimesTarget: what the log reports when
// GOGC wins is the runtime's target, -1 when the collector is off.
func TestCurrentGCPercentReadsTheRuntimesTarget(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(150))
	if got := currentGCPercent(); got != 150 {
		t.Errorf("currentGCPercent() = %d, want 150", got)
	}
	debug.SetGCPercent(-1)
	if got := currentGCPercent(); got != -1 {
		t.Errorf("with the collector off, currentGCPercent() = %d, want -1", got)
	}
}
