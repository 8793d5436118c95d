// Package rollout is the pure logic of a controller's progressive rollout
// (spec.rollout): which parents a step moves to the update revision, and
// whether a step's parents pass its gate. The loop (internal/controller) runs
// it; nothing here reads or writes the cluster.
package rollout

import (
	"fmt"
	"hash/fnv"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// Buckets is how many buckets parents are spread over: a share of the
// parents is the parents of the buckets below a limit.
const Buckets = 10000

// Bucket is the parent's bucket: a hash of its UID, so that a parent keeps
// its place in the order of a rollout whatever its name, and a restart or
// another replica puts it in the same step.
func Bucket(uid types.UID) int32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(uid))
	return int32(h.Sum32() % Buckets)
}

// Plan is which parents run the update revision at one point of a
// rollout: those of the buckets below BucketLimit, and those the
// selectors of the steps so far select.
type Plan struct {
	// All: every parent runs the update revision (no rollout under way,
	// or its last step began).
	All bool
	// None: every parent runs the current revision (rolled back).
	None        bool
	BucketLimit int32
	selectors   []labels.Selector
}

// NewPlan is the plan of the rollout's steps at status.
func NewPlan(steps []v1alpha1.RolloutStep, status *v1alpha1.RolloutStatus) (*Plan, error) {
	if status == nil || status.Phase == v1alpha1.RolloutComplete || len(steps) == 0 {
		return &Plan{All: true}, nil
	}
	if status.Phase == v1alpha1.RolloutRolledBack {
		return &Plan{None: true}, nil
	}
	p := &Plan{BucketLimit: status.BucketLimit}
	// A step passed whose next one has not begun (its pause) moves none
	// of the next step's parents yet.
	last := int(status.Step)
	if status.StepStartTime == nil {
		last--
	}
	// Steps cut below the step under way hold it at the last one (Step).
	last = min(last, len(steps)-1)
	for i := 0; i <= last; i++ {
		if s := steps[i].Selector; s != nil {
			sel, err := metav1.LabelSelectorAsSelector(s)
			if err != nil {
				return nil, fmt.Errorf("spec.rollout.steps[%d].selector: %w", i, err)
			}
			p.selectors = append(p.selectors, sel)
		}
	}
	return p, nil
}

// Updated tells whether the parent runs the update revision.
func (p *Plan) Updated(parent metav1.Object) bool {
	switch {
	case p.All:
		return true
	case p.None:
		return false
	case Bucket(parent.GetUID()) < p.BucketLimit:
		return true
	}
	set := labels.Set(parent.GetLabels())
	for _, sel := range p.selectors {
		if sel.Matches(set) {
			return true
		}
	}
	return false
}

// LimitOf is the bucket limit once step begins, from the limit before it
// (previous) and the parents not yet moved (waiting): a percent is its
// share of the buckets; a number of parents moves that many more of them,
// in bucket order; a selector moves no share.
func LimitOf(step v1alpha1.RolloutStep, previous int32, waiting []metav1.Object) int32 {
	switch {
	case step.Percent != nil:
		return max(previous, min(*step.Percent, 100)*Buckets/100)
	case step.MaxParents != nil:
		var above []int32
		for _, p := range waiting {
			if b := Bucket(p.GetUID()); b >= previous {
				above = append(above, b)
			}
		}
		slices.Sort(above)
		// Never more than the parents seen waiting: a view that missed
		// parents (or has none yet) moves no share it did not see.
		n := min(int(*step.MaxParents), len(above))
		if n <= 0 {
			return previous
		}
		// Every parent of the n-th bucket moves: a few more than n when
		// two share it.
		return above[n-1] + 1
	}
	return previous
}
