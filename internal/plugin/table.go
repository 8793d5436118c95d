package plugin

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// writePlanTable prints the plan as kubectl prints tables: ACTION, KIND,
// NAMESPACE/NAME, and CHANGES, which is how many fields change or, for an
// item without a diff, why it is planned.
func writePlanTable(w io.Writer, plan []v1alpha1.SyncPlanItem) error {
	if len(plan) == 0 {
		_, err := fmt.Fprintln(w, "No children: the hook returns none and the parent has none.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "ACTION\tKIND\tNAMESPACE/NAME\tCHANGES")
	for _, item := range plan {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", item.Action, item.Kind, describeName(item.Namespace, item.Name), changesColumn(item))
	}
	return tw.Flush()
}

func changesColumn(item v1alpha1.SyncPlanItem) string {
	switch n := len(item.Diff); {
	case n == 1:
		return "1 change"
	case n > 1:
		return strconv.Itoa(n) + " changes"
	case item.Reason != "":
		return item.Reason
	default:
		return "-"
	}
}

// changes tells whether a plan does anything: every action but Unchanged
// writes to the cluster (an adoption or an orphaning writes the child's
// ownerReferences).
func changes(plan []v1alpha1.SyncPlanItem) bool {
	for _, item := range plan {
		if item.Action != v1alpha1.SyncActionUnchanged {
			return true
		}
	}
	return false
}

// writeRollout says where a rolling update stands: the parent's Updated
// condition, the child that moves next, and the revisions children follow.
func writeRollout(w io.Writer, r *v1alpha1.SyncRollout) error {
	if r == nil {
		return nil
	}
	if _, err := fmt.Fprintf(w, "\nRolling update: %s: %s\n", r.Reason, r.Message); err != nil {
		return err
	}
	if r.Next != "" {
		fmt.Fprintf(w, "  next to move: %s\n", r.Next)
	}
	for i, rev := range r.Revisions {
		which := ""
		if i == 0 {
			which = " (latest)"
		}
		fmt.Fprintf(w, "  ControllerRevision %s%s: %d children\n", rev.Name, which, rev.Children)
	}
	return nil
}

// writePatches says what each of spec.hooks.patches did: skipped and why,
// or the fields it changed in each child.
func writePatches(w io.Writer, steps []v1alpha1.SyncPatchStep) error {
	if len(steps) == 0 {
		return nil
	}
	if _, err := fmt.Fprintln(w, "\nPatches:"); err != nil {
		return err
	}
	for _, s := range steps {
		switch {
		case s.Skipped:
			fmt.Fprintf(w, "  %s: skipped (%s)\n", s.Name, s.Reason)
		case len(s.Changes) == 0:
			fmt.Fprintf(w, "  %s: changed nothing\n", s.Name)
		default:
			fmt.Fprintf(w, "  %s:\n", s.Name)
			for _, c := range s.Changes {
				for _, line := range c.Diff {
					fmt.Fprintf(w, "    %s %s: %s\n", c.Kind, describeName(c.Namespace, c.Name), line)
				}
			}
		}
	}
	return nil
}
