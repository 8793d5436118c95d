package hookapi

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// SyncHookRequest is what the sync and finalize hooks receive, Metacontroller's
// CompositeController request for hook versions v1 and v2. The versions differ
// only in how Children and Related are keyed (see RelativeObjectMap).
type SyncHookRequest struct {
	// Controller is the CompositeController the parent belongs to.
	Controller *v1alpha1.CompositeController `json:"controller"`
	// Parent is the parent object as last observed.
	Parent *unstructured.Unstructured `json:"parent"`
	// Children are the observed children the parent owns.
	Children RelativeObjectMap `json:"children"`
	// Related are the objects the customize hook asked for.
	Related RelativeObjectMap `json:"related"`
	// Finalizing is true when the finalize hook is called because the parent
	// is being deleted.
	Finalizing bool `json:"finalizing"`
	// Encodings, when set, are where the request's encoding takes the
	// observed children's JSON from and keeps it for the parent's next
	// sync (EncodingCache); not sent. The loop sets them.
	Encodings *Encodings `json:"-"`
}

// SyncHookResponse is what the sync and finalize hooks answer.
type SyncHookResponse struct {
	// Status replaces the parent's status. It must be a JSON object or null.
	Status map[string]interface{} `json:"status"`
	// Children are all desired children; an observed child that is missing
	// here is deleted, so an empty list deletes every child.
	Children []*unstructured.Unstructured `json:"children"`
	// ResyncAfterSeconds asks for another sync of this parent after that
	// many seconds, even if nothing changes. Zero means no extra sync.
	ResyncAfterSeconds float64 `json:"resyncAfterSeconds"`
	// Finalized is only read from the finalize hook: true lets the parent
	// be deleted.
	Finalized bool `json:"finalized"`
}

// CustomizeHookRequest is what the customize hook receives.
type CustomizeHookRequest struct {
	// Controller is the CompositeController the parent belongs to.
	Controller *v1alpha1.CompositeController `json:"controller"`
	// Decorator is, for a DecoratorController's customize hook, the
	// controller sent instead of Controller.
	Decorator *v1alpha1.DecoratorController `json:"-"`
	// Parent is the parent object as last observed.
	Parent *unstructured.Unstructured `json:"parent"`
}

// CustomizeHookResponse is what the customize hook answers.
type CustomizeHookResponse struct {
	// RelatedResourceRules select the objects sent as Related to the sync
	// hook. Omitted when empty, as Metacontroller does.
	RelatedResourceRules []*RelatedResourceRule `json:"relatedResources,omitempty"`
}

// RelatedResourceRule selects related objects of one resource by label
// selector, namespace and names. Its JSON is Metacontroller's: labelSelector
// and names are always present, namespace only when set.
type RelatedResourceRule struct {
	// APIVersion is the group/version of the resource, e.g. "apps/v1".
	APIVersion string `json:"apiVersion"`
	// Resource is the plural resource name, e.g. "configmaps".
	Resource string `json:"resource"`
	// LabelSelector selects objects by label; nil selects by names alone.
	LabelSelector *metav1.LabelSelector `json:"labelSelector"`
	// NamespaceSelector selects the namespaces whose objects are related;
	// it may not be combined with namespace or names.
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// Namespace restricts the objects to one namespace.
	Namespace string `json:"namespace,omitempty"`
	// Names restricts the objects to these names.
	Names []string `json:"names"`
}

// SyncHook computes a parent's status and desired children. It serves both
// the sync and the finalize hook; they differ only in req.Finalizing.
type SyncHook interface {
	Sync(ctx context.Context, req *SyncHookRequest) (*SyncHookResponse, error)
}

// CustomizeHook says which related objects a parent's sync hook sees.
type CustomizeHook interface {
	Customize(ctx context.Context, req *CustomizeHookRequest) (*CustomizeHookResponse, error)
}

// SyncHookFunc is an in-process SyncHook.
type SyncHookFunc func(ctx context.Context, req *SyncHookRequest) (*SyncHookResponse, error)

// Sync calls f.
func (f SyncHookFunc) Sync(ctx context.Context, req *SyncHookRequest) (*SyncHookResponse, error) {
	return f(ctx, req)
}

// CustomizeHookFunc is an in-process CustomizeHook.
type CustomizeHookFunc func(ctx context.Context, req *CustomizeHookRequest) (*CustomizeHookResponse, error)

// Customize calls f.
func (f CustomizeHookFunc) Customize(ctx context.Context, req *CustomizeHookRequest) (*CustomizeHookResponse, error) {
	return f(ctx, req)
}

var (
	_ SyncHook      = SyncHookFunc(nil)
	_ CustomizeHook = CustomizeHookFunc(nil)
)
