package hookapi

import (
	"context"
	"encoding/json"
	"net/http"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// DecoratorHookRequest is what a DecoratorController's sync and finalize
// hooks receive, Metacontroller's request for hook versions v1 and v2, which
// differ only in how Attachments and Related are keyed (RelativeObjectMap).
type DecoratorHookRequest struct {
	// Controller is the DecoratorController.
	Controller *v1alpha1.DecoratorController `json:"controller"`
	// Object is the decorated object as last observed.
	Object *unstructured.Unstructured `json:"object"`
	// Attachments are the observed attachments the object owns.
	Attachments RelativeObjectMap `json:"attachments"`
	// Related are the objects the customize hook asked for.
	Related RelativeObjectMap `json:"related"`
	// Finalizing is true when the finalize hook is called.
	Finalizing bool `json:"finalizing"`
}

// DecoratorHookResponse is what a DecoratorController's sync and finalize
// hooks answer.
type DecoratorHookResponse struct {
	// Labels are set on the object; a null value removes the label.
	Labels map[string]*string `json:"labels"`
	// Annotations are set on the object; a null value removes the
	// annotation.
	Annotations map[string]*string `json:"annotations"`
	// Status replaces the object's status; null leaves it as it is.
	Status map[string]interface{} `json:"status"`
	// Attachments are all desired attachments; an observed attachment
	// missing here is deleted.
	Attachments []*unstructured.Unstructured `json:"attachments"`
	// ResyncAfterSeconds asks for another sync of this object after that
	// many seconds. Zero means no extra sync.
	ResyncAfterSeconds float64 `json:"resyncAfterSeconds"`
	// Finalized is only read from the finalize hook: true lets the object
	// be deleted.
	Finalized bool `json:"finalized"`
}

// DecoratorHook computes an object's decoration; it serves the sync and the
// finalize hook, which differ only in req.Finalizing.
type DecoratorHook interface {
	Decorate(ctx context.Context, req *DecoratorHookRequest) (*DecoratorHookResponse, error)
}

// DecoratorHookFunc is an in-process DecoratorHook.
type DecoratorHookFunc func(ctx context.Context, req *DecoratorHookRequest) (*DecoratorHookResponse, error)

// Decorate calls f.
func (f DecoratorHookFunc) Decorate(ctx context.Context, req *DecoratorHookRequest) (*DecoratorHookResponse, error) {
	return f(ctx, req)
}

// DecoratorHandler serves a DecoratorHook over HTTP.
func DecoratorHandler(hook DecoratorHook) http.Handler {
	return handler("decorator", hook.Decorate)
}

// MarshalJSON sends a DecoratorController's customize request with the
// DecoratorController as its controller, as Metacontroller does.
func (r CustomizeHookRequest) MarshalJSON() ([]byte, error) {
	type plain CustomizeHookRequest
	if r.Decorator == nil {
		return json.Marshal(plain(r))
	}
	return json.Marshal(struct {
		Controller *v1alpha1.DecoratorController `json:"controller"`
		Parent     *unstructured.Unstructured    `json:"parent"`
	}{r.Decorator, r.Parent})
}
