package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// FleetPreview previews a proposed controller against the live parents of
// an existing one, through POST compositecontrollers/{name}/preview: which
// parents would change, and how. Like SubjectAccessReview and SyncRequest,
// the spec is the question and the status the answer; nothing of it is
// stored, and nothing is written anywhere: the proposed hooks are called
// and every plan is computed as a dry run. Large fleets are answered a
// page at a time: spec.limit and spec.continue as a list's limit and
// continue, with the next page's token in status.continue.
type FleetPreview struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata; nothing of it is stored.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the proposed controller and which parents to preview.
	Spec FleetPreviewSpec `json:"spec"`
	// status is filled by the server: each parent's plan and the totals.
	// +optional
	Status FleetPreviewStatus `json:"status,omitempty"`
}

// FleetPreviewSpec is the proposed controller and the parents it is
// previewed against.
type FleetPreviewSpec struct {
	// compositeController is the proposed spec of the CompositeController
	// named in the URL: a new hook URL or version, new children, new
	// strategies, new patches. Unset previews the controller as it is
	// stored (e.g. against a new hook deployment at the same URL). It is
	// validated, defaulted and authorized as a create or update of the
	// controller would be.
	// +optional
	CompositeController *CompositeControllerSpec `json:"compositeController,omitempty"`
	// decoratorController is the proposed spec of the DecoratorController
	// named in the URL, as compositeController is of a CompositeController;
	// a request gives the one of its controller's kind.
	// +optional
	DecoratorController *DecoratorControllerSpec `json:"decoratorController,omitempty"`
	// selector picks, among the controller's parents, those to preview;
	// unset previews them all.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// limit is the most parents one answer previews (as a list's limit);
	// 0 means the server's default. An answer may hold fewer, and say in
	// status.continue where to go on: the server stops starting hooks
	// when the request's deadline is too near for their timeouts.
	// +optional
	Limit int64 `json:"limit,omitempty"`
	// continue is status.continue of the previous answer, to preview the
	// next page of parents with the same spec.
	// +optional
	Continue string `json:"continue,omitempty"`
}

// FleetPreviewStatus is the answer: per parent, what the proposed
// controller would do, and the totals of this page.
type FleetPreviewStatus struct {
	// parents are the previewed parents, in the order listed: by
	// namespace, then name. Only parents in namespaces where the caller
	// may list the parent resource are previewed.
	// +optional
	// +listType=atomic
	Parents []FleetPreviewParent `json:"parents,omitempty"`
	// totals add up this page's parents.
	// +optional
	Totals FleetPreviewTotals `json:"totals,omitempty"`
	// continue is set when parents remain: send it back in
	// spec.continue for the next page.
	// +optional
	Continue string `json:"continue,omitempty"`
	// warnings about the preview as a whole (the proposed controller's
	// validation warnings, say).
	// +optional
	// +listType=atomic
	Warnings []string `json:"warnings,omitempty"`
}

// FleetPreviewCounts count a plan's actions, one per child.
type FleetPreviewCounts struct {
	// +optional
	Create int32 `json:"create,omitempty"`
	// +optional
	Update int32 `json:"update,omitempty"`
	// +optional
	Recreate int32 `json:"recreate,omitempty"`
	// +optional
	Delete int32 `json:"delete,omitempty"`
	// +optional
	Adopt int32 `json:"adopt,omitempty"`
	// +optional
	Orphan int32 `json:"orphan,omitempty"`
	// +optional
	Unchanged int32 `json:"unchanged,omitempty"`
}

// FleetPreviewParent is what the proposed controller would do to one
// parent.
type FleetPreviewParent struct {
	// namespace of the parent; empty for a cluster-scoped parent resource.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// name of the parent.
	Name string `json:"name"`
	// counts are the plan's actions.
	// +optional
	Counts FleetPreviewCounts `json:"counts,omitempty"`
	// changes are the plan's items other than Unchanged, each with the
	// fields it changes, one line each, as a SyncRequest's plan shows them.
	// +optional
	// +listType=atomic
	Changes []SyncPlanItem `json:"changes,omitempty"`
	// parentStatus is the status the hook would write.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	ParentStatus *runtime.RawExtension `json:"parentStatus,omitempty"`
	// statusDiff lists the fields of the parent's status that writing
	// parentStatus would change, one line each.
	// +optional
	// +listType=atomic
	StatusDiff []string `json:"statusDiff,omitempty"`
	// error is why this parent could not be previewed: the hook failed or
	// answered what the server refuses, or the caller may not read its
	// children. Nothing else is set then.
	// +optional
	Error string `json:"error,omitempty"`
	// warnings about this parent's plan that did not stop it.
	// +optional
	// +listType=atomic
	Warnings []string `json:"warnings,omitempty"`
}

// FleetPreviewTotals add up the parents of one answer.
type FleetPreviewTotals struct {
	// parents previewed.
	// +optional
	Parents int32 `json:"parents,omitempty"`
	// changed are the parents with a child action other than Unchanged or
	// a status that would change.
	// +optional
	Changed int32 `json:"changed,omitempty"`
	// failed are the parents with an error.
	// +optional
	Failed int32 `json:"failed,omitempty"`
	// counts add up the parents' plans.
	// +optional
	Counts FleetPreviewCounts `json:"counts,omitempty"`
}
