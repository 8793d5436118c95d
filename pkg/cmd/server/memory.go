package server

import (
	"fmt"
	"os"
	"runtime/debug"

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

// addMemoryFlags adds --memory-limit and --memory-limit-ratio.
func (o *Options) addMemoryFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.MemoryLimit, "memory-limit", o.MemoryLimit,
		"The container's memory limit, in bytes or as a quantity (1536Mi). The Go runtime's soft memory limit (GOMEMLIMIT) is set "+
			"to --memory-limit-ratio of it, so that the garbage collector works harder as the heap nears the limit instead of "+
			"letting it grow to twice what is live and the container be OOM-killed. Defaults to $"+MemoryLimitEnv+", which the "+
			"chart and artifacts/deploy set to the container's limits.memory (downward API). Empty or 0: the runtime's limit is "+
			"left alone. A GOMEMLIMIT in the environment wins over both.")
	fs.Float64Var(&o.MemoryLimitRatio, "memory-limit-ratio", o.MemoryLimitRatio,
		"The share of --memory-limit that the Go runtime's soft memory limit (GOMEMLIMIT) is set to, above 0 and at most 1.")
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
