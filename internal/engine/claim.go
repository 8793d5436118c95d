package engine

import (
	"errors"
	"fmt"
	"sort"

	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
)

// ControllerUIDLabel is the label that selects a parent's children when the
// CompositeController sets spec.generateSelector, as Job does.
const ControllerUIDLabel = "controller-uid"

// errNoSelector is returned by ParentSelector for a parent without a usable
// spec.selector.
var errNoSelector = errors.New("parent has no spec.selector; set spec.generateSelector on the CompositeController")

// Claimed is the outcome of Claim: the candidate children sorted by how the
// parent relates to them.
type Claimed struct {
	// Owned are controlled by the parent and match its selector.
	Owned []*unstructured.Unstructured
	// Adopt have no controller, match the selector and are to be adopted.
	Adopt []*unstructured.Unstructured
	// Release are controlled by the parent but no longer match its
	// selector; they are orphaned, never deleted.
	Release []*unstructured.Unstructured
	// Foreign are controlled by another owner yet match the selector: a
	// conflict worth reporting. They are never touched.
	Foreign []*unstructured.Unstructured
	// Others are controlled by another owner and do not match the
	// selector, such as other parents' children: not a conflict unless the
	// hook asks for one of their names. They are never touched.
	Others []*unstructured.Unstructured
	// Unowned have no controller and are not adopted: they do not match
	// the selector, may not be adopted now, or the controller adopts no
	// orphan (a DecoratorController). They are never touched: a
	// desired child of the same name is not created over them, as
	// Metacontroller's create would fail with AlreadyExists.
	Unowned []*unstructured.Unstructured
}

// Claim sorts candidate children (already filtered to the declared child
// resources and the parent's namespace when namespaced) the ControllerRef
// way:
//   - owned by parent (controller ownerRef with parent UID) and matching the
//     selector: Owned;
//   - owned and not matching: Release (orphaned, never deleted);
//   - no controller ref, matching, canAdopt and not being deleted: Adopt;
//   - controlled by another owner: Foreign when matching, else Others
//     (never touched either way);
//   - any other object without a controller ref: Unowned (never touched).
//
// Like the ControllerRefManager of kube-controller-manager, a parent that is
// being deleted neither adopts nor releases: its owned children that no
// longer match are left to the garbage collector, and adopting an orphan
// would only hand it to the collector too.
//
// Each list is sorted by apiVersion, kind, namespace and name, so that callers
// behave the same on every run.
func Claim(parent *unstructured.Unstructured, selector labels.Selector, candidates []*unstructured.Unstructured, canAdopt bool) Claimed {
	var c Claimed
	if selector == nil {
		// A nil selector must select nothing; labels.Everything would adopt
		// every orphan in the namespace.
		selector = labels.Nothing()
	}
	parentDeleting := parent.GetDeletionTimestamp() != nil
	for _, obj := range candidates {
		if obj == nil || obj.GetUID() == parent.GetUID() && parent.GetUID() != "" {
			// A controller whose child resource is its parent resource
			// must never claim, or delete, the parent itself.
			continue
		}
		matches := selector.Matches(labels.Set(obj.GetLabels()))
		if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
			switch {
			case ref.UID != parent.GetUID() && matches:
				c.Foreign = append(c.Foreign, obj)
			case ref.UID != parent.GetUID():
				c.Others = append(c.Others, obj)
			case matches:
				c.Owned = append(c.Owned, obj)
			case !parentDeleting:
				c.Release = append(c.Release, obj)
			}
			continue
		}
		if matches && canAdopt && !parentDeleting && obj.GetDeletionTimestamp() == nil {
			c.Adopt = append(c.Adopt, obj)
			continue
		}
		c.Unowned = append(c.Unowned, obj)
	}
	for _, list := range [][]*unstructured.Unstructured{c.Owned, c.Adopt, c.Release, c.Foreign, c.Others, c.Unowned} {
		sortObjects(list)
	}
	return c
}

// ParentSelector is the selector of the parent's children: with
// spec.generateSelector "controller-uid=<parent uid>", else the parent's
// spec.selector. An empty selector is an error rather than "everything":
// it would claim every object of the child resources in the namespace.
func ParentSelector(def *definition.Definition, parent *unstructured.Unstructured) (labels.Selector, error) {
	if def != nil && def.ChildAnnotation != "" {
		return attachmentSelector, nil
	}
	if def != nil && def.GenerateSelector {
		return labels.SelectorFromSet(labels.Set{ControllerUIDLabel: string(parent.GetUID())}), nil
	}
	raw, found, err := unstructured.NestedFieldNoCopy(parent.Object, "spec", "selector")
	if err != nil || !found || raw == nil {
		return nil, errNoSelector
	}
	m, ok := raw.(map[string]interface{})
	if !ok {
		return nil, fmt.Errorf("parent's spec.selector is not an object (%T)", raw)
	}
	ls := &metav1.LabelSelector{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, ls); err != nil {
		return nil, fmt.Errorf("parent's spec.selector is invalid: %w", err)
	}
	if len(ls.MatchLabels) == 0 && len(ls.MatchExpressions) == 0 {
		return nil, errNoSelector
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, fmt.Errorf("parent's spec.selector is invalid: %w", err)
	}
	return sel, nil
}

// ControllerRef returns the OwnerReference the parent puts on its children
// (controller=true, blockOwnerDeletion=true).
func ControllerRef(parent *unstructured.Unstructured) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion:         parent.GetAPIVersion(),
		Kind:               parent.GetKind(),
		Name:               parent.GetName(),
		UID:                parent.GetUID(),
		Controller:         ptr.To(true),
		BlockOwnerDeletion: ptr.To(true),
	}
}

// ChildOwnerReferences are the ownerReferences a child is applied with:
// those the hook set, which validation keeps (not another controller's),
// and the parent's controller reference, appended as Metacontroller does.
func ChildOwnerReferences(parent, child *unstructured.Unstructured) []metav1.OwnerReference {
	return append(child.GetOwnerReferences(), ControllerRef(parent))
}

// ChildKey identifies a child independently of its API version, which is how
// observed and desired children are matched: "<Kind>.<group>
// <namespace>/<name>", e.g. "Deployment.apps ns/web" or "ConfigMap ns/cfg";
// a cluster-scoped child has no "<namespace>/".
func ChildKey(obj *unstructured.Unstructured) string {
	gk := schema.FromAPIVersionAndKind(obj.GetAPIVersion(), obj.GetKind()).GroupKind()
	return gk.String() + " " + namespacedName(obj.GetNamespace(), obj.GetName())
}

func namespacedName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// describe names an object in messages the way hooks see it:
// "ConfigMap.v1 ns/foo".
func describe(obj *unstructured.Unstructured) string {
	return obj.GetKind() + "." + obj.GetAPIVersion() + " " + namespacedName(obj.GetNamespace(), obj.GetName())
}

// sortObjects sorts by apiVersion, kind, namespace and name.
func sortObjects(objs []*unstructured.Unstructured) {
	sort.SliceStable(objs, func(i, j int) bool { return objectLess(objs[i], objs[j]) })
}

func objectLess(a, b *unstructured.Unstructured) bool {
	if x, y := a.GetAPIVersion(), b.GetAPIVersion(); x != y {
		return x < y
	}
	if x, y := a.GetKind(), b.GetKind(); x != y {
		return x < y
	}
	if x, y := a.GetNamespace(), b.GetNamespace(); x != y {
		return x < y
	}
	return a.GetName() < b.GetName()
}
