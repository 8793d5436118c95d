package reconcile

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/composite-apiserver/composite-apiserver/internal/apply"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
)

// writeParent writes what the hook answered for the parent: a
// CompositeController's status, with the generation it answered for; a
// DecoratorController's labels, annotations and status, as they are
// (Metacontroller adds nothing to a decorated object's status, which a
// built-in controller may own in part).
// It returns the parent as each of its writes stored it.
func (c *Controller) writeParent(ctx context.Context, env Env, parent *unstructured.Unstructured, plan *engine.Plan) ([]*unstructured.Unstructured, error) {
	if plan.Decoration == nil {
		stored, err := apply.ParentStatus(ctx, env.Client, c.Def.Parent.GVR, parent, plan.Response.Status)
		if stored == nil {
			return nil, err
		}
		return []*unstructured.Unstructured{stored}, err
	}
	return apply.Decorate(ctx, env.Client, c.Def.Parent.GVR, parent, apply.Decoration{
		Labels:            plan.Decoration.Labels,
		Annotations:       plan.Decoration.Annotations,
		Status:            plan.Response.Status,
		StatusSubresource: !c.ParentWithoutStatus,
	})
}
