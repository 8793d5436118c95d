package plugin

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

type syncOptions struct {
	parent     string
	parentKind string
	output     string
}

func newSyncCommand(streams genericiooptions.IOStreams, flags *genericclioptions.ConfigFlags, client ClientFunc) *cobra.Command {
	o := &syncOptions{output: outputTable}
	cmd := &cobra.Command{
		Use:   "sync CONTROLLER --parent NAMESPACE/NAME",
		Short: "Sync one live parent now",
		Long: `Run CONTROLLER's hooks for one live parent now, through the server's /sync,
and apply the plan as the controller loop would: children created, updated
and deleted, orphans adopted, the parent's status written. One line is
printed per child changed, with the error of each change that failed.

--parent is NAMESPACE/NAME, or NAME for a cluster-scoped parent or one in
the namespace of -n. It needs create on compositecontrollers/sync and update
on the parent.

Exit code: 0 when every action succeeded, 2 when one failed or the sync
could not run.`,
		Example: `  # Sync default/p1 with the controller hello, without waiting for the loop
  kubectl composite sync hello --parent default/p1

  # ...and keep the whole answer, plan and hook request included
  kubectl composite sync hello --parent default/p1 -o json > answer.json`,
		Args: exactArgs("CONTROLLER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return o.run(cmd, args[0], streams, namespaceFlag(flags), client)
		},
	}
	cmd.Flags().StringVar(&o.parent, "parent", "", "live parent to sync, NAMESPACE/NAME")
	cmd.Flags().StringVar(&o.parentKind, "parent-kind", "", "the live object's KIND.VERSION.GROUP, for a DecoratorController of several resources")
	cmd.Flags().StringVarP(&o.output, "output", "o", o.output, "output format: table (one line per change), yaml or json (the whole answer)")
	return cmd
}

func (o *syncOptions) run(cmd *cobra.Command, controller string, streams genericiooptions.IOStreams, namespace string, client ClientFunc) error {
	if err := checkOutput(o.output); err != nil {
		return err
	}
	if o.parent == "" {
		return fmt.Errorf("no parent: name the live parent to sync with --parent NAMESPACE/NAME")
	}
	req, err := buildRequest(parentFlags{ref: o.parent, kind: o.parentKind}, namespace, nil)
	if err != nil {
		return err
	}
	parent := req.parent
	ctrl, err := parseControllerArg(controller)
	if err != nil {
		return err
	}
	clients, err := client()
	if err != nil {
		return err
	}
	answer, err := ctrl.sync(cmd.Context(), clients, req.sync, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("can't sync %s with %s: %w", parent, ctrl, err)
	}
	writeWarnings(streams.ErrOut, answer.Status.Warnings)
	if o.output == outputTable {
		if err := writeDone(streams.Out, parent, answer.Status.Plan); err != nil {
			return err
		}
	} else if err := writeAnswer(streams.Out, o.output, answer); err != nil {
		return err
	}
	if failed, tried := failures(answer.Status.Plan); failed > 0 {
		return fmt.Errorf("can't sync %s with %s: %d of %d actions failed", parent, ctrl, failed, tried)
	}
	return nil
}

// pastTense of each action, for lines like kubectl's "configmap/a created".
var pastTense = map[v1alpha1.SyncAction]string{
	v1alpha1.SyncActionCreate:   "created",
	v1alpha1.SyncActionUpdate:   "updated",
	v1alpha1.SyncActionRecreate: "recreated",
	v1alpha1.SyncActionDelete:   "deleted",
	v1alpha1.SyncActionAdopt:    "adopted",
	v1alpha1.SyncActionOrphan:   "orphaned",
}

// writeDone prints one line per child the sync changed, or tried to.
func writeDone(w io.Writer, parent parentID, plan []v1alpha1.SyncPlanItem) error {
	var b strings.Builder
	for _, item := range plan {
		if item.Action == v1alpha1.SyncActionUnchanged && item.Error == "" {
			continue
		}
		child := item.Kind + " " + describeName(item.Namespace, item.Name)
		if item.Error != "" {
			fmt.Fprintf(&b, "%s: %s failed: %s\n", child, item.Action, oneLine(item.Error))
			continue
		}
		done, ok := pastTense[item.Action]
		if !ok {
			done = string(item.Action)
		}
		fmt.Fprintf(&b, "%s %s\n", child, done)
	}
	if b.Len() == 0 {
		fmt.Fprintf(&b, "%s synced: no child changed\n", parent)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// failures counts the plan's items that failed, of those the sync tried
// (every item but an Unchanged one, unless that failed too).
func failures(plan []v1alpha1.SyncPlanItem) (failed, tried int) {
	for _, item := range plan {
		if item.Error != "" {
			failed++
		}
		if item.Error != "" || item.Action != v1alpha1.SyncActionUnchanged {
			tried++
		}
	}
	return failed, tried
}
