package controllerregistry

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
)

// checkAuthorOnCreate checks the author of every create.
func (k Kind) checkAuthorOnCreate(authors AuthorChecker) genericregistry.BeginCreateFunc {
	return func(ctx context.Context, obj runtime.Object, options *metav1.CreateOptions) (genericregistry.FinishFunc, error) {
		if err := k.checkAuthor(ctx, authors, obj); err != nil {
			return nil, err
		}
		return func(context.Context, bool) {}, nil
	}
}

// checkAuthorOnSpecUpdate checks the author of an update that changes the
// spec, a change of spec.rollout alone too: its steps, health condition
// (CEL evaluated over every parent, its outcome published), onFailure and
// errorBudget decide which revision runs on which parent, and removing it
// lands the revision on every parent at once, so they need the rights
// writing the spec needs, though the author stays. Metadata-only updates
// (labels, finalizers, the resume annotation) and a change of
// spec.rollout.paused alone give the loop nothing new to run: kubectl
// composite rollout pause and resume need only patch.
func (k Kind) checkAuthorOnSpecUpdate(authors AuthorChecker) genericregistry.BeginUpdateFunc {
	return func(ctx context.Context, obj, old runtime.Object, options *metav1.UpdateOptions) (genericregistry.FinishFunc, error) {
		if k.SpecChanged(obj, old) && !k.pausedOnly(obj, old) {
			if err := k.checkAuthor(ctx, authors, obj); err != nil {
				return nil, err
			}
		}
		return func(context.Context, bool) {}, nil
	}
}

// pausedOnly tells whether an update changes spec.rollout.paused and
// nothing else of the spec.
func (k Kind) pausedOnly(obj, old runtime.Object) bool {
	r, stored := k.Rollout(obj), k.Rollout(old)
	if r == nil || stored == nil || r.Paused == stored.Paused {
		return false
	}
	unpaused := obj.DeepCopyObject()
	k.Rollout(unpaused).Paused = stored.Paused
	return !k.SpecChanged(unpaused, old)
}

// MayAuthor tells whether the request's user passes the author checks for
// obj: whether a write of theirs that leaves the spec as it is may make
// them the author of a controller whose author is not known.
func (k Kind) MayAuthor(authors AuthorChecker) func(ctx context.Context, obj runtime.Object) bool {
	return func(ctx context.Context, obj runtime.Object) bool {
		return k.checkAuthor(ctx, authors, obj) == nil
	}
}

func (k Kind) checkAuthor(ctx context.Context, authors AuthorChecker, obj runtime.Object) error {
	versioned, err := k.Versioned(obj)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	return authors.CheckAuthor(ctx, versioned)
}

// rightsCheckTimeout bounds the access reviews of one apply: a slow target
// cluster must not hold the user's request, only lose its warning.
const rightsCheckTimeout = 3 * time.Second

// RightsWarnings makes the apply-time warning of the rights the server
// lacks to run a controller.
func (k Kind) RightsWarnings(rights RightsChecker) func(context.Context, runtime.Object) []string {
	return func(ctx context.Context, obj runtime.Object) []string {
		versioned, err := k.Versioned(obj)
		if err != nil {
			return nil
		}
		ctx, cancel := context.WithTimeout(ctx, rightsCheckTimeout)
		defer cancel()
		msg, err := rights.MissingRights(ctx, versioned)
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
