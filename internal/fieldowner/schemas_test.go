package fieldowner

import (
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi/openapitest"
	"k8s.io/client-go/openapi3"
)

// countingClient counts the fetches of the /openapi/v3 index, one per
// converter build.
type countingClient struct {
	openapi.Client
	paths atomic.Int32
	fail  error
}

func (c *countingClient) Paths() (map[string]openapi.GroupVersion, error) {
	c.paths.Add(1)
	if c.fail != nil {
		return nil, c.fail
	}
	return c.Client.Paths()
}

var (
	core   = schema.GroupVersion{Version: "v1"}
	custom = schema.GroupVersion{Group: "example.com", Version: "v1"}
)

func TestSchemasWithoutCluster(t *testing.T) {
	s := NewSchemas(nil)
	tc, err := s.TypeConverter(core)
	if err != nil || tc != deduced {
		t.Errorf("got %T, %v; want the deduced converter", tc, err)
	}
	r, err := s.Compare(nil, widget(t), ours)
	if err != nil || !r.Changed || r.Fallback != "" {
		t.Errorf("got %+v, %v; want a change, no fallback", r, err)
	}
}

func TestSchemasCachePerGroupVersion(t *testing.T) {
	c := &countingClient{Client: openapitest.NewEmbeddedFileClient()}
	s := NewSchemas(c)

	var wg sync.WaitGroup
	tcs := make([]managedfields.TypeConverter, 8)
	for i := range tcs {
		wg.Go(func() {
			var err error
			if tcs[i], err = s.TypeConverter(core); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for _, tc := range tcs {
		if tc != tcs[0] || tc == deduced {
			t.Fatalf("converters %v, want one, from the schema", tcs)
		}
	}
	if n := c.paths.Load(); n != 1 {
		t.Errorf("%d fetches for concurrent uses, want 1", n)
	}

	// A GroupVersion the cluster does not serve: deduced, remembered.
	for range 2 {
		tc, err := s.TypeConverter(custom)
		var notFound *openapi3.GroupVersionNotFoundError
		if tc != deduced || !errors.As(err, &notFound) {
			t.Errorf("got %T, %v; want the deduced converter and GroupVersionNotFoundError", tc, err)
		}
	}
	if n := c.paths.Load(); n != 2 {
		t.Errorf("%d fetches, want 2", n)
	}

	s.Reset()
	if _, err := s.TypeConverter(core); err != nil {
		t.Fatal(err)
	}
	if n := c.paths.Load(); n != 3 {
		t.Errorf("%d fetches after Reset, want 3", n)
	}
}

func TestSchemasFailureRemembered(t *testing.T) {
	c := &countingClient{Client: openapitest.NewEmbeddedFileClient(), fail: errors.New("connection refused")}
	s := NewSchemas(c)
	for range 3 {
		tc, err := s.TypeConverter(core)
		if tc != deduced || err == nil || !strings.Contains(err.Error(), "connection refused") {
			t.Errorf("got %T, %v; want the deduced converter and the failure", tc, err)
		}
	}
	if n := c.paths.Load(); n != 1 {
		t.Errorf("%d fetches, want 1 a minute", n)
	}
	s.mu.Lock()
	s.byGV[core].expires = time.Now().Add(-time.Second)
	s.mu.Unlock()
	c.fail = nil
	if tc, err := s.TypeConverter(core); err != nil || tc == deduced {
		t.Errorf("after a minute: got %T, %v; want the schema's converter", tc, err)
	}
}

func TestSchemasCompareFallback(t *testing.T) {
	s := NewSchemas(openapitest.NewEmbeddedFileClient())

	r, err := s.Compare(nil, configMap(t), ours)
	if err != nil || r.Fallback != "" || !r.Changed {
		t.Errorf("ConfigMap: got %+v, %v; want a change with the schema", r, err)
	}

	// The schema has no such field: compared anyway, and said so.
	r, err = s.Compare(nil, set(configMap(t), "x", "spec", "bogus"), ours)
	if err != nil || !r.Changed || !strings.Contains(r.Fallback, ".spec: field not declared in schema") {
		t.Errorf("field not in the schema: got %+v, %v; want a change and a fallback naming the field", r, err)
	}

	r, err = s.Compare(nil, widget(t), ours)
	if err != nil || !r.Changed || !strings.Contains(r.Fallback, "example.com/v1") {
		t.Errorf("no schema: got %+v, %v; want a change and a fallback naming the GroupVersion", r, err)
	}
}

func TestSchemasTakeoverPatch(t *testing.T) {
	s := NewSchemas(openapitest.NewEmbeddedFileClient())
	srv := newServer(t, coreV1(t), schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, nil)
	mcCreate(t, srv, remove(configMap(t), "metadata", "ownerReferences"))
	patch, needed, err := s.TakeoverPatch(srv.observed(), ours)
	if err != nil || !needed || len(patch) == 0 {
		t.Errorf("got %s, %v, %v; want a patch", patch, needed, err)
	}
}

// Building core/v1's converter is fetching and decoding its OpenAPI v3
// document (1.6 MB here, about as much from a real cluster) and
// converting its schemas; the test logs how long each step takes, once.
func TestCoreV1ConverterBuildTime(t *testing.T) {
	root := openapi3.NewRoot(openapitest.NewEmbeddedFileClient())
	start := time.Now()
	spec, err := root.GVSpec(core)
	if err != nil {
		t.Fatal(err)
	}
	fetched := time.Now()
	tc, err := managedfields.NewTypeConverter(spec.Components.Schemas, false)
	if err != nil {
		t.Fatal(err)
	}
	built := time.Now()
	if _, err := Compare(tc, nil, service(t), ours); err != nil {
		t.Fatal(err)
	}
	first := time.Now()
	if _, err := Compare(tc, nil, service(t), ours); err != nil {
		t.Fatal(err)
	}
	t.Logf("core/v1 (%d schemas): read and decode %v, build %v, first Compare %v, next Compare %v",
		len(spec.Components.Schemas), fetched.Sub(start), built.Sub(fetched), first.Sub(built), time.Since(first))
}

// BenchmarkCoreV1Converter measures what Schemas does on the first use of
// core/v1 (the fetch here is from memory): go test -bench CoreV1 -benchmem.
func BenchmarkCoreV1Converter(b *testing.B) {
	client := openapitest.NewEmbeddedFileClient()
	for b.Loop() {
		if _, err := NewSchemas(client).TypeConverter(core); err != nil {
			b.Fatal(err)
		}
	}
}
