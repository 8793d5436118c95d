package engine

import (
	"bytes"
	"crypto/sha1" // #nosec G505 -- a name, not a secret: Metacontroller's, so revisions it wrote keep their names
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
)

// The labels of a ControllerRevision, Metacontroller's: they keep the
// revisions of different parent resources apart.
const (
	RevisionLabelAPIGroup = "metacontroller.k8s.io/apiGroup"
	RevisionLabelResource = "metacontroller.k8s.io/resource"
)

// RevisionSelector selects the ControllerRevisions of a parent, owned or
// orphaned, as Metacontroller's: the parent's selector (controller-uid with
// generateSelector) and the parent resource's labels.
func RevisionSelector(def *definition.Definition, parent *unstructured.Unstructured) (labels.Selector, error) {
	parents := def.Parent.GVR
	sel, err := ParentSelector(def, parent)
	if err != nil {
		return nil, err
	}
	extra, err := labels.ValidatedSelectorFromSet(revisionResourceLabels(parents))
	if err != nil {
		return nil, err
	}
	reqs, _ := extra.Requirements()
	return sel.Add(reqs...), nil
}

func revisionResourceLabels(parents schema.GroupVersionResource) labels.Set {
	return labels.Set{RevisionLabelAPIGroup: parents.Group, RevisionLabelResource: parents.Resource}
}

// revisionPatch is the parent's revisionHistory fields as a JSON object.
func revisionPatch(parent map[string]interface{}, fieldPaths []string) (map[string]interface{}, error) {
	patch := map[string]interface{}{}
	return patch, copyFields(patch, parent, fieldPaths)
}

// applyRevisionPatch sets the revisionHistory fields the patch has on dest.
func applyRevisionPatch(dest, patch map[string]interface{}, fieldPaths []string) error {
	return copyFields(dest, patch, fieldPaths)
}

// copyFields copies the fields at the dotted paths that src has to dst.
func copyFields(dst, src map[string]interface{}, fieldPaths []string) error {
	for _, fp := range fieldPaths {
		parts := strings.Split(fp, ".")
		value, found, err := unstructured.NestedFieldNoCopy(src, parts...)
		if err != nil {
			return fmt.Errorf("can't read revisionHistory field %s: %w", fp, err)
		}
		if found {
			if err := unstructured.SetNestedField(dst, runtime.DeepCopyJSONValue(value), parts...); err != nil {
				return fmt.Errorf("can't set revisionHistory field %s: %w", fp, err)
			}
		}
	}
	return nil
}

// canonicalJSON encodes v with sorted keys and one number form, so that two
// patches compare equal whoever decoded them.
func canonicalJSON(v interface{}) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var generic interface{}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&generic); err != nil {
		return nil, err
	}
	return json.Marshal(generic)
}

// RevisionName is the name Metacontroller gives the revision of a parent
// with this patch: "<resource>.<group or core>-<sha1(parent UID, patch)>".
func RevisionName(parents schema.GroupVersionResource, parentUID string, patchData []byte) string {
	group := parents.Group
	if group == "" {
		group = "core"
	}
	prefix := parents.Resource + "." + group
	if len(prefix) > 253-41 {
		prefix = prefix[:253-41]
	}
	h := sha1.New() // #nosec G401
	h.Write([]byte(parentUID))
	h.Write(patchData)
	return prefix + "-" + hex.EncodeToString(h.Sum(nil))
}

// newRevision is the ControllerRevision of the parent as it is, named and
// labelled as Metacontroller names and labels it.
func newRevision(def *definition.Definition, parent *unstructured.Unstructured, patchData []byte) (*v1alpha1.ControllerRevision, error) {
	parents := def.Parent.GVR
	lbls := map[string]string{}
	if def.GenerateSelector {
		lbls[ControllerUIDLabel] = string(parent.GetUID())
	} else {
		// Metacontroller's choice: the labels of the parent's pod
		// template, which is what its selector usually selects.
		tl, _, err := unstructured.NestedStringMap(parent.Object, "spec", "template", "metadata", "labels")
		if err != nil {
			return nil, fmt.Errorf("invalid spec.template.metadata.labels on the parent: %w", err)
		}
		for k, v := range tl {
			lbls[k] = v
		}
	}
	for k, v := range revisionResourceLabels(parents) {
		lbls[k] = v
	}
	return &v1alpha1.ControllerRevision{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "ControllerRevision"},
		ObjectMeta: metav1.ObjectMeta{
			Name:            RevisionName(parents, string(parent.GetUID()), patchData),
			Namespace:       parent.GetNamespace(),
			Labels:          lbls,
			OwnerReferences: []metav1.OwnerReference{ControllerRef(parent)},
		},
		ParentPatch: runtime.RawExtension{Raw: patchData},
	}, nil
}

// claimRevisions sorts the candidate revisions: those the parent controls,
// and the orphans its revision selector matches, to adopt (as
// Metacontroller's ControllerRevisionManager does). Revisions another
// object controls are left alone.
func claimRevisions(parent *unstructured.Unstructured, sel labels.Selector, candidates []*v1alpha1.ControllerRevision) (owned, adopt []*v1alpha1.ControllerRevision) {
	for _, rev := range candidates {
		if rev == nil || rev.Namespace != parent.GetNamespace() {
			continue
		}
		ref := metav1.GetControllerOfNoCopy(rev)
		switch {
		case ref != nil && ref.UID == parent.GetUID():
			owned = append(owned, rev)
		case ref == nil && sel != nil && sel.Matches(labels.Set(rev.Labels)) && rev.DeletionTimestamp == nil && parent.GetDeletionTimestamp() == nil:
			adopt = append(adopt, rev)
		}
	}
	return owned, adopt
}
