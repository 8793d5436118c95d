package plugin

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// parentFlags are the flags that name the parent of a sync.
type parentFlags struct {
	// file holds an inline parent (-f); ref names a live one (--parent).
	file, ref string
	// kind is --parent-kind: which of a DecoratorController's resources
	// a live object is of, KIND.VERSION.GROUP (KIND.VERSION for the core
	// group), as kubectl names resources.
	kind string
	// children are files of inline observed children.
	children []string
}

// parentID says which parent a request is about, for messages and the
// name of a saved hook request.
type parentID struct {
	kind, namespace, name string
}

func (p parentID) String() string {
	name := p.name
	if p.namespace != "" {
		name = p.namespace + "/" + name
	}
	return p.kind + " " + name
}

// fileName is the name of a parent's hook request fixture: namespace and
// name, which no two parents of a controller share.
func (p parentID) fileName() string {
	if p.namespace == "" {
		return p.name + ".json"
	}
	return p.namespace + "." + p.name + ".json"
}

// request is a SyncRequest built from the command line.
type request struct {
	sync   *v1alpha1.SyncRequest
	parent parentID
	// warnings are about the files: what they hold may not be what the
	// user meant the server to see.
	warnings []string
}

// buildRequest makes the SyncRequest of the flags; namespace is -n when
// given, the namespace of a parent that names none.
func buildRequest(flags parentFlags, namespace string, files *fileReader) (*request, error) {
	req := &v1alpha1.SyncRequest{}
	req.APIVersion, req.Kind = v1alpha1.SchemeGroupVersion.String(), "SyncRequest"
	out := &request{sync: req}
	switch {
	case flags.file != "" && flags.ref != "":
		return nil, fmt.Errorf("can't take both -f and --parent: give an inline parent or name a live one")
	case flags.file == "" && flags.ref == "":
		return nil, fmt.Errorf("no parent: give an inline parent with -f FILE or name a live one with --parent NAMESPACE/NAME")
	case flags.ref != "":
		ref, err := parseParentRef(flags.ref, namespace)
		if err != nil {
			return nil, err
		}
		if flags.kind != "" {
			if ref.APIVersion, ref.Kind, err = parseKind(flags.kind); err != nil {
				return nil, err
			}
		}
		req.Spec.ParentRef = ref
		out.parent = parentID{kind: "parent", namespace: ref.Namespace, name: ref.Name}
	default:
		parent, err := readParent(flags.file, namespace, files)
		if err != nil {
			return nil, err
		}
		raw, err := parent.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("can't encode the parent: %w", err)
		}
		req.Spec.Parent = &runtime.RawExtension{Raw: raw}
		out.parent = parentID{kind: parent.GetKind(), namespace: parent.GetNamespace(), name: parent.GetName()}
	}
	if len(flags.children) > 0 {
		var objs []*unstructured.Unstructured
		for _, f := range flags.children {
			more, err := files.objects(f)
			if err != nil {
				return nil, err
			}
			objs = append(objs, more...)
		}
		children, err := childrenMap(objs)
		if err != nil {
			return nil, err
		}
		raw, err := json.Marshal(children)
		if err != nil {
			return nil, fmt.Errorf("can't encode the children: %w", err)
		}
		req.Spec.Children = &runtime.RawExtension{Raw: raw}
		if n := unmanaged(objs); n > 0 {
			out.warnings = append(out.warnings, fmt.Sprintf("%d of the %d children have no metadata.managedFields, so the plan adopts their fields as if another client had set them; "+
				"kubectl get drops managedFields unless given --show-managed-fields", n, len(objs)))
		}
	}
	return out, nil
}

// unmanaged counts the objects without managedFields: the server tells
// from them which fields the controller set, and so what an apply changes.
func unmanaged(objs []*unstructured.Unstructured) int {
	n := 0
	for _, obj := range objs {
		if len(obj.GetManagedFields()) == 0 {
			n++
		}
	}
	return n
}

// parseParentRef reads NAMESPACE/NAME, or NAME alone: in namespace (-n)
// when given, else a cluster-scoped parent. Nothing is looked up: the
// server knows the parent resource's scope.
func parseParentRef(s, namespace string) (*v1alpha1.ParentReference, error) {
	parts := strings.Split(s, "/")
	ref := &v1alpha1.ParentReference{Namespace: namespace, Name: parts[0]}
	if len(parts) == 2 {
		ref.Namespace, ref.Name = parts[0], parts[1]
	}
	if len(parts) > 2 || ref.Name == "" || (len(parts) == 2 && ref.Namespace == "") {
		return nil, fmt.Errorf("can't read --parent %q: want NAMESPACE/NAME, or NAME for a cluster-scoped parent", s)
	}
	return ref, nil
}

// parseKind reads KIND.VERSION.GROUP, or KIND.VERSION for the core group,
// into an apiVersion and a kind.
func parseKind(s string) (apiVersion, kind string, err error) {
	kind, gv, found := strings.Cut(s, ".")
	if !found || kind == "" || gv == "" {
		return "", "", fmt.Errorf("can't read --parent-kind %q: want KIND.VERSION.GROUP, e.g. StatefulSet.v1.apps, or KIND.VERSION for the core group, e.g. Pod.v1", s)
	}
	version, group, _ := strings.Cut(gv, ".")
	if group == "" {
		return version, kind, nil
	}
	return group + "/" + version, kind, nil
}

// readParent reads the one object of file.
func readParent(file, namespace string, files *fileReader) (*unstructured.Unstructured, error) {
	objs, err := files.objects(file)
	if err != nil {
		return nil, err
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("can't use %s as the parent: it holds %d objects, want 1", file, len(objs))
	}
	parent := objs[0]
	if parent.GetNamespace() == "" && namespace != "" {
		parent.SetNamespace(namespace)
	}
	return parent, nil
}

// childrenMap puts objects in the shape of a hook request's children:
// {"<Kind>.<apiVersion>": {"<name>": object}}, keyed by namespace/name
// when two objects of a type share a name.
func childrenMap(objs []*unstructured.Unstructured) (map[string]map[string]*unstructured.Unstructured, error) {
	out := map[string]map[string]*unstructured.Unstructured{}
	for _, obj := range objs {
		group := obj.GetKind() + "." + obj.GetAPIVersion()
		if out[group] == nil {
			out[group] = map[string]*unstructured.Unstructured{}
		}
		key := obj.GetName()
		if other, taken := out[group][key]; taken {
			if other.GetNamespace() == obj.GetNamespace() {
				return nil, fmt.Errorf("can't use the children: %s %s is given twice", obj.GetKind(), describeName(obj.GetNamespace(), obj.GetName()))
			}
			key = obj.GetNamespace() + "/" + obj.GetName()
			if _, taken := out[group][key]; taken {
				return nil, fmt.Errorf("can't use the children: %s %s is given twice", obj.GetKind(), key)
			}
		}
		out[group][key] = obj
	}
	return out, nil
}

// describeName is NAMESPACE/NAME, or NAME when cluster-scoped.
func describeName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
