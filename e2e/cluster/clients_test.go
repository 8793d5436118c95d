package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	clientset "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned"
)

// The sweep: every resource of ours, through each kind of client client-go
// has (typed, dynamic, metadata), asking for each media type Kubernetes'
// clients ask for (JSON; protobuf with a JSON fallback, as
// kube-controller-manager's clients do; CBOR with a JSON fallback, as
// clients with CBOR turned on do), with every verb a controller uses: get,
// list, watch, delete, deletecollection. Every answer must decode; none may
// be an encoding error.

const (
	protobuf = "application/vnd.kubernetes.protobuf"
	jsonType = "application/json"
)

// acceptModes are what clients put first in Accept, each with a JSON
// fallback but the first.
var acceptModes = []struct{ name, accept string }{
	{"json", jsonType},
	{"protobuf-with-json-fallback", protobuf + "," + jsonType},
	{"cbor-with-json-fallback", "application/cbor," + jsonType},
}

// sweptResource is one resource of ours, with what the sweep needs to make
// objects of it.
type sweptResource struct {
	gvr        schema.GroupVersionResource
	namespaced bool
	// create makes an object named name with labels, as the
	// administrator, over JSON.
	create func(ctx context.Context, ns, name string, labels map[string]string) error
}

// exchange is one request of a client under test and what it was answered.
type exchange struct {
	method, url, accept, contentType string
	status                           int
}

// recorder is a transport that sets a request's Accept as the mode asks
// (for a metadata client, only where it asks for the object as it is) and
// records every exchange, so the sweep can say which media type each answer
// came in.
type recorder struct {
	next        http.RoundTripper
	accept      string
	onlyIfPlain bool
	mu          sync.Mutex
	seen        []exchange
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	accept := req.Header.Get("Accept")
	if r.accept != "" && (!r.onlyIfPlain || !strings.Contains(accept, "as=")) {
		req = req.Clone(req.Context())
		req.Header.Set("Accept", r.accept)
		accept = r.accept
	}
	resp, err := r.next.RoundTrip(req)
	if err == nil {
		r.mu.Lock()
		r.seen = append(r.seen, exchange{req.Method, req.URL.String(), accept, resp.Header.Get("Content-Type"), resp.StatusCode})
		r.mu.Unlock()
	}
	return resp, err
}

func (r *recorder) exchanges() []exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]exchange(nil), r.seen...)
}

// clientUnderTest performs the verbs of one kind of client on one resource.
type clientUnderTest struct {
	get              func(ctx context.Context, ns, name string) (string, error)
	list             func(ctx context.Context, ns, selector string) (names []string, resourceVersion string, err error)
	watch            func(ctx context.Context, ns, selector, resourceVersion string) (watch.Interface, error)
	delete           func(ctx context.Context, ns, name string) error
	deleteCollection func(ctx context.Context, ns, selector string) error
}

func sweptResources(admin clientset.Interface) []sweptResource {
	return []sweptResource{
		{
			gvr: v1alpha1.SchemeGroupVersion.WithResource("compositecontrollers"),
			create: func(ctx context.Context, _, name string, labels map[string]string) error {
				var c v1alpha1.CompositeController
				if err := yaml.Unmarshal([]byte(compositeControllerYAML(name, name+"s")), &c); err != nil {
					return err
				}
				c.Labels = labels
				_, err := admin.MetacontrollerV1alpha1().CompositeControllers().Create(ctx, &c, metav1.CreateOptions{})
				return err
			},
		},
		{
			gvr:        v1alpha1.SchemeGroupVersion.WithResource("controllerrevisions"),
			namespaced: true,
			create: func(ctx context.Context, ns, name string, labels map[string]string) error {
				rev := &v1alpha1.ControllerRevision{
					ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: labels},
					ParentPatch: runtime.RawExtension{Raw: []byte(`{"spec":{"color":"blue"}}`)},
					Children:    []v1alpha1.ControllerRevisionChildren{{Kind: "ConfigMap", Names: []string{name}}},
				}
				_, err := admin.MetacontrollerV1alpha1().ControllerRevisions(ns).Create(ctx, rev, metav1.CreateOptions{})
				return err
			},
		},
	}
}

// typedClient is our generated clientset, as a program built on it uses it.
func typedClient(t *testing.T, cfg *rest.Config, gvr schema.GroupVersionResource) clientUnderTest {
	c, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	v1 := c.MetacontrollerV1alpha1()
	if gvr.Resource == "compositecontrollers" {
		return resourceClient(func(string) resource[*v1alpha1.CompositeController, *v1alpha1.CompositeControllerList] {
			return typedResource[*v1alpha1.CompositeController, *v1alpha1.CompositeControllerList]{v1.CompositeControllers()}
		})
	}
	return resourceClient(func(ns string) resource[*v1alpha1.ControllerRevision, *v1alpha1.ControllerRevisionList] {
		return typedResource[*v1alpha1.ControllerRevision, *v1alpha1.ControllerRevisionList]{v1.ControllerRevisions(ns)}
	})
}

// dynamicClient is client-go's dynamic client (kubectl, GitOps tools).
func dynamicClient(t *testing.T, cfg *rest.Config, gvr schema.GroupVersionResource) clientUnderTest {
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return resourceClient(func(ns string) resource[*unstructured.Unstructured, *unstructured.UnstructuredList] {
		if ns == "" {
			return c.Resource(gvr)
		}
		return c.Resource(gvr).Namespace(ns)
	})
}

// metadataClient is client-go's metadata client, what kube-controller-
// manager's namespace, garbage-collector and quota controllers use.
func metadataClient(t *testing.T, cfg *rest.Config, gvr schema.GroupVersionResource) clientUnderTest {
	c, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return resourceClient(func(ns string) resource[*metav1.PartialObjectMetadata, *metav1.PartialObjectMetadataList] {
		if ns == "" {
			return c.Resource(gvr)
		}
		return c.Resource(gvr).Namespace(ns)
	})
}

// resource is one resource, in a namespace or cluster-wide, as a client
// has it: O its objects, L its lists. The dynamic and metadata clients
// are one; typedResource makes a typed client one.
type resource[O metav1.Object, L objectList] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions, subresources ...string) (O, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions, subresources ...string) error
	DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error
}

// objectList is a list of objects, as clients decode one.
type objectList interface {
	metav1.ListInterface
	runtime.Object
}

// typedOps is a typed client of one resource, whose Get and Delete, unlike
// resource's, take no subresources.
type typedOps[O, L any] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (O, error)
	List(ctx context.Context, opts metav1.ListOptions) (L, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
	DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error
}

// typedResource is a typed client as a resource (the sweep asks for no
// subresource).
type typedResource[O, L any] struct{ typedOps[O, L] }

func (r typedResource[O, L]) Get(ctx context.Context, name string, opts metav1.GetOptions, _ ...string) (O, error) {
	return r.typedOps.Get(ctx, name, opts)
}

func (r typedResource[O, L]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions, _ ...string) error {
	return r.typedOps.Delete(ctx, name, opts)
}

// resourceClient is the client under test that r, the resource in a
// namespace ("" for cluster-wide), is.
func resourceClient[O metav1.Object, L objectList](r func(ns string) resource[O, L]) clientUnderTest {
	return clientUnderTest{
		get: func(ctx context.Context, ns, name string) (string, error) {
			o, err := r(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return o.GetName(), nil
		},
		list: func(ctx context.Context, ns, sel string) ([]string, string, error) {
			l, err := r(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				return nil, "", err
			}
			names, err := itemNames(l)
			return names, l.GetResourceVersion(), err
		},
		watch: func(ctx context.Context, ns, sel, rv string) (watch.Interface, error) {
			return r(ns).Watch(ctx, metav1.ListOptions{LabelSelector: sel, ResourceVersion: rv})
		},
		delete: func(ctx context.Context, ns, name string) error {
			return r(ns).Delete(ctx, name, metav1.DeleteOptions{})
		},
		deleteCollection: func(ctx context.Context, ns, sel string) error {
			return r(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: sel})
		},
	}
}

// itemNames is the names of list's items, in order.
func itemNames(list runtime.Object) ([]string, error) {
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(items))
	for _, item := range items {
		o, err := meta.Accessor(item)
		if err != nil {
			return nil, err
		}
		names = append(names, o.GetName())
	}
	return names, nil
}

// TestEveryClientAndMediaTypeWorksWithEveryVerb is the sweep: no client that
// kube-controller-manager or kubectl uses can make the server fail to encode
// an answer.
func TestEveryClientAndMediaTypeWorksWithEveryVerb(t *testing.T) {
	t.Parallel()
	suite.SetUp(t)
	ctx := context.Background()
	quiet := rest.CopyConfig(suite.AdminConfig)
	// The fixtures' controllers name parent resources nobody serves: the
	// server's warnings about them are not what this test is about.
	quiet.WarningHandler = rest.NoWarnings{}
	admin, err := clientset.NewForConfig(quiet)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "client-sweep"
	suite.MustCreateNamespace(t, ns)
	clients := []struct {
		name string
		make func(*testing.T, *rest.Config, schema.GroupVersionResource) clientUnderTest
		// metadata clients ask for PartialObjectMetadata themselves;
		// the mode sets Accept only where they ask for the object as
		// it is (deletes).
		metadata bool
	}{
		{"typed", typedClient, false},
		{"dynamic", dynamicClient, false},
		{"metadata", metadataClient, true},
	}
	for _, res := range sweptResources(admin) {
		for _, cl := range clients {
			for _, mode := range acceptModes {
				name := fmt.Sprintf("%s/%s/%s", res.gvr.Resource, cl.name, mode.name)
				t.Run(name, func(t *testing.T) {
					id := strings.ReplaceAll(fmt.Sprintf("%s-%s-%s", res.gvr.Resource[:4], cl.name[:4], mode.name[:4]), "/", "-")
					objNS := ""
					if res.namespaced {
						objNS = ns
					}
					labels := map[string]string{"sweep": id}
					selector := "sweep=" + id
					for _, n := range []string{id + "-a", id + "-b"} {
						if err := res.create(ctx, objNS, n, labels); err != nil {
							t.Fatalf("create %s: %v", n, err)
						}
					}
					cfg := rest.CopyConfig(suite.AdminConfig)
					rec := &recorder{accept: mode.accept, onlyIfPlain: cl.metadata}
					cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec })
					c := cl.make(t, cfg, res.gvr)
					sweep(t, ctx, res, c, objNS, id, selector, labels)
					checkAnswers(t, rec.exchanges(), cl.metadata, mode.accept)
				})
			}
		}
	}
}

// sweep runs every verb once through c and checks what a user of c sees.
func sweep(t *testing.T, ctx context.Context, res sweptResource, c clientUnderTest, ns, id, selector string, labels map[string]string) {
	t.Helper()
	if got, err := c.get(ctx, ns, id+"-a"); err != nil || got != id+"-a" {
		t.Fatalf("get: %q, %v", got, err)
	}
	names, rv, err := c.list(ctx, ns, selector)
	if err != nil || len(names) != 2 {
		t.Fatalf("list: %v, %v; want the two objects", names, err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	w, err := c.watch(wctx, ns, selector, rv)
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	if err := res.create(ctx, ns, id+"-c", labels); err != nil {
		t.Fatalf("create %s-c: %v", id, err)
	}
	select {
	case e, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch: closed before the new object's event")
		}
		obj, isMeta := e.Object.(metav1.Object)
		if e.Type != watch.Added || !isMeta || obj.GetName() != id+"-c" {
			t.Fatalf("watch: %s %#v, want ADDED %s-c", e.Type, e.Object, id)
		}
	case <-wctx.Done():
		t.Fatal("watch: no event for the new object")
	}
	if err := c.delete(ctx, ns, id+"-a"); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := c.get(ctx, ns, id+"-a"); !apierrors.IsNotFound(err) {
		t.Fatalf("get after delete: %v, want NotFound", err)
	}
	if err := c.deleteCollection(ctx, ns, selector); err != nil {
		t.Fatalf("deletecollection: %v", err)
	}
	if names, _, err := c.list(ctx, ns, selector); err != nil || len(names) != 0 {
		t.Fatalf("list after deletecollection: %v, %v; want none", names, err)
	}
}

// checkAnswers: every answer came in a media type the client asked for; a
// metadata client's PartialObjectMetadata answers keep protobuf, and an
// answer of our own types is never protobuf (they have none). Errors (the
// NotFound the sweep asks for) are Status objects, negotiated without
// transforms, as kube-apiserver answers them for every resource.
func checkAnswers(t *testing.T, seen []exchange, metadataClient bool, accept string) {
	t.Helper()
	if len(seen) == 0 {
		t.Fatal("the client sent nothing through the recorder")
	}
	for _, e := range seen {
		if e.status >= 300 {
			continue
		}
		got, _, err := mime.ParseMediaType(e.contentType)
		if err != nil {
			t.Errorf("%s %s: answer Content-Type %q: %v", e.method, e.url, e.contentType, err)
			continue
		}
		switch {
		case strings.Contains(e.accept, "as=PartialObjectMetadata"):
			if got != protobuf {
				t.Errorf("%s %s (Accept %s) answered %s: a metadata read must keep protobuf", e.method, e.url, e.accept, got)
			}
		case got != jsonType:
			t.Errorf("%s %s (Accept %s) answered %s, want JSON", e.method, e.url, e.accept, got)
		}
	}
	if metadataClient {
		for _, e := range seen {
			if strings.Contains(e.accept, "as=PartialObjectMetadata") {
				return
			}
		}
		t.Error("the metadata client never asked for PartialObjectMetadata")
	}
}

// TestMediaTypesOurTypesCannotTakeAreRefused: a client that accepts only
// protobuf gets 406 naming what is served, a protobuf body for one of our
// types gets 415, and a metadata list in protobuf alone is served.
func TestMediaTypesOurTypesCannotTakeAreRefused(t *testing.T) {
	t.Parallel()
	suite.SetUp(t)
	client, err := rest.HTTPClientFor(suite.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "client-refusals"
	suite.MustCreateNamespace(t, ns)
	revisions := suite.KubeAPIServerURL + "/apis/metacontroller.k8s.io/v1alpha1/namespaces/" + ns + "/controllerrevisions"
	do := func(method, accept, contentType string, body io.Reader) (int, string, string) {
		t.Helper()
		req, _ := http.NewRequest(method, revisions, body)
		req.Header.Set("Accept", accept)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(data)
	}
	if code, _, body := do(http.MethodGet, protobuf, "", nil); code != http.StatusNotAcceptable || !strings.Contains(body, jsonType) {
		t.Errorf("a list asking for protobuf alone: %d %q; want 406 naming %s", code, body, jsonType)
	}
	if code, ct, _ := do(http.MethodGet, protobuf+";as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", "", nil); code != http.StatusOK || !strings.HasPrefix(ct, protobuf) {
		t.Errorf("a metadata list asking for protobuf alone: %d %s; want 200 in protobuf", code, ct)
	}
	if code, _, body := do(http.MethodPost, jsonType, protobuf, strings.NewReader("k8s\x00")); code != http.StatusUnsupportedMediaType {
		t.Errorf("a create with a protobuf body: %d %q; want 415", code, body)
	}
}

// TestDiscoveryOpenAPIAndKubectlSeeEveryKind: what kubectl and the cluster's
// controllers read about our API through kube-apiserver agrees with what is
// served: discovery (aggregated too), OpenAPI v2 and v3, the verbs of
// `kubectl api-resources -o wide`, and `kubectl explain` of every kind.
func TestDiscoveryOpenAPIAndKubectlSeeEveryKind(t *testing.T) {
	t.Parallel()
	suite.SetUp(t)
	// Every verb of a resource is exercised by the sweep above (and
	// create, update and patch by the rest of the suite): discovery must
	// say no more and no less.
	allVerbs := []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	kinds := map[string]string{"compositecontrollers": "CompositeController", "controllerrevisions": "ControllerRevision"}

	var list metav1.APIResourceList
	if err := json.Unmarshal([]byte(mustKubectl(t, "get", "--raw", "/apis/metacontroller.k8s.io/v1alpha1")), &list); err != nil {
		t.Fatal(err)
	}
	discovered := map[string][]string{}
	for _, r := range list.APIResources {
		discovered[r.Name] = sortedCopy(r.Verbs)
	}
	for resource := range kinds {
		if got := discovered[resource]; !reflect.DeepEqual(got, allVerbs) {
			t.Errorf("discovery: %s verbs %v, want %v", resource, got, allVerbs)
		}
	}

	// Aggregated discovery, as kubectl and client-go read it first.
	client, err := rest.HTTPClientFor(suite.AdminConfig)
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodGet, suite.KubeAPIServerURL+"/apis", nil)
	req.Header.Set("Accept", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var aggregated apidiscoveryv2.APIGroupDiscoveryList
	err = json.NewDecoder(resp.Body).Decode(&aggregated)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("aggregated discovery (%s): %v", resp.Header.Get("Content-Type"), err)
	}
	found := map[string][]string{}
	for _, g := range aggregated.Items {
		if g.Name != "metacontroller.k8s.io" {
			continue
		}
		for _, v := range g.Versions {
			for _, r := range v.Resources {
				if v.Version == "v1alpha1" {
					found[r.Resource] = sortedCopy(r.Verbs)
				}
			}
		}
	}
	for resource := range kinds {
		if got := found[resource]; !reflect.DeepEqual(got, allVerbs) {
			t.Errorf("aggregated discovery: %s verbs %v, want %v", resource, got, allVerbs)
		}
	}

	// kubectl api-resources -o wide: its VERBS column.
	out := mustKubectl(t, "api-resources", "-o", "wide", "--api-group=metacontroller.k8s.io")
	for resource := range kinds {
		line := lineStarting(out, resource+" ")
		if line == "" || !strings.Contains(line, " "+strings.Join(allVerbs, ",")+" ") {
			t.Errorf("kubectl api-resources -o wide: %s line %q, want verbs %v\n%s", resource, line, allVerbs, out)
		}
	}

	// OpenAPI v2 and v3 name every kind with its group-version-kind.
	v2 := mustKubectl(t, "get", "--raw", "/openapi/v2")
	v3 := mustKubectl(t, "get", "--raw", "/openapi/v3/apis/metacontroller.k8s.io/v1alpha1")
	for resource, kind := range kinds {
		gvk := fmt.Sprintf(`"group":"metacontroller.k8s.io","kind":"%s","version":"v1alpha1"`, kind)
		for name, doc := range map[string]string{"v2": v2, "v3": v3} {
			if !strings.Contains(compactJSON(t, doc), gvk) {
				t.Errorf("OpenAPI %s has no schema for %s", name, kind)
			}
		}
		explain := mustKubectl(t, "explain", resource)
		if !strings.Contains(explain, "KIND:       "+kind) && !strings.Contains(explain, "KIND:    "+kind) {
			t.Errorf("kubectl explain %s:\n%s", resource, explain)
		}
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}

func lineStarting(out, prefix string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, prefix) {
			return line
		}
	}
	return ""
}

// compactJSON re-encodes a JSON document without spaces, so that a search
// for a fragment does not depend on the server's indentation.
func compactJSON(t *testing.T, doc string) string {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}
