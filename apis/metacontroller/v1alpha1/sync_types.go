package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// SyncRequest runs a CompositeController's hooks for one parent now, through
// POST compositecontrollers/{name}/sync. The spec names the parent; the
// answer's status holds what the hook returned and the plan that makes the
// cluster match it. With dryRun=All nothing is persisted anywhere.
type SyncRequest struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata; nothing of it is stored.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says which parent to sync.
	Spec SyncRequestSpec `json:"spec"`
	// status is filled by the server: the hook's answer and the plan.
	// +optional
	Status SyncRequestStatus `json:"status,omitempty"`
}

// SyncRequestSpec names the parent: a live one (parentRef) or an inline one
// (parent), with optionally inline observed children.
type SyncRequestSpec struct {
	// parentRef names a live parent in the target cluster. Exactly one of
	// parentRef and parent is set.
	// +optional
	ParentRef *ParentReference `json:"parentRef,omitempty"`
	// parent is an inline parent object, e.g. one that does not exist yet.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Parent *runtime.RawExtension `json:"parent,omitempty"`
	// children are inline observed children, in the hook request's shape:
	// {"<Kind>.<apiVersion>": {"<name or namespace/name>": object}}. With an
	// inline parent and no target cluster, they are all the hook sees.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Children *runtime.RawExtension `json:"children,omitempty"`
	// serverDryRun asks the target cluster to dry-run-apply every desired
	// child (server-side apply with dryRun=All), so that what its admission
	// and defaulting (mutating and validating webhooks, policies, defaults
	// of built-in types and CRD schemas) would do shows in status.children,
	// at one round trip to the cluster per child. By default a preview
	// computes what each apply would store here, with structured-merge-diff
	// and the cluster's OpenAPI schemas as kube-apiserver's field manager
	// does, from the children the sync read anyway: no request per child,
	// but no defaulting or admission either. Only for a dry run
	// (?dryRun=All) with a target cluster.
	// +optional
	ServerDryRun bool `json:"serverDryRun,omitempty"`
}

// ParentReference names a parent object of the controller's parent resource.
type ParentReference struct {
	// apiVersion and kind say which of a DecoratorController's resources
	// the object is of; needed only when it decorates more than one.
	// +optional
	APIVersion string `json:"apiVersion,omitempty"`
	// kind of the object; see apiVersion.
	// +optional
	Kind string `json:"kind,omitempty"`
	// namespace of the parent; empty for a cluster-scoped parent resource.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// name of the parent.
	Name string `json:"name"`
}

// SyncAction is what a sync does to one child.
// +enum
type SyncAction string

const (
	// SyncActionCreate creates a child the hook returned and the cluster lacks.
	SyncActionCreate SyncAction = "Create"
	// SyncActionUpdate brings an existing child to what the hook returned.
	SyncActionUpdate SyncAction = "Update"
	// SyncActionRecreate deletes a changed child and creates it anew
	// (updateStrategy Recreate).
	SyncActionRecreate SyncAction = "Recreate"
	// SyncActionDelete deletes a child the hook no longer returns.
	SyncActionDelete SyncAction = "Delete"
	// SyncActionUnchanged leaves a child as it is: it matches, or its
	// update strategy (OnDelete) does not update it.
	SyncActionUnchanged SyncAction = "Unchanged"
	// SyncActionAdopt makes the parent the controller of a matching orphan.
	SyncActionAdopt SyncAction = "Adopt"
	// SyncActionOrphan releases an owned child that no longer matches the
	// parent's selector; it is not deleted.
	SyncActionOrphan SyncAction = "Orphan"
)

// SyncPlanItem is the plan for one child.
type SyncPlanItem struct {
	// action is Create, Update, Recreate, Delete, Unchanged, Adopt or Orphan.
	Action SyncAction `json:"action"`
	// apiVersion of the child.
	APIVersion string `json:"apiVersion"`
	// kind of the child.
	Kind string `json:"kind"`
	// namespace of the child; empty when cluster-scoped.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// name of the child.
	Name string `json:"name"`
	// reason explains the action, e.g. why a changed child is not updated.
	// +optional
	Reason string `json:"reason,omitempty"`
	// diff lists the fields an Update or Recreate changes, one per line:
	// "path: old -> new".
	// +optional
	// +listType=atomic
	Diff []string `json:"diff,omitempty"`
	// revision is the ControllerRevision whose desired state the child
	// follows, for children of a rolling update strategy.
	// +optional
	Revision string `json:"revision,omitempty"`
	// error is why the action failed, when the sync was not a dry run.
	// +optional
	Error string `json:"error,omitempty"`
}

// SyncTimings are how long the parts of a sync took, in milliseconds.
type SyncTimings struct {
	// customizeHookMillis is the time spent in the customize hook.
	// +optional
	CustomizeHookMillis int64 `json:"customizeHookMillis,omitempty"`
	// syncHookMillis is the time spent in the sync (or finalize) hook.
	// +optional
	SyncHookMillis int64 `json:"syncHookMillis,omitempty"`
	// patchesMillis is the time spent in spec.hooks.patches.
	// +optional
	PatchesMillis int64 `json:"patchesMillis,omitempty"`
	// totalMillis is the time of the whole request.
	// +optional
	TotalMillis int64 `json:"totalMillis,omitempty"`
}

// SyncRequestStatus is the outcome of a sync.
type SyncRequestStatus struct {
	// dryRun is true when nothing was persisted.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
	// parentStatus is the status the hook returned for the parent.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	ParentStatus *runtime.RawExtension `json:"parentStatus,omitempty"`
	// parentLabels and parentAnnotations are what a DecoratorController's
	// hook sets on the object it decorates; a null value removes one.
	// +optional
	ParentLabels map[string]*string `json:"parentLabels,omitempty"`
	// +optional
	ParentAnnotations map[string]*string `json:"parentAnnotations,omitempty"`
	// children are the desired children as an apply would store them: on
	// a dry run, as the server-side apply of each over the live child
	// computes it (or, with spec.serverDryRun, as the target cluster
	// answered a dry-run apply); a child that can't be computed or that
	// the cluster refused is as the hook returned it, with a warning.
	// +optional
	// +listType=atomic
	Children []runtime.RawExtension `json:"children,omitempty"`
	// plan is what the sync does (or, in a dry-run, would do) to each child.
	// +optional
	// +listType=atomic
	Plan []SyncPlanItem `json:"plan,omitempty"`
	// resyncAfterSeconds is the hook's request to be called again.
	// +optional
	ResyncAfterSeconds *float64 `json:"resyncAfterSeconds,omitempty"`
	// finalized is the finalize hook's answer.
	// +optional
	Finalized bool `json:"finalized,omitempty"`
	// hookRequest is the exact sync hook request that was sent; keep it as
	// a test fixture of the hook.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	HookRequest *runtime.RawExtension `json:"hookRequest,omitempty"`
	// patches are the steps of spec.hooks.patches in the order they ran,
	// each with the request it was given and what it changed in each
	// desired child: test a patch hook by previewing a parent.
	// +optional
	// +listType=atomic
	Patches []SyncPatchStep `json:"patches,omitempty"`
	// timings of the sync.
	// +optional
	Timings SyncTimings `json:"timings,omitempty"`
	// rollout is the state of the rolling update of the parent's children
	// (updateStrategy RollingRecreate or RollingInPlace): which revision
	// is latest, which child moves next, and what the rollout waits for.
	// +optional
	Rollout *SyncRollout `json:"rollout,omitempty"`
	// warnings about the sync that did not stop it.
	// +optional
	// +listType=atomic
	Warnings []string `json:"warnings,omitempty"`
}

// SyncRollout is the state of a rolling update, as the parent's Updated
// condition tells it, with the revisions behind it.
type SyncRollout struct {
	// reason is the reason of the parent's Updated condition:
	// OnLatestRevision, RolloutProgressing or RolloutWaiting.
	Reason string `json:"reason"`
	// message says which child moves, or what the rollout waits for.
	// +optional
	Message string `json:"message,omitempty"`
	// latestRevision is the ControllerRevision of the parent as it is.
	// +optional
	LatestRevision string `json:"latestRevision,omitempty"`
	// next is the child this sync moves to the latest revision, as
	// "Kind name"; empty when none moves.
	// +optional
	Next string `json:"next,omitempty"`
	// revisions are the parent's live ControllerRevisions, latest first.
	// +optional
	// +listType=atomic
	Revisions []SyncRevision `json:"revisions,omitempty"`
}

// SyncRevision is one ControllerRevision of a parent.
type SyncRevision struct {
	// name of the ControllerRevision.
	Name string `json:"name"`
	// children is how many children follow it.
	// +optional
	Children int32 `json:"children,omitempty"`
}

// SyncPatchStep is what one patch of spec.hooks.patches did in a sync.
type SyncPatchStep struct {
	// name of the patch.
	Name string `json:"name"`
	// skipped is true when the patch did not run; reason says why.
	// +optional
	Skipped bool `json:"skipped,omitempty"`
	// reason why the patch was skipped, e.g. its enabledIf was false.
	// +optional
	Reason string `json:"reason,omitempty"`
	// request is the exact patch request the patch was given: the
	// variables and the desired children as the patches before it left
	// them. Keep it as a test fixture of a patch hook.
	// +optional
	// +kubebuilder:pruning:PreserveUnknownFields
	Request *runtime.RawExtension `json:"request,omitempty"`
	// durationMillis is the time the patch took.
	// +optional
	DurationMillis int64 `json:"durationMillis,omitempty"`
	// changes are the desired children the patch changed, with what it
	// changed.
	// +optional
	// +listType=atomic
	Changes []SyncPatchChange `json:"changes,omitempty"`
}

// SyncPatchChange is what a patch changed in one desired child.
type SyncPatchChange struct {
	// apiVersion of the child.
	APIVersion string `json:"apiVersion"`
	// kind of the child.
	Kind string `json:"kind"`
	// namespace of the child; empty when cluster-scoped.
	// +optional
	Namespace string `json:"namespace,omitempty"`
	// name of the child.
	Name string `json:"name"`
	// diff lists the fields the patch changed, one per line, as a plan
	// item's diff: "path: old -> new", "- path: old" for a removed field.
	// +optional
	// +listType=atomic
	Diff []string `json:"diff,omitempty"`
}
