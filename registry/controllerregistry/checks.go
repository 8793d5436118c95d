package controllerregistry

import (
	"context"
	"fmt"
	"time"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/pkg/hooks"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
)

// Versioned converts an internal object into its v1alpha1 form V, which
// the rights checks and the compiled definition read.
func Versioned[V any](scheme *runtime.Scheme, internal runtime.Object) (*V, error) {
	out := new(V)
	if err := scheme.Convert(internal, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// AuthorCheck refuses, with a Forbidden error, a controller (its v1alpha1
// form V) whose loop would do what the requesting user may not.
type AuthorCheck[V any] func(ctx context.Context, controller *V) error

// CheckAuthorOnCreate runs check on every create.
func CheckAuthorOnCreate[V any](scheme *runtime.Scheme, check AuthorCheck[V]) genericregistry.BeginCreateFunc {
	return func(ctx context.Context, obj runtime.Object, options *metav1.CreateOptions) (genericregistry.FinishFunc, error) {
		if err := checkAuthor(ctx, scheme, check, obj); err != nil {
			return nil, err
		}
		return func(context.Context, bool) {}, nil
	}
}

// CheckAuthorOnSpecUpdate runs check on an update that changes the spec
// (specChanged): metadata-only updates (labels, finalizers) give the loop
// nothing new to do.
func CheckAuthorOnSpecUpdate[V any](scheme *runtime.Scheme, check AuthorCheck[V], specChanged func(obj, old runtime.Object) bool) genericregistry.BeginUpdateFunc {
	return func(ctx context.Context, obj, old runtime.Object, options *metav1.UpdateOptions) (genericregistry.FinishFunc, error) {
		if specChanged(obj, old) {
			if err := checkAuthor(ctx, scheme, check, obj); err != nil {
				return nil, err
			}
		}
		return func(context.Context, bool) {}, nil
	}
}

// MayAuthor tells whether the request's user passes check for obj: whether
// a write of theirs that leaves the spec as it is may make them the author
// of a controller whose author is not known.
func MayAuthor[V any](scheme *runtime.Scheme, check AuthorCheck[V]) func(ctx context.Context, obj runtime.Object) bool {
	return func(ctx context.Context, obj runtime.Object) bool {
		return checkAuthor(ctx, scheme, check, obj) == nil
	}
}

func checkAuthor[V any](ctx context.Context, scheme *runtime.Scheme, check AuthorCheck[V], obj runtime.Object) error {
	versioned, err := Versioned[V](scheme, obj)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	return check(ctx, versioned)
}

// MissingRights says which rights a controller (V) needs that the server
// lacks in the target cluster, in one sentence with the fix; "" when none.
type MissingRights[V any] func(ctx context.Context, controller *V) (string, error)

// rightsCheckTimeout bounds the access reviews of one apply: a slow target
// cluster must not hold the user's request, only lose its warning.
const rightsCheckTimeout = 3 * time.Second

// RightsWarnings makes the apply-time warning of the rights the server
// lacks to run a controller.
func RightsWarnings[V any](scheme *runtime.Scheme, missing MissingRights[V]) func(context.Context, runtime.Object) []string {
	return func(ctx context.Context, obj runtime.Object) []string {
		versioned, err := Versioned[V](scheme, obj)
		if err != nil {
			return nil
		}
		ctx, cancel := context.WithTimeout(ctx, rightsCheckTimeout)
		defer cancel()
		msg, err := missing(ctx, versioned)
		switch {
		case err != nil:
			return []string{fmt.Sprintf("can't check this server's rights for the controller: %v", err)}
		case msg != "":
			return []string{msg}
		}
		return nil
	}
}

// NamedHook is a hook with the name of its field under spec.hooks.
type NamedHook struct {
	Name string
	Hook *metacontroller.Hook
}

// ValidateHookDestinations refuses hook URLs whose host is an address in a
// range the server does not call hooks at (--hook-denied-cidrs). A host
// name is checked when the hook is called, address by address.
func ValidateHookDestinations(dest hooks.Destinations, hooksPath *field.Path, named []NamedHook) field.ErrorList {
	var errs field.ErrorList
	for _, h := range named {
		if h.Hook == nil || h.Hook.Webhook == nil || h.Hook.Webhook.URL == nil {
			continue
		}
		if err := dest.CheckURL(*h.Hook.Webhook.URL); err != nil {
			errs = append(errs, field.Forbidden(hooksPath.Child(h.Name, "webhook", "url"), err.Error()))
		}
	}
	return errs
}
