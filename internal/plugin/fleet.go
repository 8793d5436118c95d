package plugin

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	sigsjson "sigs.k8s.io/json"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	ccclient "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned/typed/metacontroller/v1alpha1"
)

// outputDiff prints every change of every parent of a fleet preview.
const outputDiff = "diff"

// fleetFlags are the flags of a preview across the fleet.
type fleetFlags struct {
	allParents bool
	selector   string
	chunkSize  int64
}

func (f fleetFlags) set() bool { return f.allParents || f.selector != "" }

// runFleet previews a proposed controller (the CompositeController of
// file, or the stored one named controller) against its live parents,
// page after page, and prints one table, diff or object for all of them.
func (o *previewOptions) runFleet(ctx context.Context, args []string, streams genericiooptions.IOStreams, client ClientFunc) error {
	switch o.output {
	case outputTable, outputDiff, outputYAML, outputJSON:
	default:
		return fmt.Errorf("can't print -o %q: want table, diff, yaml or json", o.output)
	}
	if len(o.parent.children) > 0 || o.parent.ref != "" || o.serverDryRun || o.saveRequest != "" {
		return fmt.Errorf("--children, --parent, --server-dry-run and --save-request preview one parent; --all-parents and --selector preview every parent")
	}
	ctrl, spec, err := proposedController(o.parent.file, args, &fileReader{stdin: streams.In})
	if err != nil {
		return err
	}
	var selector *metav1.LabelSelector
	if o.fleet.selector != "" {
		if selector, err = metav1.ParseToLabelSelector(o.fleet.selector); err != nil {
			return fmt.Errorf("can't read --selector: %w", err)
		}
	}
	ccs, err := client()
	if err != nil {
		return err
	}
	spec.Selector, spec.Limit = selector, o.fleet.chunkSize
	all, err := previewFleet(ctx, ccs, ctrl, spec)
	if err != nil {
		return err
	}
	writeWarnings(streams.ErrOut, all.Status.Warnings)
	switch o.output {
	case outputTable:
		err = writeFleetTable(streams.Out, all.Status)
	case outputDiff:
		err = writeFleetDiff(streams.Out, all.Status.Parents)
	default:
		err = writeObject(streams.Out, o.output, all)
	}
	if err != nil {
		return err
	}
	totals := all.Status.Totals
	switch {
	case totals.Failed > 0:
		return fmt.Errorf("%d of the %d parents can't be previewed; see their errors", totals.Failed, totals.Parents)
	case totals.Changed > 0:
		return errChanges
	}
	return nil
}

// proposedController is the controller and, from file, the proposed spec
// (a CompositeController's or a DecoratorController's); without a file, the
// stored controller named in args is previewed as it is.
func proposedController(file string, args []string, files *fileReader) (controllerArg, *v1alpha1.FleetPreviewSpec, error) {
	spec := &v1alpha1.FleetPreviewSpec{}
	if file == "" {
		if len(args) != 1 {
			return controllerArg{}, nil, fmt.Errorf("name the CONTROLLER to preview, or give the proposed one with -f FILE")
		}
		ctrl, err := parseControllerArg(args[0])
		return ctrl, spec, err
	}
	objs, err := files.objects(file)
	if err != nil {
		return controllerArg{}, nil, err
	}
	if len(objs) != 1 || (objs[0].GetKind() != "CompositeController" && objs[0].GetKind() != "DecoratorController") || objs[0].GetAPIVersion() != v1alpha1.SchemeGroupVersion.String() {
		return controllerArg{}, nil, fmt.Errorf("%s must hold one CompositeController or DecoratorController of %s", file, v1alpha1.SchemeGroupVersion)
	}
	data, err := objs[0].MarshalJSON()
	if err != nil {
		return controllerArg{}, nil, fmt.Errorf("can't read %s: %w", file, err)
	}
	ctrl := controllerArg{kind: objs[0].GetKind(), name: objs[0].GetName()}
	// Strict: a misspelt field would otherwise preview a controller that
	// is not the one in the file.
	var into any
	if ctrl.kind == definition.KindDecorator {
		dc := &v1alpha1.DecoratorController{}
		into, spec.DecoratorController = dc, &dc.Spec
	} else {
		cc := &v1alpha1.CompositeController{}
		into, spec.CompositeController = cc, &cc.Spec
	}
	strict, err := sigsjson.UnmarshalStrict(data, into)
	if err == nil && len(strict) > 0 {
		err = strict[0]
	}
	if err != nil {
		return controllerArg{}, nil, fmt.Errorf("can't read %s: %w", file, err)
	}
	if len(args) == 1 {
		named, err := parseControllerArg(args[0])
		if err != nil {
			return controllerArg{}, nil, err
		}
		if named.name != ctrl.name || (strings.Contains(args[0], "/") && named.kind != ctrl.kind) {
			return controllerArg{}, nil, fmt.Errorf("%s proposes %s, not %s", file, ctrl, named)
		}
	}
	return ctrl, spec, nil
}

// previewFleet follows the continue tokens and returns every page in one
// FleetPreview, its totals added up.
func previewFleet(ctx context.Context, client ccclient.MetacontrollerV1alpha1Interface, ctrl controllerArg, spec *v1alpha1.FleetPreviewSpec) (*v1alpha1.FleetPreview, error) {
	all := &v1alpha1.FleetPreview{Spec: *spec}
	all.APIVersion, all.Kind = v1alpha1.SchemeGroupVersion.String(), "FleetPreview"
	all.Name = ctrl.name
	all.Spec.Continue = ""
	for page := 1; ; page++ {
		req := &v1alpha1.FleetPreview{Spec: *spec}
		answer, err := ctrl.preview(ctx, client, req, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return nil, fmt.Errorf("can't preview %s (page %d): %w", ctrl, page, err)
		}
		all.Status.Parents = append(all.Status.Parents, answer.Status.Parents...)
		if page == 1 {
			all.Status.Warnings = answer.Status.Warnings
		}
		addTotals(&all.Status.Totals, answer.Status.Totals)
		if answer.Status.Continue == "" {
			return all, nil
		}
		spec.Continue = answer.Status.Continue
	}
}

func addTotals(t *v1alpha1.FleetPreviewTotals, page v1alpha1.FleetPreviewTotals) {
	t.Parents += page.Parents
	t.Changed += page.Changed
	t.Failed += page.Failed
	c, p := &t.Counts, page.Counts
	c.Create += p.Create
	c.Update += p.Update
	c.Recreate += p.Recreate
	c.Delete += p.Delete
	c.Adopt += p.Adopt
	c.Orphan += p.Orphan
	c.Unchanged += p.Unchanged
}

// writeFleetTable prints a row per parent: how many children it would
// create, update (in place, recreated, adopted or released: each writes
// the child), delete or leave, whether its status changes, and why it
// could not be previewed; then the totals.
func writeFleetTable(w io.Writer, s v1alpha1.FleetPreviewStatus) error {
	if len(s.Parents) == 0 {
		_, err := fmt.Fprintln(w, "No parents: the controller has none you may list, or none the selector picks.")
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "PARENT\tCREATES\tUPDATES\tDELETES\tUNCHANGED\tSTATUS\tERRORS")
	for _, p := range s.Parents {
		status, errs := "-", "-"
		if len(p.StatusDiff) > 0 {
			status = strconv.Itoa(len(p.StatusDiff)) + " changes"
		}
		if p.Error != "" {
			errs = oneLine(p.Error)
		}
		c := p.Counts
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\t%s\n", describeName(p.Namespace, p.Name),
			c.Create, c.Update+c.Recreate+c.Adopt+c.Orphan, c.Delete, c.Unchanged, status, errs)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	t := s.Totals
	_, err := fmt.Fprintf(w, "\n%d parents: %d would change, %d can't be previewed; children: %d to create, %d to update, %d to delete, %d unchanged\n",
		t.Parents, t.Changed, t.Failed, t.Counts.Create, t.Counts.Update+t.Counts.Recreate+t.Counts.Adopt+t.Counts.Orphan, t.Counts.Delete, t.Counts.Unchanged)
	return err
}

// writeFleetDiff prints, parent by parent, every change: a line for each
// child created, deleted, adopted or released, a unified diff for each
// update (as a single-parent preview prints it), one for the status, and
// the parent's error.
func writeFleetDiff(w io.Writer, parents []v1alpha1.FleetPreviewParent) error {
	var b strings.Builder
	for _, p := range parents {
		if len(p.Changes) == 0 && len(p.StatusDiff) == 0 && p.Error == "" {
			continue
		}
		fmt.Fprintf(&b, "# %s\n", describeName(p.Namespace, p.Name))
		if p.Error != "" {
			fmt.Fprintf(&b, "# error: %s\n", oneLine(p.Error))
		}
		for _, item := range p.Changes {
			if item.Action == v1alpha1.SyncActionUpdate || item.Action == v1alpha1.SyncActionRecreate {
				b.WriteString(unifiedDiff(item))
				continue
			}
			fmt.Fprintf(&b, "# %s %s %s\n", item.Action, item.Kind, describeName(item.Namespace, item.Name))
		}
		if len(p.StatusDiff) > 0 {
			b.WriteString(unifiedDiff(v1alpha1.SyncPlanItem{
				Action: v1alpha1.SyncActionUpdate, APIVersion: "parent", Kind: "status", Namespace: p.Namespace, Name: p.Name,
				Reason: "the status the hook would write", Diff: p.StatusDiff,
			}))
		}
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
		b.Reset()
	}
	return nil
}
