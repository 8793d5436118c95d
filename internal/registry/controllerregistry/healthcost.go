package controllerregistry

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/apiserver/pkg/warning"
	openapispec "k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller"
	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/validation"
)

// ParentSchemas finds the OpenAPI schemas of a controller's parent
// resources in the target cluster, as ValidatingAdmissionPolicy's type
// checking finds a matched resource's: the resource's kind through
// discovery, the kind's schema in /openapi/v3
// (resolver.ClientDiscoveryResolver over the cluster's cached discovery,
// which each refresh of discovery reads again).
type ParentSchemas struct {
	Kinds   KindMapper
	Schemas resolver.SchemaResolver
}

// KindMapper maps a resource to its kind (meta.RESTMapper's KindFor).
type KindMapper interface {
	KindFor(resource schema.GroupVersionResource) (schema.GroupVersionKind, error)
}

// schemaTimeout bounds the schema look-ups of one write, as
// rightsCheckTimeout bounds its access reviews: a slow target cluster
// must not hold the user's request, only leave the condition unchecked
// with a warning.
const schemaTimeout = 3 * time.Second

// resolve finds the schema of each of rules, or why it has none.
func (p *ParentSchemas) resolve(ctx context.Context, rules []metacontroller.ResourceRule) []validation.ParentSchema {
	ctx, cancel := context.WithTimeout(ctx, schemaTimeout)
	defer cancel()
	type answer struct {
		schema *openapispec.Schema
		err    error
	}
	out := make([]validation.ParentSchema, len(rules))
	for i, r := range rules {
		out[i].Resource = r.APIVersion + " " + r.Resource
		if ctx.Err() != nil {
			out[i].Missing = fmt.Errorf("the target cluster did not answer within %s", schemaTimeout)
			continue
		}
		// The resolver takes no context: a look-up that outlives the
		// write ends on its own, its answer dropped.
		answered := make(chan answer, 1)
		go func() {
			s, err := p.schema(r)
			answered <- answer{s, err}
		}()
		select {
		case a := <-answered:
			out[i].Schema, out[i].Missing = a.schema, a.err
		case <-ctx.Done():
			out[i].Missing = fmt.Errorf("the target cluster did not answer within %s", schemaTimeout)
		}
	}
	return out
}

func (p *ParentSchemas) schema(r metacontroller.ResourceRule) (*openapispec.Schema, error) {
	gv, err := schema.ParseGroupVersion(r.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("can't parse apiVersion %q: %w", r.APIVersion, err)
	}
	gvk, err := p.Kinds.KindFor(gv.WithResource(r.Resource))
	if err != nil {
		return nil, fmt.Errorf("can't find its kind in discovery: %w", err)
	}
	s, err := p.Schemas.ResolveSchema(gvk)
	if errors.Is(err, resolver.ErrSchemaNotFound) {
		return nil, fmt.Errorf("the target cluster serves no OpenAPI schema of %s yet", gvk.Kind)
	}
	if err != nil {
		return nil, fmt.Errorf("can't read the OpenAPI schema of %s: %w", gvk.Kind, err)
	}
	return s, nil
}

// HealthCost checks, on a create (old nil) or on an update that changes
// the health condition or the parent resources, the condition against the
// schemas of the parent resources (validation.ValidateHealthCost). A
// stored condition is not checked again, as Kubernetes does not estimate
// a stored CEL rule again, so that a schema changed since does not block
// an unrelated edit.
func (k Kind) HealthCost(schemas *ParentSchemas, exprs validation.Expressions) HealthCheck {
	return func(ctx context.Context, obj, old runtime.Object) field.ErrorList {
		r, parents := k.Rollout(obj), k.Parents(obj)
		if r == nil || r.Health == nil || r.Health.Condition == nil {
			return nil
		}
		if old != nil && apiequality.Semantic.DeepEqual(parents, k.Parents(old)) {
			if o := k.Rollout(old); o != nil && o.Health != nil && o.Health.Condition != nil && *o.Health.Condition == *r.Health.Condition {
				return nil
			}
		}
		errs, warnings := validation.ValidateHealthCost(r, schemas.resolve(ctx, parents), exprs)
		for _, w := range warnings {
			warning.AddWarning(ctx, "", w)
		}
		return errs
	}
}

// HealthCheck checks a controller's health condition, replacing old's (nil
// on a create), against its parents' schemas in a strategy's validation:
// it answers the refusals, and adds its warnings to the request's, so
// that a write asks the target cluster once, not again for the warnings.
// A nil HealthCheck (no target cluster, where no condition is evaluated)
// checks nothing.
type HealthCheck func(ctx context.Context, obj, old runtime.Object) field.ErrorList

// Validate is the check, or nothing for a nil HealthCheck.
func (h HealthCheck) Validate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	if h == nil {
		return nil
	}
	return h(ctx, obj, old)
}
