package server

import (
	"fmt"
	"os"
	"runtime/debug"
	"runtime/metrics"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/klog/v2"
)

// MemoryLimitEnv is the environment variable that --memory-limit defaults
// to. The chart and artifacts/deploy set it to the container's
// limits.memory with the downward API (a resourceFieldRef, in bytes): the
// downward API can pass the limit but not a fraction of it, so the server
// takes the limit and applies --memory-limit-ratio itself.
const MemoryLimitEnv = "COMPOSITE_MEMORY_LIMIT"

// DefaultMemoryLimitRatio is the share of the container's memory limit
// that the Go runtime's soft limit is set to. The rest is for what the
// runtime does not count against it (memory not yet returned to the
// kernel, thread stacks outside the Go heap) and for the moment it takes
// the garbage collector to catch up with a burst of allocations.
const DefaultMemoryLimitRatio = 0.9

// DefaultGCPercent is the garbage collector's target (GOGC) the server
// runs with: the heap may grow to three times what is live between two
// collections, where Go's default lets it grow to twice. The loop's
// collections cost it in proportion to the bytes its syncs allocate
// divided by this target, so 200 halves that cost (a fifth of the server's
// CPU at 10,000 parents, README "The collector's target is 200"); the heap it
// allows is what 100 allowed before the informers' cache was halved
// (internal/watchjson), and under a memory limit the soft limit
// (--memory-limit) makes the collector work harder near it whatever the
// target.
const DefaultGCPercent = 200

// addMemoryFlags adds --memory-limit, --memory-limit-ratio and
// --gc-percent.
func (o *Options) addMemoryFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.MemoryLimit, "memory-limit", o.MemoryLimit,
		"The container's memory limit, in bytes or as a quantity (1536Mi). The Go runtime's soft memory limit (GOMEMLIMIT) is set "+
			"to --memory-limit-ratio of it, so that the garbage collector works harder as the heap nears the limit instead of "+
			"letting it grow to twice what is live and the container be OOM-killed. Defaults to $"+MemoryLimitEnv+", which the "+
			"chart and artifacts/deploy set to the container's limits.memory (downward API). Empty or 0: the runtime's limit is "+
			"left alone. A GOMEMLIMIT in the environment wins over both.")
	fs.Float64Var(&o.MemoryLimitRatio, "memory-limit-ratio", o.MemoryLimitRatio,
		"The share of --memory-limit that the Go runtime's soft memory limit (GOMEMLIMIT) is set to, above 0 and at most 1.")
	fs.IntVar(&o.GCPercent, "gc-percent", o.GCPercent,
		"The garbage collector's target (as GOGC): the heap may grow by this percentage of what is live before the next "+
			"collection. Higher spends memory to save CPU; the soft memory limit (--memory-limit) still bounds the heap. "+
			"At least 1. A GOGC in the environment wins.")
}

// validateGCPercent refuses a target the runtime would take for "off" or
// for a collection on every allocation.
func (o *Options) validateGCPercent() error {
	if o.GCPercent < 1 {
		return fmt.Errorf("--gc-percent=%d: must be at least 1 (GOGC=off in the environment turns the collector off)", o.GCPercent)
	}
	return nil
}

// applyGCPercent sets the collector's target from --gc-percent, unless
// GOGC was given (the runtime read it at start), and logs the target the
// server runs with.
func (o *Options) applyGCPercent(logger klog.Logger) {
	if env := os.Getenv("GOGC"); env != "" {
		logger.Info("GOGC is set: the garbage collector's target is left as it says", "GOGC", env,
			"gcPercent", currentGCPercent(), "ignoredGCPercent", o.GCPercent)
		return
	}
	debug.SetGCPercent(o.GCPercent)
	logger.Info("Garbage collector's target set", "gcPercent", o.GCPercent)
}

// currentGCPercent is the collector's target the runtime runs with, -1
// when it is off (GOGC=off), read without changing it.
func currentGCPercent() int64 {
	sample := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	// The runtime stores -1 for off, which the metric reports as uint64.
	return int64(sample[0].Value.Uint64())
}

// goMemoryLimit is the soft memory limit that --memory-limit and
// --memory-limit-ratio ask for, in bytes; 0 when no limit is given.
func (o *Options) goMemoryLimit() (int64, error) {
	if o.MemoryLimitRatio <= 0 || o.MemoryLimitRatio > 1 {
		return 0, fmt.Errorf("--memory-limit-ratio=%v: must be above 0 and at most 1", o.MemoryLimitRatio)
	}
	if o.MemoryLimit == "" {
		return 0, nil
	}
	q, err := resource.ParseQuantity(o.MemoryLimit)
	if err != nil {
		return 0, fmt.Errorf("--memory-limit (or $%s) %q: not a number of bytes or a quantity such as 1536Mi: %w", MemoryLimitEnv, o.MemoryLimit, err)
	}
	limit := q.Value()
	if limit < 0 {
		return 0, fmt.Errorf("--memory-limit (or $%s) %q: must not be negative", MemoryLimitEnv, o.MemoryLimit)
	}
	return int64(float64(limit) * o.MemoryLimitRatio), nil
}

// applyMemoryLimit sets the Go runtime's soft memory limit from
// --memory-limit, unless GOMEMLIMIT was given (the runtime read it at
// start), and logs the limit the server runs with.
func (o *Options) applyMemoryLimit(logger klog.Logger) error {
	soft, err := o.goMemoryLimit()
	if err != nil {
		return err
	}
	switch env := os.Getenv("GOMEMLIMIT"); {
	case env != "":
		logger.Info("GOMEMLIMIT is set: the Go runtime's memory limit is left as it says", "GOMEMLIMIT", env,
			"goMemoryLimitBytes", debug.SetMemoryLimit(-1), "ignoredMemoryLimit", o.MemoryLimit)
	case soft == 0:
		logger.Info("No memory limit given (--memory-limit, $" + MemoryLimitEnv + "): the Go runtime has no soft memory limit")
	default:
		debug.SetMemoryLimit(soft)
		logger.Info("Go runtime's soft memory limit set from the container's", "memoryLimit", o.MemoryLimit,
			"ratio", o.MemoryLimitRatio, "goMemoryLimitBytes", soft)
	}
	return nil
}
