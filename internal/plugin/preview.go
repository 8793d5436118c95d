package plugin

import (
	"fmt"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

type previewOptions struct {
	parent       parentFlags
	output       string
	saveRequest  string
	serverDryRun bool
	fleet        fleetFlags
}

func newPreviewCommand(streams genericiooptions.IOStreams, flags *genericclioptions.ConfigFlags, client ClientFunc) *cobra.Command {
	o := &previewOptions{output: outputTable}
	cmd := &cobra.Command{
		Use:   "preview CONTROLLER (-f PARENT_FILE | --parent NAMESPACE/NAME) [--children FILE]... [-o table|yaml|json]\n  kubectl composite preview (--all-parents | --selector SELECTOR) (-f PROPOSED_CONTROLLER_FILE | CONTROLLER) [-o table|diff|yaml|json]",
		Short: "Show what a sync of one parent, or a proposed controller across its parents, would do, changing nothing",
		Long: `Run CONTROLLER's hooks for one parent through the server's
/sync?dryRun=All and print the plan: what the sync would do to each child
(Create, Update, Recreate, Delete, Unchanged, Adopt, Orphan), then a unified
diff of each update, as kubectl diff does. Nothing is persisted anywhere.

The parent is inline (-f, a YAML or JSON file; it need not exist) or live
(--parent NAMESPACE/NAME, or NAME for a cluster-scoped parent or one in the
namespace of -n). An inline parent that does not exist owns no children;
--children gives it observed children (YAML or JSON objects, several
documents or a List per file). Children taken from the cluster need their
managedFields, which tell the fields the controller set from the others:
kubectl get -o yaml --show-managed-fields.

--save-request DIR writes the exact request the hook received to
DIR/NAMESPACE.NAME.json, to keep as a test fixture of the hook.

With --all-parents (or --selector to pick parents by label), -f is a
proposed CompositeController instead: a changed spec of a stored one (a new
hook URL or version, new children, strategies or patches), previewed
against every live parent you may list through the server's
compositecontrollers/NAME/preview, page after page (--chunk-size parents
each). Without -f, the stored controller is previewed as it is, e.g.
against a new deployment of its hook. It prints a row per parent (children
to create, update, delete or leave, status changes, errors); -o diff
prints every change, -o json or yaml the whole answer. Nothing is written.

Exit code: 0 when the sync would change nothing, 1 when it would change
something, 2 when the preview failed (as kubectl diff); across the fleet, 2
when any parent can't be previewed.`,
		Example: `  # What would the controller hello do for this new parent?
  kubectl composite preview hello -f hello.yaml

  # ...for a live parent, keeping the hook request as a fixture
  kubectl composite preview hello --parent default/p1 --save-request testdata/

  # ...for a parent with observed children, printed as YAML
  kubectl composite preview hello -f hello.yaml --children children.yaml -o yaml

  # Which parents would a proposed change of the controller touch, and how?
  kubectl composite preview --all-parents -f proposed-hello.yaml
  kubectl composite preview --selector tier=gold -f proposed-hello.yaml -o diff

  # Fail a CI job when a hook change would change live children
  kubectl composite preview hello --parent default/p1 > plan.txt || echo "changes or error: $?"`,
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.fleet.set() {
				if len(args) > 1 {
					return fmt.Errorf("want at most one CONTROLLER argument, got %d (see '%s --help')", len(args), cmd.CommandPath())
				}
				return o.runFleet(cmd.Context(), args, streams, client)
			}
			if err := exactArgs("CONTROLLER")(cmd, args); err != nil {
				return err
			}
			return o.run(cmd, args[0], streams, namespaceFlag(flags), client)
		},
	}
	cmd.Flags().StringVarP(&o.parent.file, "filename", "f", "", "file of the inline parent, or with --all-parents of the proposed CompositeController, YAML or JSON (- for standard input)")
	cmd.Flags().BoolVar(&o.fleet.allParents, "all-parents", false, "preview the controller (-f: a proposed one) against every live parent you may list")
	cmd.Flags().StringVarP(&o.fleet.selector, "selector", "l", "", "preview the controller against the live parents this label selector picks")
	cmd.Flags().Int64Var(&o.fleet.chunkSize, "chunk-size", 0, "parents per request of a fleet preview; 0 for the server's default")
	cmd.Flags().StringVar(&o.parent.ref, "parent", "", "live parent to preview, NAMESPACE/NAME")
	cmd.Flags().StringVar(&o.parent.kind, "parent-kind", "", "the live object's KIND.VERSION.GROUP, for a DecoratorController of several resources")
	cmd.Flags().StringSliceVar(&o.parent.children, "children", nil, "files of observed children, YAML or JSON (repeat, or separate with commas)")
	cmd.Flags().StringVarP(&o.output, "output", "o", o.output, "output format: table (plan and diffs), diff (across the fleet: every change), yaml or json (the whole answer)")
	cmd.Flags().StringVar(&o.saveRequest, "save-request", "", "directory to save the hook request in, as NAMESPACE.NAME.json")
	cmd.Flags().BoolVar(&o.serverDryRun, "server-dry-run", false, "have the target cluster dry-run-apply each child, so admission and defaults show (one request per child)")
	return cmd
}

func (o *previewOptions) run(cmd *cobra.Command, controller string, streams genericiooptions.IOStreams, namespace string, client ClientFunc) error {
	if err := checkOutput(o.output); err != nil {
		return err
	}
	req, err := buildRequest(o.parent, namespace, &fileReader{stdin: streams.In})
	if err != nil {
		return err
	}
	req.sync.Spec.ServerDryRun = o.serverDryRun
	ctrl, err := parseControllerArg(controller)
	if err != nil {
		return err
	}
	clients, err := client()
	if err != nil {
		return err
	}
	answer, err := ctrl.sync(cmd.Context(), clients, req.sync, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return fmt.Errorf("can't preview %s with %s: %w", req.parent, ctrl, err)
	}
	writeWarnings(streams.ErrOut, append(req.warnings, answer.Status.Warnings...))
	if o.saveRequest != "" {
		path, err := saveHookRequest(o.saveRequest, req.parent, answer.Status)
		if err != nil {
			return err
		}
		fmt.Fprintf(streams.ErrOut, "hook request saved to %s\n", path)
	}
	if o.output == outputTable {
		if err := writePlanTable(streams.Out, answer.Status.Plan); err != nil {
			return err
		}
		if err := writePatches(streams.Out, answer.Status.Patches); err != nil {
			return err
		}
		if err := writeRollout(streams.Out, answer.Status.Rollout); err != nil {
			return err
		}
		if err := writeDiffs(streams.Out, answer.Status.Plan); err != nil {
			return err
		}
	} else if err := writeAnswer(streams.Out, o.output, answer); err != nil {
		return err
	}
	if changes(answer.Status.Plan) {
		return errChanges
	}
	return nil
}

// namespaceFlag is -n when given: kubectl's default namespace is not a
// parent's, since the parent resource may be cluster-scoped.
func namespaceFlag(flags *genericclioptions.ConfigFlags) string {
	if flags.Namespace == nil {
		return ""
	}
	return *flags.Namespace
}

// exactArgs wants one argument, named in the error when it is missing.
func exactArgs(name string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 {
			return fmt.Errorf("want one %s argument, got %d (see '%s --help')", name, len(args), cmd.CommandPath())
		}
		return nil
	}
}
