package metacontroller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ControllerRevision records one state of a parent's revisionHistory fields
// and the children that still follow it during a rolling update.
type ControllerRevision struct {
	metav1.TypeMeta
	metav1.ObjectMeta

	// ParentPatch holds the parent's revisionHistory fields at this
	// revision, as a JSON object.
	ParentPatch runtime.RawExtension
	// Children are the children that follow this revision.
	Children []ControllerRevisionChildren
}

// ControllerRevisionChildren names the children of one kind that follow a
// revision.
type ControllerRevisionChildren struct {
	APIGroup string
	Kind     string
	Names    []string
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ControllerRevisionList is a list of ControllerRevisions.
type ControllerRevisionList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []ControllerRevision
}
