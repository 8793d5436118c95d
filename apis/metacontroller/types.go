package metacontroller

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// CompositeController makes a parent resource own the child resources that a
// sync hook returns for it. For every parent object, the controller sends the
// sync hook the parent and its observed children; the hook answers with the
// parent's new status and the desired children, and the controller makes the
// cluster match.
type CompositeController struct {
	metav1.TypeMeta `json:",inline"`
	// Standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says which parent resource is managed, which child resources it
	// owns and which hooks compute the children.
	Spec CompositeControllerSpec `json:"spec"`
	// status is what the embedded controller last observed. It is written
	// only by the server through the status subresource.
	// +optional
	Status CompositeControllerStatus `json:"status,omitempty"`

	// LegacyShape records the conversion of a request's object from
	// Metacontroller's earliest shape, for the strategy to answer; nil
	// otherwise. Never stored or served.
	LegacyShape *LegacyShape `json:"-"`
}

// CompositeControllerSpec is Metacontroller's CompositeController spec, field
// for field, plus the additions documented on each field.
type CompositeControllerSpec struct {
	// parentResource is the resource whose objects are the parents.
	ParentResource CompositeControllerParentResourceRule `json:"parentResource"`

	// childResources are the resources the sync hook may return children
	// of, each with its update strategy. Unique by apiVersion and resource.
	// +optional
	ChildResources []CompositeControllerChildResourceRule `json:"childResources,omitempty"`

	// hooks are the webhooks called for each parent. A sync hook is required.
	// +optional
	Hooks *CompositeControllerHooks `json:"hooks,omitempty"`

	// endpointConfigs are per-host connection settings (CA bundle, client
	// TLS, authentication) applied to every hook whose host matches and
	// that sets none of its own.
	// +optional
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

	// resyncPeriodSeconds is how often every parent is synced even when
	// nothing changed. Unset means only on change. As in Metacontroller,
	// which clamps the period to at least one second, 0 and negative values
	// mean every second.
	// +optional
	ResyncPeriodSeconds *int32 `json:"resyncPeriodSeconds,omitempty"`

	// workers is how many parents of this controller are synced at once;
	// unset means the server's --workers. Not in Metacontroller.
	// +optional
	Workers *int32 `json:"workers,omitempty"`

	// generateSelector, when true, makes the controller label children with
	// a controller-uid label of the parent and select them by it, instead of
	// using the parent's spec.selector.
	// +optional
	GenerateSelector *bool `json:"generateSelector,omitempty"`

	// serviceAccount, when set, is the identity the controller acts with:
	// everything its loop and a live /sync do for it (child, revision and
	// parent writes, hook credential reads, and every read whose objects
	// reach a hook) is done impersonating this ServiceAccount, so that
	// kube-apiserver's RBAC judges it. Writing it requires the right to
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

// ResourceRule names a resource by API version and plural resource name.
type ResourceRule struct {
	// apiVersion is the group/version of the resource, e.g. "apps/v1" or "v1".
	APIVersion string `json:"apiVersion"`
	// resource is the plural resource name, e.g. "deployments".
	Resource string `json:"resource"`
}

// CompositeControllerParentResourceRule names the parent resource.
type CompositeControllerParentResourceRule struct {
	ResourceRule `json:",inline"`

	// revisionHistory lists the parent fields whose changes are tracked as
	// revisions by Rolling* update strategies.
	// +optional
	RevisionHistory *CompositeControllerRevisionHistory `json:"revisionHistory,omitempty"`

	// labelSelector restricts the parents handled to those it matches.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`

	// ignoreStatusChanges, when true, does not sync a parent when only its
	// status changed.
	// +optional
	IgnoreStatusChanges *bool `json:"ignoreStatusChanges,omitempty"`
}

// CompositeControllerRevisionHistory configures revision tracking.
type CompositeControllerRevisionHistory struct {
	// fieldPaths are dotted paths of parent fields, e.g. "spec.template".
	// +optional
	FieldPaths []string `json:"fieldPaths,omitempty"`
}

// ChildUpdateMethod says how a child that differs from the desired one is
// brought up to date.
type ChildUpdateMethod string

const (
	// ChildUpdateOnDelete never updates a child; it is recreated from the
	// desired state only once somebody deletes it.
	ChildUpdateOnDelete ChildUpdateMethod = "OnDelete"
	// ChildUpdateRecreate deletes a changed child and creates it anew.
	ChildUpdateRecreate ChildUpdateMethod = "Recreate"
	// ChildUpdateInPlace updates a changed child in place.
	ChildUpdateInPlace ChildUpdateMethod = "InPlace"
	// ChildUpdateRollingRecreate recreates changed children one at a time,
	// waiting for each to pass its status checks.
	ChildUpdateRollingRecreate ChildUpdateMethod = "RollingRecreate"
	// ChildUpdateRollingInPlace updates changed children in place one at a
	// time, waiting for each to pass its status checks.
	ChildUpdateRollingInPlace ChildUpdateMethod = "RollingInPlace"
)

// CompositeControllerChildResourceRule names a child resource and how its
// objects are updated.
type CompositeControllerChildResourceRule struct {
	ResourceRule `json:",inline"`

	// updateStrategy says how children of this resource are updated.
	// +optional
	UpdateStrategy *CompositeControllerChildUpdateStrategy `json:"updateStrategy,omitempty"`
}

// CompositeControllerChildUpdateStrategy is how children are updated.
type CompositeControllerChildUpdateStrategy struct {
	// method is one of OnDelete (the default), Recreate, InPlace,
	// RollingRecreate or RollingInPlace.
	// +optional
	Method ChildUpdateMethod `json:"method,omitempty"`
	// statusChecks say when a child updated by a Rolling* method counts as
	// healthy. They are ignored with other methods, as in Metacontroller.
	// +optional
	StatusChecks ChildUpdateStatusChecks `json:"statusChecks,omitempty"`
}

// ChildUpdateStatusChecks are the checks a rolling update waits for.
type ChildUpdateStatusChecks struct {
	// conditions that must hold on the child's status.
	// +optional
	Conditions []StatusConditionCheck `json:"conditions,omitempty"`
}

// StatusConditionCheck matches one status condition of a child.
type StatusConditionCheck struct {
	// type of the condition, e.g. "Ready".
	Type string `json:"type"`
	// status the condition must have, e.g. "True".
	// +optional
	Status *string `json:"status,omitempty"`
	// reason the condition must have.
	// +optional
	Reason *string `json:"reason,omitempty"`
}

// CompositeControllerHooks are the hooks of a CompositeController.
type CompositeControllerHooks struct {
	// customize returns the related objects a parent's sync hook also sees.
	// +optional
	Customize *Hook `json:"customize,omitempty"`
	// sync computes a parent's status and desired children. Required.
	// +optional
	Sync *Hook `json:"sync,omitempty"`
	// finalize is called instead of sync while a parent is being deleted,
	// until it answers finalized: true.
	// +optional
	Finalize *Hook `json:"finalize,omitempty"`
	// preUpdateChild is accepted, stored and returned so that manifests
	// written for Metacontroller apply unchanged, but it is never called:
	// Metacontroller declares it without calling it either. Applying an
	// object that sets it draws a warning.
	// +optional
	PreUpdateChild *Hook `json:"preUpdateChild,omitempty"`
	// postUpdateChild is accepted, stored and returned so that manifests
	// written for Metacontroller apply unchanged, but it is never called:
	// Metacontroller declares it without calling it either. Applying an
	// object that sets it draws a warning.
	// +optional
	PostUpdateChild *Hook `json:"postUpdateChild,omitempty"`
	// patches run in order after the sync (or finalize) hook, as Cluster
	// API's ClusterClass patches: each is a patch hook or inline JSON
	// patches, each sees the desired children as the patches before it
	// left them, and what they leave is checked like a sync hook's answer.
	// A patch that fails fails the sync: nothing is applied. Not in
	// Metacontroller.
	// +optional
	Patches []PatchHook `json:"patches,omitempty"`
}

// PatchHook is one step of spec.hooks.patches: a patch hook called over
// HTTP (webhook) or inline JSON patches (definitions), exactly one of them.
type PatchHook struct {
	// name identifies the patch in errors, Events, metrics and previews;
	// unique within the controller. Letters, digits, '-', '_' and '.',
	// starting and ending with a letter or digit, at most 63 characters.
	Name string `json:"name"`
	// enabledIf is a CEL expression over the builtin variables
	// builtin.parent (apiVersion, kind, metadata.name, metadata.namespace,
	// metadata.labels, metadata.annotations, spec) and builtin.controller
	// (name, generation); the patch runs for a parent only when it is true,
	// e.g. `"team" in builtin.parent.metadata.labels`. Unset means always.
	// +optional
	EnabledIf *string `json:"enabledIf,omitempty"`
	// webhook calls a patch hook, as the other hooks are called (url or
	// service, timeout, TLS, authentication; no etag). It is sent the
	// variables and every desired child, and answers a JSON patch or a
	// JSON merge patch for each child it changes.
	// +optional
	Webhook *Webhook `json:"webhook,omitempty"`
	// definitions are inline JSON patches, as a ClusterClass's inline
	// patches: each applies its jsonPatches to the desired children its
	// selector matches.
	// +optional
	Definitions []PatchDefinition `json:"definitions,omitempty"`
}

// PatchDefinition applies JSON patches to the desired children a selector
// matches.
type PatchDefinition struct {
	// selector says which desired children are patched.
	Selector PatchSelector `json:"selector"`
	// jsonPatches are applied to each selected child in order, as one
	// RFC 6902 JSON patch.
	JSONPatches []JSONPatch `json:"jsonPatches"`
}

// PatchSelector matches desired children.
type PatchSelector struct {
	// apiVersion of the children, e.g. "apps/v1".
	APIVersion string `json:"apiVersion"`
	// kind of the children, e.g. "Deployment".
	Kind string `json:"kind"`
	// name, when set, matches only the child of that name.
	// +optional
	Name string `json:"name,omitempty"`
}

// JSONPatchOp is the operation of an inline JSON patch.
type JSONPatchOp string

const (
	// JSONPatchOpAdd adds a value, or replaces an object member (RFC 6902
	// "add"); the object holding it must exist.
	JSONPatchOpAdd JSONPatchOp = "add"
	// JSONPatchOpReplace replaces a value that must exist.
	JSONPatchOpReplace JSONPatchOp = "replace"
	// JSONPatchOpRemove removes a value that must exist.
	JSONPatchOpRemove JSONPatchOp = "remove"
)

// JSONPatch is one RFC 6902 operation of an inline patch.
type JSONPatch struct {
	// op is add, replace or remove.
	Op JSONPatchOp `json:"op"`
	// path is a JSON pointer (RFC 6901) into the child, e.g.
	// "/spec/replicas" or "/metadata/labels/tier"; "~1" stands for '/' and
	// "~0" for '~' in a key. It may not change apiVersion, kind,
	// metadata.name or metadata.namespace.
	Path string `json:"path"`
	// value is the value to add or replace, any JSON. Set value or
	// valueFrom for add and replace, neither for remove.
	// +optional
	Value *JSON `json:"value,omitempty"`
	// valueFrom computes the value from the variables.
	// +optional
	ValueFrom *JSONPatchValue `json:"valueFrom,omitempty"`
}

// JSONPatchValue computes the value of an inline JSON patch from the
// builtin variables: builtin.parent, builtin.controller and builtin.child
// (the patched child's apiVersion, kind, namespace and name). Exactly one
// of variable and template is set.
type JSONPatchValue struct {
	// variable is a dotted path into the variables, e.g.
	// "builtin.parent.spec.replicas" or
	// "builtin.parent.metadata.labels.app.kubernetes.io/name" (after labels
	// and annotations, the rest is one key). It must be set for the parent
	// at hand, or the patch fails.
	// +optional
	Variable *string `json:"variable,omitempty"`
	// template is a Go text/template over the variables, e.g.
	// "{{ .builtin.parent.metadata.name }}-{{ .builtin.child.name }}"; its
	// output is read as YAML (JSON included), so "3" is a number and
	// "[a, b]" a list. Quote it to get a string: '"{{ ... }}"'.
	// +optional
	Template *string `json:"template,omitempty"`
}

// JSON is any JSON value: an object, a list, a string, a number, a boolean.
type JSON struct {
	// Raw is the value's JSON encoding.
	Raw []byte `json:"-"`
}

// HookVersion is the version of the hook request/response contract.
type HookVersion string

const (
	// HookVersionV1 keys observed children by name.
	HookVersionV1 HookVersion = "v1"
	// HookVersionV2 keys observed children by namespace/name.
	HookVersionV2 HookVersion = "v2"
)

// Hook is where and how a hook is called.
type Hook struct {
	// version of the hook contract, v1 (the default) or v2.
	// +optional
	Version *HookVersion `json:"version,omitempty"`
	// webhook calls the hook over HTTP(S).
	// +optional
	Webhook *Webhook `json:"webhook,omitempty"`
}

// ResponseUnmarshallMode says how strictly a hook's JSON answer is decoded.
type ResponseUnmarshallMode string

const (
	// ResponseUnmarshallModeLoose ignores unknown fields.
	ResponseUnmarshallModeLoose ResponseUnmarshallMode = "loose"
	// ResponseUnmarshallModeStrict rejects unknown and duplicated fields.
	ResponseUnmarshallModeStrict ResponseUnmarshallMode = "strict"
)

// Webhook is an HTTP(S) hook: either a full url, or a service and a path.
type Webhook struct {
	// url is the absolute http(s) URL of the hook, called as given, query
	// included. Set url or service; when both are set url is used, as in
	// Metacontroller.
	// +optional
	URL *string `json:"url,omitempty"`
	// timeout of one call, a Go duration such as "10s". Unset, zero or
	// negative means 10s, as in Metacontroller. Longer timeouts are used as
	// given, but a slow hook holds one of the controller's workers for as
	// long as it takes, so over 30s draws a warning.
	// +optional
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// path appended to the service's address, starting with "/". Ignored
	// when url is set.
	// +optional
	Path *string `json:"path,omitempty"`
	// service through which the hook is reached in the target cluster.
	// +optional
	Service *ServiceReference `json:"service,omitempty"`
	// etag enables caching of hook answers by ETag (RFC 7232).
	// +optional
	Etag *WebhookEtagConfig `json:"etag,omitempty"`
	// responseUnMarshallMode is loose or strict; it defaults to loose for
	// v1 hooks and strict for v2 hooks.
	// +optional
	ResponseUnMarshallMode *ResponseUnmarshallMode `json:"responseUnMarshallMode,omitempty"`
	// caBundle verifies the hook's serving certificate. Exactly one source.
	// +optional
	CABundle *CABundleConfig `json:"caBundle,omitempty"`
	// clientTLS is the client certificate presented to the hook (mTLS).
	// +optional
	ClientTLS *ClientTLSConfig `json:"clientTLS,omitempty"`
	// authorization sends an Authorization header. Exclusive with basicAuth.
	// +optional
	Authorization *AuthorizationConfig `json:"authorization,omitempty"`
	// basicAuth sends HTTP basic credentials. Exclusive with authorization.
	// +optional
	BasicAuth *BasicAuthConfig `json:"basicAuth,omitempty"`
}

// ServiceReference is a Service in the target cluster that serves a hook.
type ServiceReference struct {
	// name of the Service.
	Name string `json:"name"`
	// namespace of the Service.
	Namespace string `json:"namespace"`
	// port of the Service, 80 by default.
	// +optional
	Port *int32 `json:"port,omitempty"`
	// protocol is http (the default) or https, in any letter case.
	// +optional
	Protocol *string `json:"protocol,omitempty"`
}

// WebhookEtagConfig configures ETag caching of hook answers.
type WebhookEtagConfig struct {
	// enabled turns ETag caching on.
	// +optional
	Enabled *bool `json:"enabled,omitempty"`
	// cacheTimeoutSeconds is how long a cached answer is kept; unset, 0 or
	// negative means forever, as in Metacontroller.
	// +optional
	CacheTimeoutSeconds *int32 `json:"cacheTimeoutSeconds,omitempty"`
	// cacheCleanupSeconds is how often expired answers are dropped; unset,
	// 0 or negative means they are only ever replaced.
	// +optional
	CacheCleanupSeconds *int32 `json:"cacheCleanupSeconds,omitempty"`
}

// CABundleConfig is where the CA certificates that verify a hook come from.
// Exactly one of inline, secretRef and configMapRef is set.
type CABundleConfig struct {
	// inline PEM-encoded CA certificates.
	// +optional
	Inline *string `json:"inline,omitempty"`
	// secretRef is a key of a Secret holding PEM CA certificates.
	// +optional
	SecretRef *KeyReference `json:"secretRef,omitempty"`
	// configMapRef is a key of a ConfigMap holding PEM CA certificates.
	// +optional
	ConfigMapRef *KeyReference `json:"configMapRef,omitempty"`
}

// KeyReference is one key of a namespaced Secret or ConfigMap.
type KeyReference struct {
	// name of the object.
	Name string `json:"name"`
	// namespace of the object.
	Namespace string `json:"namespace"`
	// key in the object's data.
	// +optional
	Key string `json:"key,omitempty"`
}

// SecretReference names a namespaced Secret.
type SecretReference struct {
	// name of the Secret.
	Name string `json:"name"`
	// namespace of the Secret.
	Namespace string `json:"namespace"`
}

// ClientTLSConfig is a client certificate and key held in a Secret.
type ClientTLSConfig struct {
	// secretRef is the Secret holding the certificate and key.
	SecretRef SecretReference `json:"secretRef"`
	// certKey is the key of the PEM certificate, "tls.crt" by default.
	// +optional
	CertKey string `json:"certKey,omitempty"`
	// privateKeyKey is the key of the PEM private key, "tls.key" by default.
	// +optional
	PrivateKeyKey string `json:"privateKeyKey,omitempty"`
}

// AuthorizationConfig sends "Authorization: <type> <credential>".
type AuthorizationConfig struct {
	// type is the scheme, "Bearer" by default. Not "Basic": use basicAuth.
	// +optional
	Type string `json:"type,omitempty"`
	// secretRef is the Secret key holding the credential.
	SecretRef KeyReference `json:"secretRef"`
}

// BasicAuthConfig sends HTTP basic credentials held in a Secret.
type BasicAuthConfig struct {
	// secretRef is the Secret holding the username and password.
	SecretRef SecretReference `json:"secretRef"`
	// usernameKey is the key of the username, "username" by default.
	// +optional
	UsernameKey string `json:"usernameKey,omitempty"`
	// passwordKey is the key of the password, "password" by default.
	// +optional
	PasswordKey string `json:"passwordKey,omitempty"`
}

// EndpointConfig holds connection settings for every hook on one host.
type EndpointConfig struct {
	// host, optionally with a port, e.g. "my-hook.my-ns:8443". Matched
	// case-insensitively.
	Host string `json:"host"`
	// caBundle verifies the host's serving certificate.
	// +optional
	CABundle *CABundleConfig `json:"caBundle,omitempty"`
	// clientTLS is presented to the host (mTLS).
	// +optional
	ClientTLS *ClientTLSConfig `json:"clientTLS,omitempty"`
	// authorization sends an Authorization header. Exclusive with basicAuth.
	// +optional
	Authorization *AuthorizationConfig `json:"authorization,omitempty"`
	// basicAuth sends HTTP basic credentials. Exclusive with authorization.
	// +optional
	BasicAuth *BasicAuthConfig `json:"basicAuth,omitempty"`
}

// Condition types of a CompositeController.
const (
	// ConditionReady is True while the controller's informers are synced
	// and its loop runs.
	ConditionReady = "Ready"
	// ConditionHookReachable is True when the last hook call succeeded.
	ConditionHookReachable = "HookReachable"
)

// CompositeControllerStatus is what the embedded controller last observed.
type CompositeControllerStatus struct {
	// observedGeneration is the generation of the spec the loop runs.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready, HookReachable.
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// parents is the number of parents the controller handles.
	// +optional
	Parents int32 `json:"parents,omitempty"`
	// children is the number of children the controller owns.
	// +optional
	Children int32 `json:"children,omitempty"`
	// rollingParents is the number of parents whose rolling update is
	// under way: some child still follows an older revision.
	// +optional
	RollingParents int32 `json:"rollingParents,omitempty"`
	// pausedParents is the number of parents the loop does not sync
	// because they are annotated composite.metacontroller.k8s.io/paused.
	// +optional
	PausedParents int32 `json:"pausedParents,omitempty"`
	// lastSyncTime is when a parent was last synced.
	// +optional
	LastSyncTime *metav1.Time `json:"lastSyncTime,omitempty"`
	// lastSyncError is the latest error among the parents whose last sync
	// failed, empty once each of them has synced.
	// +optional
	LastSyncError string `json:"lastSyncError,omitempty"`
	// author is who last wrote the controller's spec, recorded by the
	// server and never taken from the client, as kube-apiserver records the
	// requester of a CertificateSigningRequest. Without an identity
	// (spec.serviceAccount), the server checks this user's rights before
	// the objects it reads reach a hook.
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
	History []CompositeControllerRevision `json:"history,omitempty"`
	// rollout is where the rollout of the update revision is, when the
	// spec has a rollout.
	// +optional
	Rollout *RolloutStatus `json:"rollout,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// CompositeControllerList is a list of CompositeControllers.
type CompositeControllerList struct {
	metav1.TypeMeta `json:",inline"`
	// Standard list metadata.
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the CompositeControllers.
	Items []CompositeController `json:"items"`
}

// ServiceAccountReference names a ServiceAccount.
type ServiceAccountReference struct {
	// namespace is the ServiceAccount's namespace.
	Namespace string `json:"namespace"`
	// name is the ServiceAccount's name.
	Name string `json:"name"`
}

// ControllerAuthor is the user who wrote a controller's spec, as the
// authenticator of that request said.
type ControllerAuthor struct {
	// username is the user's name.
	// +optional
	Username string `json:"username,omitempty"`
	// uid is the user's uid.
	// +optional
	UID string `json:"uid,omitempty"`
	// groups are the user's groups.
	// +optional
	// +listType=atomic
	Groups []string `json:"groups,omitempty"`
	// extra is the authenticator's extra information about the user.
	// +optional
	Extra map[string]ExtraValue `json:"extra,omitempty"`
}

// ExtraValue is one extra attribute of a user: a list of strings, as in
// authentication.k8s.io.
type ExtraValue []string

// OwnChildWritesPolicy says whether the loop calls the sync hook again
// once it observes the children a sync wrote.
// +enum
type OwnChildWritesPolicy string

const (
	// OwnChildWritesSync calls the sync hook again once every child a
	// sync wrote is observed as written: the hook sees them.
	OwnChildWritesSync OwnChildWritesPolicy = "Sync"
	// OwnChildWritesIgnore does not: the hook's answer does not depend on
	// the children it observes.
	OwnChildWritesIgnore OwnChildWritesPolicy = "Ignore"
)

// OwnStatusWritesPolicy says whether the loop calls the sync hook again
// once it observes its own write of the hook's answer to the parent.
// +enum
type OwnStatusWritesPolicy string

const (
	// OwnStatusWritesSync calls the sync hook again once the loop's write
	// of its answer to the parent is observed: the hook sees its status.
	OwnStatusWritesSync OwnStatusWritesPolicy = "Sync"
	// OwnStatusWritesIgnore does not: the hook does not read the status it
	// returns.
	OwnStatusWritesIgnore OwnStatusWritesPolicy = "Ignore"
)
