package definition

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Parents are the definitions the loop runs, one per parent resource: d
// itself for a CompositeController; for a DecoratorController, one view
// per resource, whose Parent, selectors and IgnoreStatusChanges are that
// resource's. The engine, a sync and a parent loop each read one view.
func (d *Definition) Parents() []*Definition {
	if d.Kind != KindDecorator {
		return []*Definition{d}
	}
	out := make([]*Definition, 0, len(d.Decorated))
	for _, r := range d.Decorated {
		view := *d
		view.Parent = r.Resource
		view.ParentLabels = r.Labels
		view.ParentAnnotations = r.Annotations
		view.IgnoreStatusChanges = r.IgnoreStatusChanges
		view.Rights = viewRights(d, r.GVR)
		out = append(out, &view)
	}
	return out
}

// parentResources are the resources whose objects d syncs.
func (d *Definition) parentResources() []Resource {
	if d.Kind != KindDecorator {
		return []Resource{d.Parent}
	}
	out := make([]Resource, 0, len(d.Decorated))
	for _, r := range d.Decorated {
		out = append(out, r.Resource)
	}
	return out
}

// IsParent tells whether gvr's group and resource are one of d's parent
// resources (whatever the version).
func (d *Definition) IsParent(group, resource string) bool {
	for _, r := range d.parentResources() {
		if r.GVR.Group == group && r.GVR.Resource == resource {
			return true
		}
	}
	return false
}

// Selects tells whether the controller syncs obj for what it is rather
// than for its finalizer: it matches the label selector and, for a
// decorator, the annotation selector.
func (d *Definition) Selects(obj *unstructured.Unstructured) bool {
	if !d.ParentLabels.Matches(metadataMap(obj, "labels")) {
		return false
	}
	return d.ParentAnnotations == nil || d.ParentAnnotations.Matches(metadataMap(obj, "annotations"))
}

// metadataStrings is a string map of an object's metadata (its labels or
// annotations) read where it is, as labels.Labels: Selects runs on every
// parent event and, for the controller's status, on every parent every few
// seconds, and GetLabels copies the map each time.
type metadataStrings map[string]interface{}

func metadataMap(obj *unstructured.Unstructured, field string) metadataStrings {
	m, _, _ := unstructured.NestedFieldNoCopy(obj.Object, "metadata", field)
	strings, _ := m.(map[string]interface{})
	return strings
}

func (m metadataStrings) Has(key string) bool {
	_, ok := m[key]
	return ok
}

func (m metadataStrings) Get(key string) string {
	s, _ := m.Lookup(key)
	return s
}

func (m metadataStrings) Lookup(key string) (string, bool) {
	v, ok := m[key]
	s, _ := v.(string)
	return s, ok
}

var _ labels.Labels = metadataStrings{}

// OwnsChild tells whether obj, controlled by one of the controller's
// parents, is the controller's child: for a decorator only when it carries
// the decorator's annotation with its name.
func (d *Definition) OwnsChild(obj metav1.Object) bool {
	return d.ChildAnnotation == "" || obj.GetAnnotations()[d.ChildAnnotation] == d.Name
}

// IsChild tells whether group and resource are one of d's child resources
// (whatever the version).
func (d *Definition) IsChild(group, resource string) bool {
	_, ok := d.ChildOfGroupResource(schema.GroupResource{Group: group, Resource: resource})
	return ok
}

// viewRights are the rights a decorator's loop on the resource parent uses:
// d's without those on its other resources (unless they are attachments
// too).
func viewRights(d *Definition, parent schema.GroupVersionResource) []Right {
	var out []Right
	for _, r := range d.Rights {
		other := d.IsParent(r.Group, r.Resource) && (r.Group != parent.Group || r.Resource != parent.Resource)
		if other && !d.IsChild(r.Group, r.Resource) {
			continue
		}
		out = append(out, r)
	}
	return out
}
