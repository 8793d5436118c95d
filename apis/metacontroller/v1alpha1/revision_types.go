package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ControllerRevision records one state of a parent's revisionHistory fields
// and the children that still follow that state during a rolling update.
// It is Metacontroller's ControllerRevision, field for field: the loop
// writes one per distinct value of the parent's
// spec.parentResource.revisionHistory.fieldPaths (spec by default), owned by
// the parent, and removes it once no child follows it.
type ControllerRevision struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// parentPatch holds the parent's revisionHistory fields at this
	// revision, as a JSON object; applied to the current parent, it gives
	// the parent as it was.
	ParentPatch runtime.RawExtension `json:"parentPatch"`
	// children are the children, by API group and kind, that follow this
	// revision.
	// +optional
	// +listType=atomic
	Children []ControllerRevisionChildren `json:"children,omitempty"`
}

// ControllerRevisionChildren names the children of one kind that follow a
// revision.
type ControllerRevisionChildren struct {
	// apiGroup of the children, without version ("" for the core group).
	APIGroup string `json:"apiGroup"`
	// kind of the children.
	Kind string `json:"kind"`
	// names of the children.
	// +listType=atomic
	Names []string `json:"names"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ControllerRevisionList is a list of ControllerRevisions.
type ControllerRevisionList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the ControllerRevisions.
	Items []ControllerRevision `json:"items"`
}
