package reconcile

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
	"github.com/composite-apiserver/composite-apiserver/internal/engine"
	"github.com/composite-apiserver/composite-apiserver/internal/hooks"
)

// answerServer is a hook that answers whatever body the fuzzer set.
type answerServer struct {
	mu   sync.Mutex
	body []byte
	srv  *httptest.Server
}

func newAnswerServer(t testing.TB) *answerServer {
	a := &answerServer{}
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a.mu.Lock()
		body := a.body
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(a.srv.Close)
	return a
}

// seeds are valid answers and the ways a hook gets them wrong.
var seeds = []string{
	`{"status":{"ok":true},"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"color":"blue"}}]}`,
	`{"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}},{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}]}`,
	`{"children":[{"apiVersion":"v1","kind":"Secret","metadata":{"name":"sneaky"}}]}`,
	`{"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"kube-system"}}]}`,
	`{"children":[null,{"kind":"ConfigMap"},{"apiVersion":7}]}`,
	`{"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"app":5}}}]}`,
	`{"status":"not an object","children":[]}`,
	`{"resyncAfterSeconds":1e400}`,
	`{"resyncAfterSeconds":-5,"finalized":true}`,
	`{"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"n":123456789012345678901234567890}}]}`,
	"{\"children\":[{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"\xff\xfe\"}}]}",
	`{"children":[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`,
	`null`, `[]`, `"x"`, `{`, ``,
}

// FuzzHookAnswers sends any bytes as a sync or finalize answer through the
// real webhook client and the engine: either a valid plan or an error,
// never a panic; an error never comes with a plan, so a bad answer can
// never delete anything; an answer that is not UTF-8, or is null, is an
// error; and a plan deletes only children the parent owns and the hook did
// not return.
func FuzzHookAnswers(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	srv := newAnswerServer(f)
	url := srv.srv.URL + "/hook"
	cc := &v1alpha1.CompositeController{
		ObjectMeta: metav1.ObjectMeta{Name: "things", UID: "uid-cc", Generation: 1},
		Spec: v1alpha1.CompositeControllerSpec{
			GenerateSelector: ptr.To(true),
			ParentResource:   v1alpha1.CompositeControllerParentResourceRule{ResourceRule: v1alpha1.ResourceRule{APIVersion: "example.com/v1", Resource: "things"}},
			ChildResources: []v1alpha1.CompositeControllerChildResourceRule{{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"},
				UpdateStrategy: &v1alpha1.CompositeControllerChildUpdateStrategy{Method: v1alpha1.ChildUpdateInPlace}}},
			Hooks: &v1alpha1.CompositeControllerHooks{
				Sync:     &v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: &url, Timeout: &metav1.Duration{Duration: 5 * time.Second}}},
				Finalize: &v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: &url, Timeout: &metav1.Duration{Duration: 5 * time.Second}}},
			},
		},
	}
	def, err := definition.Compile(cc, definition.GuessingResolver())
	if err != nil {
		f.Fatal(err)
	}
	built, err := hooks.Build(context.Background(), def, nil, hooks.Destinations{})
	if err != nil {
		f.Fatal(err)
	}
	c := &Controller{Def: def, Hooks: built.Hooks}
	f.Fuzz(func(t *testing.T, answer []byte, finalizing bool) {
		srv.mu.Lock()
		srv.body = answer
		srv.mu.Unlock()
		p := parent(finalizer)
		if finalizing {
			p.SetDeletionTimestamp(&metav1.Time{Time: time.Now()})
		}
		owned := func(name string) *unstructured.Unstructured {
			o := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]interface{}{"name": name, "namespace": "ns", "uid": "uid-" + name,
					"labels": map[string]interface{}{engine.ControllerUIDLabel: "uid-p"}}}}
			o.SetOwnerReferences([]metav1.OwnerReference{engine.ControllerRef(p)})
			return o
		}
		e, _ := env(t)
		res, err := c.Sync(context.Background(), e, p, Options{DryRun: true,
			Claimed: &engine.Claimed{Owned: []*unstructured.Unstructured{owned("a"), owned("b")}}})
		if err == nil && (!utf8.Valid(answer) || string(bytes.TrimSpace(answer)) == "null") {
			// Decoded, they would be what the hook did not say: U+FFFD
			// for the bytes, and "delete every child" for null.
			t.Fatalf("an answer that is not UTF-8 or is null was planned: %q", answer)
		}
		if err != nil {
			if res.Plan != nil {
				t.Fatalf("an error (%v) came with a plan", err)
			}
			return
		}
		if res.Plan == nil {
			t.Fatalf("no error and no plan")
		}
		desired := map[string]bool{}
		for _, d := range res.Plan.Desired {
			desired[d.GetName()] = true
		}
		for _, item := range res.Plan.Items {
			if item.Action != v1alpha1.SyncActionDelete {
				continue
			}
			if item.Observed == nil || metav1.GetControllerOfNoCopy(item.Observed) == nil || desired[item.Observed.GetName()] {
				t.Fatalf("a plan deletes %v, which the parent does not own or the hook returned", item.Observed)
			}
		}
	})
}
