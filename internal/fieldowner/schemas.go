package fieldowner

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi3"
)

// retryAfter is how long a failure to get a schema is remembered, so that
// an unreachable /openapi/v3 costs one request per GroupVersion a minute
// rather than one per comparison.
const retryAfter = time.Minute

// deduced serves objects without a schema: maps are compared field by
// field, lists whole. It is stateless.
var deduced = managedfields.NewDeducedTypeConverter()

// Schemas hands out the type converters of the target cluster's kinds, one
// per GroupVersion, built from its OpenAPI v3 document as kube-apiserver
// builds them for CRDs, and cached. It is safe for concurrent use: callers
// wanting the same GroupVersion wait for one build, others don't wait.
type Schemas struct {
	root openapi3.Root // nil: no cluster, every kind is deduced

	mu   sync.Mutex
	byGV map[schema.GroupVersion]*converter
}

// converter is one GroupVersion's converter, built once; ready is closed
// when tc and err are set.
type converter struct {
	ready   chan struct{}
	tc      managedfields.TypeConverter
	err     error
	expires time.Time // zero: until Reset
}

// NewSchemas returns the schemas served by client, normally the target
// cluster's discovery.OpenAPIV3(). With a nil client (standalone, no
// cluster) every kind gets the deduced converter, without error.
func NewSchemas(client openapi.Client) *Schemas {
	s := &Schemas{byGV: map[schema.GroupVersion]*converter{}}
	if client != nil {
		s.root = openapi3.NewRoot(client)
	}
	return s
}

// Reset forgets every converter, to be called when discovery changed (a
// CRD was added or its schema updated): the next use of a GroupVersion
// fetches its schema again.
func (s *Schemas) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.byGV = map[schema.GroupVersion]*converter{}
}

// TypeConverter returns the converter of gv's kinds. It never returns nil:
// when gv's schema can't be had (no such GroupVersion in /openapi/v3, a
// fetch or parse failure) it returns the deduced converter with an error
// that says why, for the caller to log and go on with it. A missing
// GroupVersion is remembered until Reset, a failure for a minute.
func (s *Schemas) TypeConverter(gv schema.GroupVersion) (managedfields.TypeConverter, error) {
	if s == nil || s.root == nil {
		return deduced, nil
	}
	s.mu.Lock()
	c, ok := s.byGV[gv]
	if ok && !c.expires.IsZero() && time.Now().After(c.expires) {
		ok = false
	}
	if !ok {
		c = &converter{ready: make(chan struct{})}
		s.byGV[gv] = c
		s.mu.Unlock()
		c.tc, c.err = s.build(gv)
		if c.err != nil {
			var notFound *openapi3.GroupVersionNotFoundError
			if !errors.As(c.err, &notFound) {
				c.expires = time.Now().Add(retryAfter)
			}
			c.tc = deduced
		}
		close(c.ready)
	} else {
		s.mu.Unlock()
		<-c.ready
	}
	return c.tc, c.err
}

func (s *Schemas) build(gv schema.GroupVersion) (managedfields.TypeConverter, error) {
	spec, err := s.root.GVSpec(gv)
	if err != nil {
		return nil, fmt.Errorf("can't get the OpenAPI v3 schema of %s, comparing its objects without: %w", gv, err)
	}
	if spec.Components == nil || len(spec.Components.Schemas) == 0 {
		return nil, fmt.Errorf("can't use the OpenAPI v3 schema of %s, comparing its objects without: no schemas", gv)
	}
	// preserveUnknownFields false, as for every CRD that is not
	// apiextensions/v1beta1's: unknown fields are errors, as they are
	// when applied. x-kubernetes-preserve-unknown-fields in the schema
	// still keeps them where a CRD asks for it.
	tc, err := managedfields.NewTypeConverter(spec.Components.Schemas, false)
	if err != nil {
		return nil, fmt.Errorf("can't use the OpenAPI v3 schema of %s, comparing its objects without: %w", gv, err)
	}
	return tc, nil
}

// Compare is Compare with the converter of desired's GroupVersion. It
// falls back to the deduced converter when there is no schema or the
// objects don't fit it, and then says why in Result.Fallback.
func (s *Schemas) Compare(observed, desired *unstructured.Unstructured, manager string) (Result, error) {
	if desired == nil {
		return Result{}, errors.New("can't compare: no desired object")
	}
	return s.withConverter(desired.GroupVersionKind().GroupVersion(), func(tc managedfields.TypeConverter) (Result, error) {
		return Compare(tc, observed, desired, manager)
	})
}

// withConverter runs compare with the converter of gv, or with the deduced
// one when there is no schema or the objects don't fit it, saying why in
// Result.Fallback.
func (s *Schemas) withConverter(gv schema.GroupVersion, compare func(managedfields.TypeConverter) (Result, error)) (Result, error) {
	tc, why := s.TypeConverter(gv)
	if why == nil {
		r, err := compare(tc)
		if !errors.Is(err, ErrSchema) || tc == deduced {
			return r, err
		}
		why = err
	}
	r, err := compare(deduced)
	r.Fallback = why.Error()
	return r, err
}

// TakeoverPatch is TakeoverPatch with the converter of observed's
// GroupVersion, falling back to the deduced converter as Compare does.
func (s *Schemas) TakeoverPatch(observed *unstructured.Unstructured, manager string) ([]byte, bool, error) {
	tc, _ := s.TypeConverter(observed.GroupVersionKind().GroupVersion())
	patch, needed, err := TakeoverPatch(tc, observed, manager)
	if errors.Is(err, ErrSchema) && tc != deduced {
		return TakeoverPatch(deduced, observed, manager)
	}
	return patch, needed, err
}
