package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"sigs.k8s.io/yaml"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	ccclient "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned/typed/metacontroller/v1alpha1"
)

// rolloutFailed ends `rollout status` of a paused or rolled-back rollout
// with exit code 1, as `kubectl rollout status` ends one past its progress
// deadline.
type rolloutFailed struct{ message string }

func (e *rolloutFailed) Error() string { return e.message }

func newRolloutCommand(streams genericiooptions.IOStreams, client ClientFunc) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "rollout SUBCOMMAND",
		Short: "Watch, pause, resume and undo the rollout of a controller's change",
		Long: `A controller whose spec has a rollout (spec.rollout) lands each change of its spec
step by step: its parents move from the revision they ran to the new one, each
step gated on their health. These commands work as kubectl rollout's do for a
Deployment:

  status    wait until the rollout is complete; exit 1 when it paused or rolled back
  history   the controller's revisions (status.history)
  pause     stop the rollout at its step (spec.rollout.paused)
  resume    go on with a rollout paused, by pause or by a failed step
  undo      write the previous revision's spec back (or --to-revision's)`,
	}
	cmd.AddCommand(
		newRolloutStatusCommand(streams, client),
		newRolloutHistoryCommand(streams, client),
		newRolloutPauseCommand(streams, client, true),
		newRolloutPauseCommand(streams, client, false),
		newRolloutUndoCommand(streams, client),
	)
	return cmd
}

// rolloutView is what the commands read of a controller of either kind.
type rolloutView struct {
	generation, observedGeneration, revision int64
	spec                                     *v1alpha1.ControllerRollout
	status                                   *v1alpha1.RolloutStatus
	history                                  []v1alpha1.RevisionRecord
	author                                   *v1alpha1.ControllerAuthor
	// resumedAt is when kubectl composite rollout resume last asked.
	resumedAt time.Time
	// specOf is the spec of a revision of the history, as YAML.
	specOf func(revision int64) ([]byte, bool)
}

func (c controllerArg) rolloutView(ctx context.Context, client ccclient.MetacontrollerV1alpha1Interface) (*rolloutView, error) {
	if c.kind == definition.KindDecorator {
		dc, err := client.DecoratorControllers().Get(ctx, c.name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		v := &rolloutView{generation: dc.Generation, observedGeneration: dc.Status.ObservedGeneration, revision: max(dc.Status.Revision, 1),
			spec: dc.Spec.Rollout, status: dc.Status.Rollout, author: dc.Status.Author, resumedAt: resumedAt(dc)}
		specs := map[int64]any{}
		for _, h := range dc.Status.History {
			v.history = append(v.history, h.RevisionRecord)
			specs[h.Revision] = h.Spec
		}
		v.specOf = yamlOf(specs)
		return v, nil
	}
	cc, err := client.CompositeControllers().Get(ctx, c.name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	v := &rolloutView{generation: cc.Generation, observedGeneration: cc.Status.ObservedGeneration, revision: max(cc.Status.Revision, 1),
		spec: cc.Spec.Rollout, status: cc.Status.Rollout, author: cc.Status.Author, resumedAt: resumedAt(cc)}
	specs := map[int64]any{}
	for _, h := range cc.Status.History {
		v.history = append(v.history, h.RevisionRecord)
		specs[h.Revision] = h.Spec
	}
	v.specOf = yamlOf(specs)
	return v, nil
}

func resumedAt(obj metav1.Object) time.Time {
	at, _ := time.Parse(time.RFC3339, obj.GetAnnotations()[v1alpha1.RolloutResumedAnnotation])
	return at
}

func yamlOf(specs map[int64]any) func(int64) ([]byte, bool) {
	return func(revision int64) ([]byte, bool) {
		spec, ok := specs[revision]
		if !ok {
			return nil, false
		}
		out, err := yaml.Marshal(map[string]any{"spec": spec})
		return out, err == nil
	}
}

// resource is the controller as kubectl names it in its messages.
func (c controllerArg) resource() string {
	if c.kind == definition.KindDecorator {
		return "decoratorcontroller.metacontroller.k8s.io/" + c.name
	}
	return "compositecontroller.metacontroller.k8s.io/" + c.name
}

func (c controllerArg) patch(ctx context.Context, client ccclient.MetacontrollerV1alpha1Interface, patch string) error {
	var err error
	if c.kind == definition.KindDecorator {
		_, err = client.DecoratorControllers().Patch(ctx, c.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	} else {
		_, err = client.CompositeControllers().Patch(ctx, c.name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	}
	return err
}

func newRolloutStatusCommand(streams genericiooptions.IOStreams, client ClientFunc) *cobra.Command {
	var watch bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "status CONTROLLER",
		Short: "Wait until the rollout of the controller's spec is complete",
		Long: `Print where the rollout of the controller's update revision is, and wait until every
parent runs it. Exit 0 once it is complete (or the controller has no rollout under
way), 1 when it paused or rolled back (a failed step, or kubectl composite rollout
pause), as kubectl rollout status does for a Deployment past its deadline.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target, err := parseControllerArg(args[0])
			if err != nil {
				return err
			}
			c, err := client()
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			return rolloutStatus(ctx, c, target, streams.Out, watch)
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", true, "watch the rollout until it is complete, paused or rolled back")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "how long to wait before giving up (0: forever)")
	return cmd
}

// rolloutStatus prints the rollout's progress, each line once, until it
// ends or, without watch, once.
func rolloutStatus(ctx context.Context, client ccclient.MetacontrollerV1alpha1Interface, target controllerArg, out io.Writer, watch bool) error {
	last := ""
	return wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		v, err := target.rolloutView(ctx, client)
		if err != nil {
			return false, err
		}
		line, done, err := v.describe(target)
		if line != last {
			fmt.Fprintln(out, line)
			last = line
		}
		if err != nil || done {
			return true, err
		}
		return !watch, nil
	})
}

// describe is one line of rollout status, and whether the rollout ended.
func (v *rolloutView) describe(target controllerArg) (string, bool, error) {
	st := v.status
	switch {
	case v.observedGeneration < v.generation:
		return fmt.Sprintf("Waiting for %s spec update to be observed...", target.kind), false, nil
	case v.spec == nil || st == nil || (st.Phase == v1alpha1.RolloutComplete && st.UpdateRevision == v.revision):
		return fmt.Sprintf("%s %q successfully rolled out", strings.ToLower(target.kind), target.name), true, nil
	case st.UpdateRevision != v.revision:
		return fmt.Sprintf("Waiting for the rollout of revision %d to begin...", v.revision), false, nil
	case v.resuming():
		return fmt.Sprintf("Waiting for the rollout of revision %d to resume...", st.UpdateRevision), false, nil
	case st.Phase == v1alpha1.RolloutPaused || st.Phase == v1alpha1.RolloutRolledBack:
		msg := fmt.Sprintf("%s %q rollout of revision %d %s at step %d of %d: %s: %s", strings.ToLower(target.kind), target.name,
			st.UpdateRevision, strings.ToLower(string(st.Phase)), st.Step+1, st.Steps, st.Reason, st.Message)
		if len(st.FailingParents) > 0 {
			msg += "; failing parents: " + strings.Join(st.FailingParents, ", ")
		}
		return msg, true, &rolloutFailed{message: msg}
	}
	return fmt.Sprintf("Waiting for rollout to finish: step %d of %d, %d of %d updated parents are healthy...",
		min(st.Step+1, st.Steps), st.Steps, st.HealthyParents, st.UpdatedParents), false, nil
}

// resuming tells whether a paused rollout was asked to resume and the
// server has not said so yet: unpaused, or resumed after its failed step.
// resumedAt is the stored annotation, the server's time of the resume, so
// that it compares with pausedTime on one clock.
func (v *rolloutView) resuming() bool {
	st := v.status
	if st.Phase == v1alpha1.RolloutPaused && st.Reason == "PausedByUser" {
		return !v.spec.Paused
	}
	failed := st.Phase == v1alpha1.RolloutPaused || st.Phase == v1alpha1.RolloutRolledBack
	return failed && !v.spec.Paused && st.PausedTime != nil && v.resumedAt.After(st.PausedTime.Time)
}

func newRolloutHistoryCommand(streams genericiooptions.IOStreams, client ClientFunc) *cobra.Command {
	var revision int64
	cmd := &cobra.Command{
		Use:   "history CONTROLLER",
		Short: "List the controller's revisions, or print one's spec",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target, err := parseControllerArg(args[0])
			if err != nil {
				return err
			}
			c, err := client()
			if err != nil {
				return err
			}
			v, err := target.rolloutView(cmd.Context(), c)
			if err != nil {
				return err
			}
			if revision > 0 {
				spec, ok := v.specOf(revision)
				if !ok {
					return fmt.Errorf("unable to find the specified revision %d in status.history", revision)
				}
				fmt.Fprintf(streams.Out, "%s with revision #%d\n%s", target.resource(), revision, spec)
				return nil
			}
			v.printHistory(streams.Out, target)
			return nil
		},
	}
	cmd.Flags().Int64Var(&revision, "revision", 0, "print the spec of this revision")
	return cmd
}

func (v *rolloutView) printHistory(out io.Writer, target controllerArg) {
	fmt.Fprintln(out, target.resource())
	w := tabwriter.NewWriter(out, 0, 8, 2, ' ', 0)
	fmt.Fprintln(w, "REVISION\tAUTHOR\tSTATE")
	author := func(a *v1alpha1.ControllerAuthor) string {
		if a == nil || a.Username == "" {
			return "<unknown>"
		}
		return a.Username
	}
	for i := len(v.history) - 1; i >= 0; i-- {
		h := v.history[i]
		state := "replaced"
		if h.ReplacedTime != nil {
			state += " " + h.ReplacedTime.UTC().Format(time.RFC3339)
		}
		if st := v.status; st != nil && st.Phase != v1alpha1.RolloutComplete && st.CurrentRevision == h.Revision {
			state = "current (parents not yet moved)"
		}
		fmt.Fprintf(w, "%d\t%s\t%s\n", h.Revision, author(h.Author), state)
	}
	state := "spec"
	if st := v.status; st != nil && st.UpdateRevision == v.revision && st.Phase != v1alpha1.RolloutComplete {
		state = fmt.Sprintf("spec, rolling out (%s)", st.Phase)
	}
	fmt.Fprintf(w, "%d\t%s\t%s\n", v.revision, author(v.author), state)
	_ = w.Flush()
}

func newRolloutPauseCommand(streams genericiooptions.IOStreams, client ClientFunc, pause bool) *cobra.Command {
	use, short := "pause CONTROLLER", "Stop the rollout at its step (spec.rollout.paused)"
	if !pause {
		use, short = "resume CONTROLLER", "Go on with a rollout paused by pause or by a failed step"
	}
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target, err := parseControllerArg(args[0])
			if err != nil {
				return err
			}
			c, err := client()
			if err != nil {
				return err
			}
			v, err := target.rolloutView(cmd.Context(), c)
			if err != nil {
				return err
			}
			if v.spec == nil {
				return fmt.Errorf("%s has no spec.rollout: its changes land at once, with nothing to pause or resume", target.resource())
			}
			patch := `{"spec":{"rollout":{"paused":true}}}`
			verb := "paused"
			if !pause {
				// The annotation resumes a step that failed; paused:false one
				// that was paused. The server stores its own time of the write
				// in place of ours (our clock may be off); ours still changes
				// the value, which is what asks it to, and serves an older
				// server that stores it as written.
				patch = fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}},"spec":{"rollout":{"paused":false}}}`,
					v1alpha1.RolloutResumedAnnotation, time.Now().UTC().Format(time.RFC3339Nano))
				verb = "resumed"
			}
			if err := target.patch(cmd.Context(), c, patch); err != nil {
				return err
			}
			fmt.Fprintf(streams.Out, "%s %s\n", target.resource(), verb)
			return nil
		},
	}
}

func newRolloutUndoCommand(streams genericiooptions.IOStreams, client ClientFunc) *cobra.Command {
	var to int64
	cmd := &cobra.Command{
		Use:   "undo CONTROLLER",
		Short: "Write an earlier revision's spec back (by default the one before)",
		Long: `Write an earlier revision's spec back as the controller's spec, keeping its rollout.
During a rollout, the default is the revision its parents not yet moved run: every
parent goes back to it at once. Otherwise it is the newest revision of the history,
rolled out as any change.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			target, err := parseControllerArg(args[0])
			if err != nil {
				return err
			}
			c, err := client()
			if err != nil {
				return err
			}
			if err := undo(cmd.Context(), c, target, to); err != nil {
				return err
			}
			fmt.Fprintf(streams.Out, "%s rolled back\n", target.resource())
			return nil
		},
	}
	cmd.Flags().Int64Var(&to, "to-revision", 0, "the revision to write back (0: the previous one)")
	return cmd
}

// undo writes revision to's spec (0: the previous revision) back as the
// controller's, keeping its rollout and history limit, as an update of the
// controller read: a write in between is a conflict, reported.
func undo(ctx context.Context, client ccclient.MetacontrollerV1alpha1Interface, target controllerArg, to int64) error {
	if target.kind == definition.KindDecorator {
		dc, err := client.DecoratorControllers().Get(ctx, target.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		at, err := revisionToUndo(to, dc.Status.Rollout, dc.Status.History, func(h v1alpha1.DecoratorControllerRevision) int64 { return h.Revision }, dc.AtRevision)
		if err != nil {
			return err
		}
		at.Spec.Rollout, at.Spec.RevisionHistoryLimit = dc.Spec.Rollout, dc.Spec.RevisionHistoryLimit
		dc.Spec = at.Spec
		_, err = client.DecoratorControllers().Update(ctx, dc, metav1.UpdateOptions{})
		return err
	}
	cc, err := client.CompositeControllers().Get(ctx, target.name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	at, err := revisionToUndo(to, cc.Status.Rollout, cc.Status.History, func(h v1alpha1.CompositeControllerRevision) int64 { return h.Revision }, cc.AtRevision)
	if err != nil {
		return err
	}
	at.Spec.Rollout, at.Spec.RevisionHistoryLimit = cc.Spec.Rollout, cc.Spec.RevisionHistoryLimit
	cc.Spec = at.Spec
	_, err = client.CompositeControllers().Update(ctx, cc, metav1.UpdateOptions{})
	return err
}

// revisionToUndo is the controller at revision to, of a history of E;
// to 0 is, during a rollout, the revision its parents not yet moved run,
// else the newest of the history.
func revisionToUndo[T, E any](to int64, st *v1alpha1.RolloutStatus, history []E, number func(E) int64, at func(int64) (T, bool)) (T, error) {
	if to == 0 {
		if st != nil && st.Phase != v1alpha1.RolloutComplete && st.CurrentRevision != st.UpdateRevision {
			to = st.CurrentRevision
		} else if len(history) > 0 {
			to = number(history[0])
		}
	}
	if c, ok := at(to); ok {
		return c, nil
	}
	var none T
	return none, errors.New("no earlier revision in status.history to undo to")
}
