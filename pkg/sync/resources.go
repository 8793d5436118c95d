package sync

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// FinalizerPrefix names the finalizer a controller with a finalize hook puts
// on its parents, as Metacontroller does.
const FinalizerPrefix = "metacontroller.io/compositecontroller-"

// Resources are the resources a CompositeController names.
type Resources struct {
	Parent   schema.GroupVersionResource
	Children []schema.GroupVersionResource
}

// ResourcesOf parses the parent and child resources of cc: the one place
// where their apiVersions are read.
func ResourcesOf(cc *v1alpha1.CompositeController) (Resources, error) {
	var r Resources
	gv, err := schema.ParseGroupVersion(cc.Spec.ParentResource.APIVersion)
	if err != nil {
		return r, fmt.Errorf("spec.parentResource.apiVersion: %w", err)
	}
	r.Parent = gv.WithResource(cc.Spec.ParentResource.Resource)
	for i, child := range cc.Spec.ChildResources {
		gv, err := schema.ParseGroupVersion(child.APIVersion)
		if err != nil {
			return r, fmt.Errorf("spec.childResources[%d].apiVersion: %w", i, err)
		}
		gvr := gv.WithResource(child.Resource)
		if slices.Contains(r.Children, gvr) {
			// Listed twice: the first entry's update strategy counts, and
			// its objects are read once.
			continue
		}
		r.Children = append(r.Children, gvr)
	}
	return r, nil
}

// Finalizer is the finalizer cc's finalize hook keeps on its parents.
func Finalizer(cc *v1alpha1.CompositeController) string { return FinalizerPrefix + cc.Name }

// ParentLabelSelector is spec.parentResource.labelSelector, Everything when
// unset.
func ParentLabelSelector(cc *v1alpha1.CompositeController) (labels.Selector, error) {
	if s := cc.Spec.ParentResource.LabelSelector; s != nil {
		sel, err := metav1.LabelSelectorAsSelector(s)
		if err != nil {
			return nil, fmt.Errorf("spec.parentResource.labelSelector: %w", err)
		}
		return sel, nil
	}
	return labels.Everything(), nil
}

// HasFinalizer tells whether obj carries finalizer.
func HasFinalizer(obj metav1.Object, finalizer string) bool {
	for _, f := range obj.GetFinalizers() {
		if f == finalizer {
			return true
		}
	}
	return false
}

// ManagesChildren tells whether a sync of parent may change its children.
// As Metacontroller: always while the parent lives; while it is being
// deleted, only when the controller's finalize hook holds it (its finalizer
// is on the parent) and no finalizer of the garbage collector is pending —
// foreground deletion or orphaning is the collector's to carry out.
func ManagesChildren(cc *v1alpha1.CompositeController, parent *unstructured.Unstructured) bool {
	if parent.GetDeletionTimestamp() == nil {
		return true
	}
	for _, f := range parent.GetFinalizers() {
		if f == metav1.FinalizerDeleteDependents || f == metav1.FinalizerOrphanDependents {
			return false
		}
	}
	return cc.Spec.Hooks != nil && cc.Spec.Hooks.Finalize != nil && HasFinalizer(parent, Finalizer(cc))
}
