package definition

import (
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/patches"
	"github.com/composite-apiserver/composite-apiserver/internal/patches/variables"
)

// KindComposite is the Kind of a Definition compiled from a
// CompositeController.
const KindComposite = "CompositeController"

// FinalizerPrefix names the finalizer a CompositeController with a finalize
// hook puts on its parents, as Metacontroller does.
const FinalizerPrefix = "metacontroller.io/compositecontroller-"

// compileComposite compiles a CompositeController: one parent resource,
// its children claimed by the parent's label selector.
func compileComposite(cc *v1alpha1.CompositeController, resolver KindResolver) (*Definition, error) {
	spec := field.NewPath("spec")
	d := &Definition{
		Kind:                  KindComposite,
		Name:                  cc.Name,
		UID:                   cc.UID,
		Generation:            cc.Generation,
		Object:                cc,
		GenerateSelector:      ptr.Deref(cc.Spec.GenerateSelector, false),
		IgnoreStatusChanges:   ptr.Deref(cc.Spec.ParentResource.IgnoreStatusChanges, false),
		RevisionFieldPaths:    revisionFieldPaths(cc.Spec.ParentResource.RevisionHistory),
		EndpointConfigs:       cc.Spec.EndpointConfigs,
		Finalizer:             FinalizerPrefix + cc.Name,
		FieldManager:          FieldManager(cc.Name),
		ServiceAccount:        cc.Spec.ServiceAccount,
		Author:                cc.Status.Author,
		IgnoreOwnChildWrites:  ptr.Deref(cc.Spec.OwnChildWrites, v1alpha1.OwnChildWritesSync) == v1alpha1.OwnChildWritesIgnore,
		IgnoreOwnStatusWrites: ptr.Deref(cc.Spec.OwnStatusWrites, v1alpha1.OwnStatusWritesSync) == v1alpha1.OwnStatusWritesIgnore,
	}
	if cc.Spec.Workers != nil {
		d.Workers = int(*cc.Spec.Workers)
	}
	if p := cc.Spec.ResyncPeriodSeconds; p != nil {
		d.ResyncPeriod = max(time.Duration(*p)*time.Second, time.Second)
	}
	parent, err := parseGVR(spec.Child("parentResource"), cc.Spec.ParentResource.ResourceRule)
	if err != nil {
		return nil, err
	}
	d.Parent = resolve(parent, resolver)
	for i, cr := range cc.Spec.ChildResources {
		gvr, err := parseGVR(spec.Child("childResources").Index(i), cr.ResourceRule)
		if err != nil {
			return nil, err
		}
		if _, dup := d.Child(gvr); dup {
			// Listed twice: the first entry's update strategy counts, and
			// its objects are read once.
			continue
		}
		child := Child{Resource: resolve(gvr, resolver), Method: v1alpha1.ChildUpdateOnDelete, Strategy: cr.UpdateStrategy}
		if s := cr.UpdateStrategy; s != nil && s.Method != "" {
			child.Method = s.Method
		}
		d.Rolling = d.Rolling || IsRolling(child.Method)
		d.Children = append(d.Children, child)
	}
	d.ParentLabels = labels.Everything()
	if s := cc.Spec.ParentResource.LabelSelector; s != nil {
		if d.ParentLabels, err = metav1.LabelSelectorAsSelector(s); err != nil {
			return nil, fmt.Errorf("%s: %w", spec.Child("parentResource", "labelSelector"), err)
		}
	}
	if d.Hooks, err = compositeHooks(spec.Child("hooks"), cc); err != nil {
		return nil, err
	}
	d.Rights = neededRights(d)
	d.References = references(d)
	return d, nil
}

// revisionFieldPaths are spec.parentResource.revisionHistory.fieldPaths,
// spec by default.
func revisionFieldPaths(rh *v1alpha1.CompositeControllerRevisionHistory) []string {
	var paths []string
	if rh != nil {
		for _, p := range rh.FieldPaths {
			if p != "" {
				paths = append(paths, p)
			}
		}
	}
	if len(paths) == 0 {
		return []string{"spec"}
	}
	return paths
}

func compositeHooks(path *field.Path, cc *v1alpha1.CompositeController) (Hooks, error) {
	spec := cc.Spec.Hooks
	if spec == nil {
		return Hooks{}, nil
	}
	out, err := resolveHooks(path, spec.Sync, spec.Finalize, spec.Customize)
	if err != nil {
		return out, err
	}
	for i := range spec.Patches {
		p, err := compilePatch(cc.Name, &spec.Patches[i])
		if err != nil {
			return out, fmt.Errorf("%s: %w", path.Child("patches").Index(i), err)
		}
		out.Patches = append(out.Patches, p)
	}
	return out, nil
}

// compilePatch compiles enabledIf and an inline patch's templates.
func compilePatch(controller string, spec *v1alpha1.PatchHook) (Patch, error) {
	p := Patch{Name: spec.Name}
	fail := func(err error) error {
		return fmt.Errorf("can't configure CompositeController %q patch %q: %w", controller, spec.Name, err)
	}
	if spec.EnabledIf != nil {
		cond, err := variables.CompileCondition(*spec.EnabledIf)
		if err != nil {
			return p, fail(fmt.Errorf("enabledIf %w", err))
		}
		p.EnabledIf = cond
	}
	var err error
	switch {
	case spec.Webhook != nil && len(spec.Definitions) > 0:
		return p, fail(errors.New("sets both webhook and definitions"))
	case spec.Webhook != nil:
		// A patch hook decodes strictly unless it says otherwise
		// (SetDefaults_PatchHook), whatever its version; and it has no
		// ETags: its answer depends on the children the sync hook
		// returned, not only on the parent an ETag is kept for.
		wh := spec.Webhook.DeepCopy()
		wh.Etag = nil
		if wh.ResponseUnMarshallMode == nil {
			strict := v1alpha1.ResponseUnmarshallModeStrict
			wh.ResponseUnMarshallMode = &strict
		}
		if p.Webhook, err = ResolveHook(PatchHookName(spec.Name), nil, wh); err != nil {
			return p, fail(err)
		}
	case len(spec.Definitions) > 0:
		if p.Inline, err = patches.NewInline(spec.Definitions); err != nil {
			return p, fail(err)
		}
	default:
		return p, fail(errors.New("sets neither webhook nor definitions"))
	}
	return p, nil
}
