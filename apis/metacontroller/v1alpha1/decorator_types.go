package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +genclient:nonNamespaced
// +genclient:method=Sync,verb=create,subresource=sync,input=github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1.SyncRequest,result=github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1.SyncRequest
// +genclient:method=Preview,verb=create,subresource=preview,input=github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1.FleetPreview,result=github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1.FleetPreview
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DecoratorController adds labels, annotations, a status and attachments to
// existing objects it does not own, as Metacontroller's does: for every
// object of its resources that its selectors match, the sync hook gets the
// object and its attachments and answers what to add.
type DecoratorController struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says which objects are decorated, which attachments they may
	// get and which hooks compute them.
	Spec DecoratorControllerSpec `json:"spec"`
	// status is what the embedded controller last observed. It is written
	// only by the server through the status subresource.
	// +optional
	Status DecoratorControllerStatus `json:"status,omitempty"`
}

// DecoratorControllerSpec is Metacontroller's DecoratorController spec, field
// for field.
type DecoratorControllerSpec struct {
	// resources are the resources whose objects are decorated, each with
	// selectors that pick the objects.
	// +listType=atomic
	Resources []DecoratorControllerResourceRule `json:"resources"`

	// attachments are the resources the sync hook may return attachments
	// of, each with its update strategy. An attachment is owned by the
	// object it decorates (a controller ownerReference) and annotated
	// metacontroller.k8s.io/decorator-controller: <controller name>.
	// +optional
	// +listType=atomic
	Attachments []DecoratorControllerAttachmentRule `json:"attachments,omitempty"`

	// hooks are the webhooks called for each object. A sync hook is
	// required.
	// +optional
	Hooks *DecoratorControllerHooks `json:"hooks,omitempty"`

	// endpointConfigs are per-host connection settings (CA bundle, client
	// TLS, authentication) applied to every hook whose host matches and
	// that sets none of its own.
	// +optional
	// +listType=map
	// +listMapKey=host
	EndpointConfigs []EndpointConfig `json:"endpointConfigs,omitempty"`

	// ownChildWrites says what the loop does once it observes the children
	// a sync created, changed or deleted, as that sync wrote them: Sync (the
	// default, as Metacontroller) calls the sync hook again, once all of them
	// are observed, so that it sees them and can report them in the status;
	// Ignore does not, for a hook whose answer depends on the parent and its
	// related objects alone, not on the children it observes. A change that
	// is not the loop's own write syncs the parent either way. Not in
	// Metacontroller.
	// +optional
	OwnChildWrites *OwnChildWritesPolicy `json:"ownChildWrites,omitempty"`

	// ownStatusWrites says what the loop does once it observes its own
	// write of the hook's answer to the parent (its status; a
	// DecoratorController's labels and annotations too): Sync (the
	// default, as Metacontroller) calls the sync hook again, once, so that
	// a hook that reads what it wrote (a state machine over
	// status.phase) sees it stored and takes its next step at once; Ignore
	// does not, for a hook that never reads the status, labels or
	// annotations it returns: its next call is on the next change. A write
	// that stored no change calls nothing, nor does a status write under
	// parentResource.ignoreStatusChanges. A change that is not the loop's
	// own write syncs the parent either way. Not in Metacontroller.
	// +optional
	OwnStatusWrites *OwnStatusWritesPolicy `json:"ownStatusWrites,omitempty"`

	// resyncPeriodSeconds is how often every object is synced even when
	// nothing changed. Unset means only on change; 0 and negative values
	// mean every second, as in Metacontroller.
	// +optional
	ResyncPeriodSeconds *int32 `json:"resyncPeriodSeconds,omitempty"`

	// serviceAccount, when set, is the identity the controller acts with,
	// as a CompositeController's: writing it requires the right to
	// impersonate the ServiceAccount. Not in Metacontroller.
	// +optional
	ServiceAccount *ServiceAccountReference `json:"serviceAccount,omitempty"`

	// rollout, when set, lands a change of this spec gradually, step by
	// step, each step gated on the health of the parents it moved (see
	// ControllerRollout); absent, a change re-syncs every parent at once,
	// as Metacontroller does. Not in Metacontroller.
	// +optional
	Rollout *ControllerRollout `json:"rollout,omitempty"`
	// revisionHistoryLimit is how many earlier specs status.history keeps
	// for rollouts and kubectl composite rollout undo (default 10).
	// +optional
	RevisionHistoryLimit *int32 `json:"revisionHistoryLimit,omitempty"`
}

// DecoratorControllerResourceRule names a decorated resource and the
// objects of it that are decorated.
type DecoratorControllerResourceRule struct {
	ResourceRule `json:",inline"`

	// labelSelector restricts the objects decorated to those it matches.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`

	// annotationSelector restricts the objects decorated to those whose
	// annotations it matches.
	// +optional
	AnnotationSelector *AnnotationSelector `json:"annotationSelector,omitempty"`

	// ignoreStatusChanges, when true, syncs an object only when its
	// generation, labels or annotations change or it is being deleted,
	// not when only its status changes.
	// +optional
	IgnoreStatusChanges *bool `json:"ignoreStatusChanges,omitempty"`
}

// AnnotationSelector selects objects by annotation, as a label selector
// selects them by label.
type AnnotationSelector struct {
	// matchAnnotations are annotations an object must have, with these
	// values.
	// +optional
	MatchAnnotations map[string]string `json:"matchAnnotations,omitempty"`
	// matchExpressions are requirements on annotations, as a label
	// selector's.
	// +optional
	// +listType=atomic
	MatchExpressions []metav1.LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// DecoratorControllerAttachmentRule names an attachment resource and how
// its objects are updated.
type DecoratorControllerAttachmentRule struct {
	ResourceRule `json:",inline"`

	// updateStrategy says how attachments of this resource are updated.
	// +optional
	UpdateStrategy *DecoratorControllerAttachmentUpdateStrategy `json:"updateStrategy,omitempty"`
}

// DecoratorControllerAttachmentUpdateStrategy is how attachments are updated.
type DecoratorControllerAttachmentUpdateStrategy struct {
	// method is one of OnDelete (the default), Recreate or InPlace.
	// RollingRecreate and RollingInPlace are accepted, as Metacontroller's
	// schema does, and act as Recreate and InPlace: a decorated object
	// has no revisions.
	// +optional
	Method ChildUpdateMethod `json:"method,omitempty"`
}

// DecoratorControllerHooks are the hooks of a DecoratorController.
type DecoratorControllerHooks struct {
	// customize returns the related objects an object's sync hook also
	// sees.
	// +optional
	Customize *Hook `json:"customize,omitempty"`
	// sync computes an object's labels, annotations, status and
	// attachments. Required.
	// +optional
	Sync *Hook `json:"sync,omitempty"`
	// finalize is called instead of sync while an object is being
	// deleted, or no longer matches the selectors, until it answers
	// finalized: true.
	// +optional
	Finalize *Hook `json:"finalize,omitempty"`
}

// DecoratorControllerStatus is what the embedded controller last observed.
// Metacontroller's is empty.
type DecoratorControllerStatus struct {
	// observedGeneration is the generation of the spec the loop runs.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready, HookReachable.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// objects is the number of objects the controller decorates.
	// +optional
	Objects int32 `json:"objects,omitempty"`
	// attachments is the number of attachments the decorated objects own.
	// +optional
	Attachments int32 `json:"attachments,omitempty"`
	// pausedObjects is the number of objects the loop does not sync
	// because they are annotated composite.metacontroller.k8s.io/paused.
	// +optional
	PausedObjects int32 `json:"pausedObjects,omitempty"`
	// lastSyncTime is when an object was last synced.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`
	// lastSyncError is the latest error among the parents whose last sync
	// failed, empty once each of them has synced.
	// +optional
	LastSyncError string `json:"lastSyncError,omitempty"`
	// author is who last wrote the controller's spec, recorded by the
	// server, as a CompositeController's.
	// +optional
	Author *ControllerAuthor `json:"author,omitempty"`
	// revision is the number of the spec as written; it grows with every
	// change of the spec other than spec.rollout and
	// revisionHistoryLimit. Recorded by the server.
	// +optional
	Revision int64 `json:"revision,omitempty"`
	// history are earlier revisions of the spec, newest first, recorded
	// by the server when a write replaced them, at most
	// spec.revisionHistoryLimit of them.
	// +optional
	// +listType=atomic
	History []DecoratorControllerRevision `json:"history,omitempty"`
	// rollout is where the rollout of the update revision is, when the
	// spec has a rollout.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// DecoratorControllerList is a list of DecoratorControllers.
type DecoratorControllerList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the DecoratorControllers.
	Items []DecoratorController `json:"items"`
}
