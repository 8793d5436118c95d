package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ControllerRollout lands a change of a controller's spec gradually: the
// parents are moved from the revision they run (the current one) to the
// spec as written (the update revision) step by step, each step gated on
// the health of the parents it moved. Not in Metacontroller, which
// re-syncs every parent at once; absent, so does this server.
type ControllerRollout struct {
	// steps are taken in order. Each step moves the parents it names, and
	// every step before it, to the update revision; after the last step
	// every parent is moved.
	// +listType=atomic
	Steps []RolloutStep `json:"steps"`
	// health is what a step's parents must pass before the next step
	// begins.
	// +optional
	Health *RolloutHealth `json:"health,omitempty"`
	// errorBudget stops the rollout when the update revision fails too
	// many syncs in one step.
	// +optional
	ErrorBudget *RolloutErrorBudget `json:"errorBudget,omitempty"`
	// onFailure is what a failed step does: Pause (the default) stops the
	// rollout where it is; Rollback moves every parent back to the
	// current revision.
	// +optional
	OnFailure *RolloutFailurePolicy `json:"onFailure,omitempty"`
	// paused stops the rollout at its step until it is cleared (kubectl
	// composite rollout pause and resume).
	// +optional
	Paused bool `json:"paused,omitempty"`
}

// RolloutStep is one step of a rollout: which parents it moves, by share
// or by label. Exactly one of percent, maxParents and selector is set.
type RolloutStep struct {
	// percent moves this share of all parents, counting those of earlier
	// steps: parents are ordered by a hash of their UID, so that which
	// parents a share holds never changes.
	// +optional
	Percent *int32 `json:"percent,omitempty"`
	// maxParents moves this many more parents than the steps before, in
	// the same order as percent.
	// +optional
	MaxParents *int32 `json:"maxParents,omitempty"`
	// selector moves the parents it selects.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// pauseSeconds is how long the rollout waits once this step passed
	// before it begins the next.
	// +optional
	PauseSeconds *int32 `json:"pauseSeconds,omitempty"`
}

// RolloutHealth is the gate of each step.
type RolloutHealth struct {
	// condition is a CEL expression over `parent` (the parent object as
	// stored), true when the parent is healthy. Default: a parent whose
	// status has a Ready condition is healthy when it is "True"; any other
	// parent, once its last sync succeeded.
	// +optional
	Condition *string `json:"condition,omitempty"`
	// deadlineSeconds is how long a step's parents have to be synced by
	// the update revision and pass the condition (default 300).
	// +optional
	DeadlineSeconds *int32 `json:"deadlineSeconds,omitempty"`
}

// RolloutErrorBudget is how many failures of the update revision a step
// tolerates before it fails.
type RolloutErrorBudget struct {
	// maxSyncFailures is how many syncs of the update revision may fail
	// (a hook that failed or answered wrongly, a child write refused) in
	// one step; one more fails the step. Unset: no budget, only the
	// deadline.
	// +optional
	MaxSyncFailures *int32 `json:"maxSyncFailures,omitempty"`
}

// RolloutFailurePolicy is what a failed step does.
// +enum
type RolloutFailurePolicy string

const (
	// RolloutPause stops the rollout at the failed step.
	RolloutPause RolloutFailurePolicy = "Pause"
	// RolloutRollback moves every parent back to the current revision.
	RolloutRollback RolloutFailurePolicy = "Rollback"
)

// RolloutPhase is where a rollout is.
type RolloutPhase string

const (
	// RolloutProgressing: a step is under way.
	RolloutProgressing RolloutPhase = "Progressing"
	// RolloutPaused: stopped by spec.rollout.paused or a failed step,
	// until resumed.
	RolloutPaused RolloutPhase = "Paused"
	// RolloutRolledBack: a failed step moved every parent back to the
	// current revision.
	RolloutRolledBack RolloutPhase = "RolledBack"
	// RolloutComplete: every parent runs the update revision.
	RolloutComplete RolloutPhase = "Complete"
)

// RolloutResumedAnnotation on a controller, set by kubectl composite
// rollout resume, resumes a rollout that a failed step paused or rolled
// back, when it is later than the failure (status.rollout.pausedTime). Both
// times are the server's: a create or update that sets or changes the
// annotation stores the server's time of the write (UTC, RFC 3339 with
// nanoseconds), whatever value the client wrote, so that a client's clock
// ahead does not resume failures still to come, nor one behind miss the
// failure it meant to resume. A write that leaves the value as stored keeps
// it; one that removes it removes it. A write of any new value is a resume,
// so a manifest that carries the annotation resumes each time it is applied
// over the server's value.
const RolloutResumedAnnotation = "composite.metacontroller.k8s.io/rollout-resumed-at"

// ParentPausedAnnotation on a parent, "true", stops the loop from syncing
// it at all, as Cluster API's and Crossplane's paused annotations do.
const ParentPausedAnnotation = "composite.metacontroller.k8s.io/paused"

// ConditionPaused is the condition the loop writes on the status of a
// parent it does not sync because of ParentPausedAnnotation.
const ConditionPaused = "Paused"

// RolloutStatus is where a controller's rollout is.
type RolloutStatus struct {
	// currentRevision is the revision the parents not yet moved run.
	// +optional
	CurrentRevision int64 `json:"currentRevision,omitempty"`
	// updateRevision is the revision being rolled out: the spec's.
	// +optional
	UpdateRevision int64 `json:"updateRevision,omitempty"`
	// step is the index of the step under way; the number of steps once
	// the last one passed.
	// +optional
	Step int32 `json:"step,omitempty"`
	// steps is how many steps the rollout has.
	// +optional
	Steps int32 `json:"steps,omitempty"`
	// phase is Progressing, Paused, RolledBack or Complete.
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`
	// reason and message say why the rollout is in its phase.
	// +optional
	Reason string `json:"reason,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// bucketLimit moves the parents whose bucket (a hash of their UID,
	// 0 to 9999) is below it, with those the steps' selectors select; it
	// is recorded when a step begins, so that a restart or another
	// replica moves the same parents.
	// +optional
	BucketLimit int32 `json:"bucketLimit,omitempty"`
	// stepStartTime is when the step under way began (or was resumed).
	// +optional
	StepStartTime *metav1.Time `json:"stepStartTime,omitempty"`
	// pausedTime is when a failed step paused or rolled back the rollout:
	// a resume requested later (RolloutResumedAnnotation) resumes it.
	// +optional
	PausedTime *metav1.Time `json:"pausedTime,omitempty"`
	// updatedParents are the parents moved to the update revision;
	// healthyParents those of them synced by it and healthy.
	// +optional
	UpdatedParents int32 `json:"updatedParents,omitempty"`
	// +optional
	HealthyParents int32 `json:"healthyParents,omitempty"`
	// syncFailures are the update revision's failed syncs in this step.
	// +optional
	SyncFailures int32 `json:"syncFailures,omitempty"`
	// failingParents name (namespace/name, at most 20) the step's parents
	// that failed its gate.
	// +optional
	// +listType=atomic
	FailingParents []string `json:"failingParents,omitempty"`
	// nextStepTime is when the next step may begin, after the pause of
	// the step that passed (its pauseSeconds).
	// +optional
	NextStepTime *metav1.Time `json:"nextStepTime,omitempty"`
	// driver is the replica that moves the rollout's steps, with --shards:
	// the holder of the shard of the controller's name.
	// +optional
	Driver string `json:"driver,omitempty"`
	// replicas are, with --shards, what each replica saw of the step
	// under way among the parents of the shards it holds: the driver sums
	// the reports of every shard's holder to gate the step.
	// +optional
	// +listType=map
	// +listMapKey=replica
	Replicas []RolloutReplicaReport `json:"replicas,omitempty"`
}

// RolloutReplicaReport is what one replica of a group run with --shards
// saw of a rollout's step among the parents of the shards it holds.
type RolloutReplicaReport struct {
	// replica is the replica's identity in the shard group.
	Replica string `json:"replica"`
	// shards are the shards it held when it reported.
	// +optional
	// +listType=set
	Shards []int32 `json:"shards,omitempty"`
	// updateRevision, step and stepStartTime name the step reported on.
	// +optional
	UpdateRevision int64 `json:"updateRevision,omitempty"`
	// +optional
	Step int32 `json:"step,omitempty"`
	// +optional
	StepStartTime *metav1.Time `json:"stepStartTime,omitempty"`
	// updatedParents, healthyParents, syncFailures and failingParents are
	// RolloutStatus's, among the parents of its shards.
	// +optional
	UpdatedParents int32 `json:"updatedParents,omitempty"`
	// +optional
	HealthyParents int32 `json:"healthyParents,omitempty"`
	// +optional
	SyncFailures int32 `json:"syncFailures,omitempty"`
	// +optional
	// +listType=atomic
	FailingParents []string `json:"failingParents,omitempty"`
}

// RevisionRecord is what a revision of a controller is besides its spec:
// its number, who wrote it and when it was replaced.
type RevisionRecord struct {
	// revision is the revision's number; numbers grow with every change
	// of the spec other than spec.rollout.
	Revision int64 `json:"revision"`
	// author wrote the revision's spec; its checks are this user's.
	// +optional
	Author *ControllerAuthor `json:"author,omitempty"`
	// replacedTime is when a newer spec replaced it.
	// +optional
	ReplacedTime *metav1.Time `json:"replacedTime,omitempty"`
}

// CompositeControllerRevision is an earlier spec of a CompositeController,
// kept in its status.history for rollouts and undo.
type CompositeControllerRevision struct {
	RevisionRecord `json:",inline"`
	// spec is the controller's spec at that revision, without rollout.
	Spec CompositeControllerSpec `json:"spec"`
}

// DecoratorControllerRevision is an earlier spec of a DecoratorController.
type DecoratorControllerRevision struct {
	RevisionRecord `json:",inline"`
	// spec is the controller's spec at that revision, without rollout.
	Spec DecoratorControllerSpec `json:"spec"`
}

// DefaultRevisionHistoryLimit is how many earlier specs a controller's
// status keeps unless spec.revisionHistoryLimit says otherwise.
const DefaultRevisionHistoryLimit int32 = 10
