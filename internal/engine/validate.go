package engine

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/fieldowner"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// InvalidResponseError is a hook answer that breaks the contract. Nothing is
// planned from such an answer, so no child is created, changed or deleted.
type InvalidResponseError struct {
	// Kind is the controller's kind; CompositeController when empty.
	Kind string
	// Controller is the controller's name.
	Controller string
	// Hook is the hook's name as metrics and hook call errors have it:
	// definition.HookSync, HookFinalize, HookCustomize or, for a patch,
	// definition.PatchHookName; HookPatches for what the patches leave.
	Hook string
	// Problems lists every problem found, not only the first, so that a
	// hook author can fix them in one go.
	Problems []string
}

func (e *InvalidResponseError) Error() string {
	kind := e.Kind
	if kind == "" {
		kind = "CompositeController"
	}
	return fmt.Sprintf("%s %q: the %s hook's answer is invalid, so no child is changed: %s",
		kind, e.Controller, e.Hook, strings.Join(e.Problems, "; "))
}

// systemMetadata are the metadata fields only the API server sets. A hook
// that builds children from observed ones returns them; dropping them keeps
// an apply from failing on, say, a stale resourceVersion. ownerReferences
// are kept, as Metacontroller keeps them (hooks add owners for garbage
// collection), but for the parent's own and any other controller
// reference: the parent's controller reference is appended when applying.
var systemMetadata = []string{
	"resourceVersion", "uid", "creationTimestamp", "deletionTimestamp",
	"deletionGracePeriodSeconds", "managedFields", "generation", "selfLink",
}

// desiredChild is a validated desired child and its resource.
type desiredChild struct {
	obj *unstructured.Unstructured
	gvr schema.GroupVersionResource
}

// validate checks the hook's answer and returns the desired children,
// normalized: copies of what the hook returned (JSON round-tripped, so that
// numbers have the types decoded objects have and the hook's objects stay
// untouched), namespace defaulted, system metadata removed, controller-uid
// label added with generateSelector, sorted. All problems are collected
// into one InvalidResponseError.
func (c *computation) validate(hookName string, resp *hookapi.SyncHookResponse) ([]desiredChild, error) {
	invalid := func(problems []string) error {
		return &InvalidResponseError{Kind: c.in.Definition.Kind, Controller: c.in.Definition.Name, Hook: hookName, Problems: problems}
	}
	if resp == nil {
		return nil, invalid([]string{"the hook returned no response"})
	}

	var problems []string
	problem := func(format string, args ...interface{}) {
		problems = append(problems, fmt.Sprintf(format, args...))
	}
	if math.IsNaN(resp.ResyncAfterSeconds) || math.IsInf(resp.ResyncAfterSeconds, 0) {
		problem("resyncAfterSeconds is %v", resp.ResyncAfterSeconds)
	}
	if resp.Finalized && hookName != definition.HookFinalize {
		c.plan.warn("the sync hook answered finalized: true, which only a finalize hook's answer means; ignored")
	}

	var selector labels.Selector
	if len(resp.Children) > 0 {
		selector = c.selector()
	}
	var out []desiredChild
	// The parent's key is computed once: it is compared with every child.
	parentKey := ChildKey(c.in.Parent)
	seen := map[string]int{}
	for i, child := range resp.Children {
		d, ok, err := c.validateChild(i, child, parentKey, selector, seen, problem)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, d)
		}
	}
	if len(problems) > 0 {
		return nil, invalid(problems)
	}
	sortDesired(out)
	return out, nil
}

// childPath names the i-th child of a hook's answer in a problem.
func childPath(i int) string { return field.NewPath("children").Index(i).String() }

// validateChild checks the i-th child of the hook's answer, reporting each
// problem, and returns it normalized; false when it is invalid. parentKey
// is the parent's ChildKey, to report the parent itself. seen counts
// the children by key, to report duplicates. An error is a failure to
// check (discovery), not a problem of the answer.
func (c *computation) validateChild(i int, child *unstructured.Unstructured, parentKey string, selector labels.Selector, seen map[string]int, problem func(format string, args ...interface{})) (desiredChild, bool, error) {
	parent := c.in.Parent
	parentNS := parent.GetNamespace()
	if child == nil {
		problem("%s is null", childPath(i))
		return desiredChild{}, false, nil
	}
	apiVersion, kind, name, idProblems := identity(child)
	if len(idProblems) > 0 {
		for _, p := range idProblems {
			problem("%s %s", childPath(i), p)
		}
		return desiredChild{}, false, nil
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		problem("%s has an invalid apiVersion %q: %v", childPath(i), apiVersion, err)
		return desiredChild{}, false, nil
	}
	obj, err := normalize(child)
	if err != nil {
		problem("%s (%s.%s %s) is not a valid object: %v", childPath(i), kind, apiVersion, name, err)
		return desiredChild{}, false, nil
	}
	// Name the child as the hook wrote it; the namespace may be
	// defaulted below.
	desc := "child " + describe(obj)
	for _, field := range []string{"labels", "annotations"} {
		if _, _, err := unstructured.NestedStringMap(obj.Object, "metadata", field); err != nil {
			problem("%s: metadata.%s must map strings to strings: %v", desc, field, err)
		}
	}

	gvr, namespaced, err := c.resolve(gv.WithKind(kind))
	if err != nil {
		if !meta.IsNoMatchError(err) {
			// Discovery failing says nothing about the answer, but we
			// can't plan without knowing where the child lives.
			return desiredChild{}, false, fmt.Errorf("can't resolve the resource of %s: %w", desc, err)
		}
		problem("%s: %v", desc, err)
		return desiredChild{}, false, nil
	}
	if _, declared := c.in.Definition.Child(gvr); !declared {
		problem("%s: %s (%s) is not one of the controller's childResources", desc, gvr.GroupResource(), gv)
	}

	placeChild(desc, obj, gvr, namespaced, parentNS, problem)

	key := ChildKey(obj)
	if key == parentKey || (c.in.Definition.Parent.GVR.Resource != "" && gvr.GroupResource() == c.in.Definition.Parent.GVR.GroupResource() &&
		obj.GetNamespace() == parentNS && name == parent.GetName()) {
		problem("%s is the parent itself", desc)
	}
	seen[key]++
	if seen[key] == 2 {
		// Named after namespace defaulting: that is why they collide.
		problem("child %s is returned more than once", describe(obj))
	}

	c.stripSystemMetadata(desc, obj)
	c.annotateChild(obj)
	// What is applied, and so compared: no status (never a parent's to
	// write, as in Metacontroller), numbers as the wire has them.
	fieldowner.SanitizeInPlace(obj) // obj is normalize's copy
	c.labelChild(desc, obj, selector, problem)
	return desiredChild{obj: obj, gvr: gvr}, true, nil
}

// placeChild defaults the namespace of a namespaced parent's child and
// reports a child that is not where its parent's scope allows.
func placeChild(desc string, obj *unstructured.Unstructured, gvr schema.GroupVersionResource, namespaced bool, parentNS string, problem func(format string, args ...interface{})) {
	ns := obj.GetNamespace()
	switch {
	case parentNS != "" && !namespaced:
		problem("%s: %s is cluster-scoped; a namespaced parent can only have children in its own namespace", desc, gvr.GroupResource())
	case parentNS != "" && ns == "":
		obj.SetNamespace(parentNS)
	case parentNS != "" && ns != parentNS:
		problem("%s is in namespace %s, not the parent's namespace %s", desc, ns, parentNS)
	case parentNS == "" && namespaced && ns == "":
		problem("%s: %s is namespaced and the parent is cluster-scoped, so the child must set metadata.namespace", desc, gvr.GroupResource())
	case parentNS == "" && !namespaced && ns != "":
		problem("%s: %s is cluster-scoped but the child sets metadata.namespace %s", desc, gvr.GroupResource(), ns)
	}
}

// labelChild adds the controller-uid label with generateSelector and
// reports a child the parent's selector would not select. obj is
// normalize's copy, so its labels are changed where they are, rather
// than copied out as strings and stored back as a new map (GetLabels,
// SetLabels) for each child of each sync.
func (c *computation) labelChild(desc string, obj *unstructured.Unstructured, selector labels.Selector, problem func(format string, args ...interface{})) {
	generate := c.in.Definition.GenerateSelector
	if !generate && selector == nil {
		return
	}
	meta, _ := obj.Object["metadata"].(map[string]interface{})
	l, _ := meta["labels"].(map[string]interface{})
	if generate && meta != nil {
		// As Metacontroller: add the label when the hook did not set
		// it; a different value fails the selector check below.
		if _, ok := l[ControllerUIDLabel]; !ok {
			if l == nil {
				l = map[string]interface{}{}
				meta["labels"] = l
			}
			l[ControllerUIDLabel] = string(c.in.Parent.GetUID())
		}
	}
	if selector != nil && !selector.Matches(jsonLabels(l)) {
		// Such a child would be released right after it is created and
		// recreated on every sync.
		problem("%s: its labels %v do not match the parent's selector %q", desc, labels.Set(obj.GetLabels()), selector)
	}
}

// jsonLabels are an object's labels as decoded from JSON, read as
// labels.Labels without copying them into a map of strings. A value that
// is not a string (reported as a problem before) reads as "".
type jsonLabels map[string]interface{}

func (l jsonLabels) Has(key string) bool { _, ok := l[key]; return ok }

func (l jsonLabels) Get(key string) string { v, _ := l.Lookup(key); return v }

func (l jsonLabels) Lookup(key string) (string, bool) {
	v, ok := l[key]
	s, _ := v.(string)
	return s, ok
}

// identity reads apiVersion, kind and metadata.name, reporting what is
// missing or mistyped.
func identity(obj *unstructured.Unstructured) (apiVersion, kind, name string, problems []string) {
	get := func(what string, fields ...string) string {
		v, found, err := unstructured.NestedString(obj.Object, fields...)
		switch {
		case err != nil:
			problems = append(problems, fmt.Sprintf("has a malformed %s: %v", what, err))
		case !found || v == "":
			problems = append(problems, "has no "+what)
		}
		return v
	}
	apiVersion = get("apiVersion", "apiVersion")
	kind = get("kind", "kind")
	name = get("metadata.name", "metadata", "name")
	// A namespace that is not a string reads as none, which would put the
	// child in the parent's namespace whatever the hook meant; null is
	// none, as Metacontroller reads it.
	if ns, found, _ := unstructured.NestedFieldNoCopy(obj.Object, "metadata", "namespace"); found && ns != nil {
		if _, ok := ns.(string); !ok {
			problems = append(problems, fmt.Sprintf("has a malformed metadata.namespace: %T, not a string", ns))
		}
	}
	if len(problems) > 0 {
		// Name the child as well as is known, to help find it.
		var known []string
		for _, s := range []string{kind, apiVersion, name} {
			if s != "" {
				known = append(known, s)
			}
		}
		if len(known) > 0 {
			for i := range problems {
				problems[i] = "(" + strings.Join(known, " ") + ") " + problems[i]
			}
		}
	}
	return apiVersion, kind, name, problems
}

func (c *computation) stripSystemMetadata(desc string, obj *unstructured.Unstructured) {
	md, ok := obj.Object["metadata"].(map[string]interface{})
	if !ok {
		return
	}
	for _, f := range systemMetadata {
		delete(md, f)
	}
	refs := obj.GetOwnerReferences()
	if len(refs) == 0 {
		return
	}
	kept := refs[:0]
	for _, ref := range refs {
		switch {
		case ref.UID == c.in.Parent.GetUID():
			// A hook that returns observed children as they are carries
			// the parent's controller reference, appended again on apply.
		case ref.Controller != nil && *ref.Controller:
			c.plan.warn("%s: the controller reference to %s %s set by the hook is dropped; the parent is the child's controller", desc, ref.Kind, ref.Name)
		default:
			kept = append(kept, ref)
		}
	}
	if len(kept) == 0 {
		delete(md, "ownerReferences")
		return
	}
	obj.SetOwnerReferences(kept)
}

func sortDesired(ds []desiredChild) {
	sort.SliceStable(ds, func(i, j int) bool { return objectLess(ds[i].obj, ds[j].obj) })
}
