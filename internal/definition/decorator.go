package definition

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// KindDecorator is the Kind of a Definition compiled from a
// DecoratorController.
const KindDecorator = "DecoratorController"

// DecoratorFinalizerPrefix names the finalizer a DecoratorController with a
// finalize hook puts on the objects it decorates, as Metacontroller does.
const DecoratorFinalizerPrefix = "metacontroller.io/decoratorcontroller-"

// DecoratorAnnotation marks the attachments a DecoratorController wrote, with
// its name as the value, as Metacontroller marks them: an object's
// attachments are the objects it controls that carry it, so that two
// decorators of one object never take each other's.
const DecoratorAnnotation = "metacontroller.k8s.io/decorator-controller"

// Decorated is one of a DecoratorController's resources: whose objects it
// decorates, picked by label and annotation.
type Decorated struct {
	Resource
	Labels      labels.Selector
	Annotations labels.Selector
	// IgnoreStatusChanges: an object is synced again only when its
	// generation, labels or annotations change or it is being deleted.
	IgnoreStatusChanges bool
}

// compileDecorator compiles a DecoratorController into the same Definition a
// CompositeController compiles into: its resources are the parents
// (Decorated, one view each in Parents), its attachments the children,
// claimed by controller reference and DecoratorAnnotation rather than by a
// label selector. A decorated object has no revisions, so a Rolling* method
// acts as its plain one.
func compileDecorator(dc *v1alpha1.DecoratorController, resolver KindResolver) (*Definition, error) {
	spec := field.NewPath("spec")
	d := &Definition{
		Kind:                  KindDecorator,
		Name:                  dc.Name,
		UID:                   dc.UID,
		Generation:            dc.Generation,
		Decorator:             dc,
		EndpointConfigs:       dc.Spec.EndpointConfigs,
		Finalizer:             DecoratorFinalizerPrefix + dc.Name,
		FieldManager:          FieldManager(dc.Name),
		ChildAnnotation:       DecoratorAnnotation,
		ParentLabels:          labels.Everything(),
		ServiceAccount:        dc.Spec.ServiceAccount,
		Author:                dc.Status.Author,
		IgnoreOwnChildWrites:  ptr.Deref(dc.Spec.OwnChildWrites, v1alpha1.OwnChildWritesSync) == v1alpha1.OwnChildWritesIgnore,
		IgnoreOwnStatusWrites: ptr.Deref(dc.Spec.OwnStatusWrites, v1alpha1.OwnStatusWritesSync) == v1alpha1.OwnStatusWritesIgnore,
	}
	if p := dc.Spec.ResyncPeriodSeconds; p != nil {
		d.ResyncPeriod = max(time.Duration(*p)*time.Second, time.Second)
	}
	first := map[schema.GroupResource]int{}
	for i, r := range dc.Spec.Resources {
		path := spec.Child("resources").Index(i)
		gvr, err := parseGVR(path, r.ResourceRule)
		if err != nil {
			return nil, err
		}
		// Validation refuses it; one stored before must not run: the loop
		// has one view, and one queue key, per group and resource.
		if j, dup := first[gvr.GroupResource()]; dup {
			err := field.Duplicate(path, gvr.GroupResource().String())
			err.Detail = "already listed at " + spec.Child("resources").Index(j).String()
			return nil, err
		}
		first[gvr.GroupResource()] = i
		dr := Decorated{Resource: resolve(gvr, resolver), Labels: labels.Everything(), Annotations: labels.Everything()}
		dr.IgnoreStatusChanges = r.IgnoreStatusChanges != nil && *r.IgnoreStatusChanges
		if s := r.LabelSelector; s != nil {
			if dr.Labels, err = metav1.LabelSelectorAsSelector(s); err != nil {
				return nil, fmt.Errorf("%s: %w", path.Child("labelSelector"), err)
			}
		}
		if s := r.AnnotationSelector; s != nil {
			// Metacontroller reads it as a label selector over annotations.
			ls := &metav1.LabelSelector{MatchLabels: s.MatchAnnotations, MatchExpressions: s.MatchExpressions}
			if dr.Annotations, err = metav1.LabelSelectorAsSelector(ls); err != nil {
				return nil, fmt.Errorf("%s: %w", path.Child("annotationSelector"), err)
			}
		}
		d.Decorated = append(d.Decorated, dr)
	}
	for i, a := range dc.Spec.Attachments {
		gvr, err := parseGVR(spec.Child("attachments").Index(i), a.ResourceRule)
		if err != nil {
			return nil, err
		}
		if _, dup := d.Child(gvr); dup {
			continue
		}
		child := Child{Resource: resolve(gvr, resolver), Method: v1alpha1.ChildUpdateOnDelete}
		if s := a.UpdateStrategy; s != nil && s.Method != "" {
			child.Method = plainMethod(s.Method)
		}
		d.Children = append(d.Children, child)
	}
	if h := dc.Spec.Hooks; h != nil {
		var err error
		if d.Hooks, err = resolveHooks(spec.Child("hooks"), h.Sync, h.Finalize, h.Customize); err != nil {
			return nil, err
		}
	}
	d.Rights = neededRights(d)
	d.References = references(d)
	return d, nil
}

// plainMethod is the update method a decorator's attachments get for m:
// without revisions, a rolling method updates as its plain one.
func plainMethod(m v1alpha1.ChildUpdateMethod) v1alpha1.ChildUpdateMethod {
	switch m {
	case v1alpha1.ChildUpdateRollingRecreate:
		return v1alpha1.ChildUpdateRecreate
	case v1alpha1.ChildUpdateRollingInPlace:
		return v1alpha1.ChildUpdateInPlace
	}
	return m
}

// AdoptsOrphans tells whether d's parents adopt the orphans their selector
// matches. A CompositeController does, as kube-controller-manager's
// controllers do. A DecoratorController never does, as in Metacontroller,
// whose decorator takes as attachments only the objects the decorated
// object controls: an attachment orphaned with its object (kubectl delete
// --cascade=orphan) carries the decorator's annotation, and adopting it
// would hand it to whichever object synced first, which deletes it at
// once as an attachment its hook did not ask for.
func (d *Definition) AdoptsOrphans() bool {
	return d.Kind != KindDecorator
}

// WithoutStatusRights is d without the right to write its parent's status:
// for a decorated resource without a status subresource, whose status, if
// any, is written with the object itself.
func (d *Definition) WithoutStatusRights() *Definition {
	out := *d
	out.Rights = nil
	for _, r := range d.Rights {
		if r.Subresource == "status" && r.Group == d.Parent.GVR.Group && r.Resource == d.Parent.GVR.Resource {
			continue
		}
		out.Rights = append(out.Rights, r)
	}
	return &out
}
