package hookapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// replicasHook answers the parent's spec.replicas in its status and one
// ConfigMap child named after the parent.
var replicasHook = SyncHookFunc(func(ctx context.Context, req *SyncHookRequest) (*SyncHookResponse, error) {
	replicas, _, err := unstructured.NestedInt64(req.Parent.Object, "spec", "replicas")
	if err != nil {
		return nil, err
	}
	return &SyncHookResponse{
		Status:   map[string]interface{}{"replicas": replicas, "pods": len(req.Children[GroupKey("v1", "Pod")])},
		Children: []*unstructured.Unstructured{obj("v1", "ConfigMap", "", req.Parent.GetName())},
	}, nil
})

func TestSyncHandlerAnswersJSON(t *testing.T) {
	body := `{"controller":null,"parent":{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"t1"},"spec":{"replicas":3}},` +
		`"children":{"Pod.v1":{"a":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a"}}}},"related":{},"finalizing":false,"futureField":1}`
	rec := httptest.NewRecorder()
	SyncHandler(replicasHook).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/sync", strings.NewReader(body)))

	if rec.Code != http.StatusOK {
		t.Fatalf("status %d, body %q", rec.Code, rec.Body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q, want application/json", ct)
	}
	want := `{"status":{"pods":1,"replicas":3},"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"t1"}}],"resyncAfterSeconds":0,"finalized":false}`
	if got := rec.Body.String(); got != want {
		t.Errorf("body\n got: %s\nwant: %s", got, want)
	}
}

func TestCustomizeHandlerAnswersJSON(t *testing.T) {
	hook := CustomizeHookFunc(func(ctx context.Context, req *CustomizeHookRequest) (*CustomizeHookResponse, error) {
		return &CustomizeHookResponse{RelatedResourceRules: []*RelatedResourceRule{
			{APIVersion: "v1", Resource: "configmaps", Namespace: req.Parent.GetNamespace(), Names: []string{req.Parent.GetName()}},
		}}, nil
	})
	body := `{"controller":null,"parent":{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"t1","namespace":"ns"}}}`
	rec := httptest.NewRecorder()
	CustomizeHandler(hook).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/customize", strings.NewReader(body)))

	if rec.Code != http.StatusOK {
		t.Fatalf("status %d, body %q", rec.Code, rec.Body)
	}
	want := `{"relatedResources":[{"apiVersion":"v1","resource":"configmaps","labelSelector":null,"namespace":"ns","names":["t1"]}]}`
	if got := rec.Body.String(); got != want {
		t.Errorf("body\n got: %s\nwant: %s", got, want)
	}
}

func TestSyncHandlerKeepsIntegers(t *testing.T) {
	var got interface{}
	hook := SyncHookFunc(func(ctx context.Context, req *SyncHookRequest) (*SyncHookResponse, error) {
		got = req.Parent.Object["spec"].(map[string]interface{})["replicas"]
		return &SyncHookResponse{}, nil
	})
	body := `{"parent":{"apiVersion":"v1","kind":"Thing","metadata":{"name":"t"},"spec":{"replicas":3}}}`
	rec := httptest.NewRecorder()
	SyncHandler(hook).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body)))
	if _, ok := got.(int64); !ok || rec.Code != http.StatusOK {
		t.Errorf("replicas decoded as %T (status %d), want int64", got, rec.Code)
	}
}

func TestHandlerRejects(t *testing.T) {
	failing := SyncHookFunc(func(ctx context.Context, req *SyncHookRequest) (*SyncHookResponse, error) {
		return nil, errors.New("database on fire")
	})
	silent := SyncHookFunc(func(ctx context.Context, req *SyncHookRequest) (*SyncHookResponse, error) {
		return nil, nil
	})
	valid := `{"parent":{"apiVersion":"v1","kind":"Thing","metadata":{"name":"t"}}}`

	for _, tc := range []struct {
		name     string
		hook     SyncHook
		method   string
		body     io.Reader
		wantCode int
		wantBody string
	}{
		{"GET is not allowed", replicasHook, http.MethodGet, nil, http.StatusMethodNotAllowed, "POST"},
		{"PUT is not allowed", replicasHook, http.MethodPut, strings.NewReader(valid), http.StatusMethodNotAllowed, "POST"},
		{"malformed JSON is a bad request", replicasHook, http.MethodPost, strings.NewReader(`{"parent":`), http.StatusBadRequest, "can't decode sync hook request"},
		{"wrong JSON type is a bad request", replicasHook, http.MethodPost, strings.NewReader(`{"finalizing":"yes"}`), http.StatusBadRequest, "can't decode sync hook request"},
		{"body over 32 MiB is too large", replicasHook, http.MethodPost, io.MultiReader(strings.NewReader(`{"x":"`), &zeros{n: MaxRequestBytes}), http.StatusRequestEntityTooLarge, "larger than"},
		{"declared length over 32 MiB is too large", replicasHook, http.MethodPost, bytes.NewReader(make([]byte, MaxRequestBytes+1)), http.StatusRequestEntityTooLarge, "larger than"},
		{"hook error is an internal error with its message", failing, http.MethodPost, strings.NewReader(valid), http.StatusInternalServerError, "sync hook failed: database on fire"},
		{"nil response is an internal error", silent, http.MethodPost, strings.NewReader(valid), http.StatusInternalServerError, "no response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			SyncHandler(tc.hook).ServeHTTP(rec, httptest.NewRequest(tc.method, "/sync", tc.body))
			if rec.Code != tc.wantCode {
				t.Errorf("status %d, want %d (body %q)", rec.Code, tc.wantCode, rec.Body)
			}
			if !strings.Contains(rec.Body.String(), tc.wantBody) {
				t.Errorf("body %q does not contain %q", rec.Body, tc.wantBody)
			}
			if tc.wantCode == http.StatusMethodNotAllowed && rec.Header().Get("Allow") != http.MethodPost {
				t.Errorf("Allow header %q, want POST", rec.Header().Get("Allow"))
			}
		})
	}
}

// zeros reads n '0' bytes without holding them in memory, and hides its
// length so that only the streaming limit can catch it.
type zeros struct{ n int }

func (z *zeros) Read(p []byte) (int, error) {
	if z.n <= 0 {
		return 0, io.EOF
	}
	if len(p) > z.n {
		p = p[:z.n]
	}
	for i := range p {
		p[i] = '0'
	}
	z.n -= len(p)
	return len(p), nil
}

func TestHandlerOverRealHTTP(t *testing.T) {
	srv := httptest.NewServer(SyncHandler(replicasHook))
	defer srv.Close()
	req, _ := json.Marshal(&SyncHookRequest{Parent: obj("example.com/v1", "Thing", "ns", "t1")})
	resp, err := http.Post(srv.URL, "application/json", bytes.NewReader(req))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out SyncHookResponse
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK || len(out.Children) != 1 || out.Children[0].GetName() != "t1" {
		t.Errorf("status %d, response %+v", resp.StatusCode, out)
	}
}

func TestPatchHandlerAnswersJSON(t *testing.T) {
	// A patch hook that labels every child with the parent's name.
	hook := GeneratorFunc(func(ctx context.Context, req *GenerateRequest) (*GenerateResponse, error) {
		resp := &GenerateResponse{}
		for _, item := range req.Items {
			patch := `[{"op":"add","path":"/metadata/labels","value":{"parent":"` + req.Variables.Builtin.Parent.Metadata.Name + `"}}]`
			resp.Items = append(resp.Items, GenerateResponseItem{UID: item.UID, PatchType: PatchTypeJSONPatch, Patch: []byte(patch)})
		}
		return resp, nil
	})
	body := `{"variables":{"builtin":{"controller":{"name":"c","generation":1},"parent":{"apiVersion":"example.com/v1","kind":"Thing",` +
		`"metadata":{"name":"t1","namespace":"ns","labels":{},"annotations":{}},"spec":{"replicas":3}}}},` +
		`"items":[{"uid":"u1","ref":{"apiVersion":"v1","kind":"ConfigMap","namespace":"ns","name":"t1-a"},` +
		`"variables":{"builtin":{"child":{"apiVersion":"v1","kind":"ConfigMap","namespace":"ns","name":"t1-a"}}},` +
		`"object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"t1-a","namespace":"ns"}}}],"futureField":1}`
	rec := httptest.NewRecorder()
	PatchHandler(hook).ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/patch", strings.NewReader(body)))

	if rec.Code != http.StatusOK {
		t.Fatalf("status %d, body %q", rec.Code, rec.Body)
	}
	want := `{"items":[{"uid":"u1","patchType":"JSONPatch","patch":[{"op":"add","path":"/metadata/labels","value":{"parent":"t1"}}]}]}`
	if got := rec.Body.String(); got != want {
		t.Errorf("body\n got: %s\nwant: %s", got, want)
	}
}

func TestPatchHandlerRejects(t *testing.T) {
	failing := GeneratorFunc(func(ctx context.Context, req *GenerateRequest) (*GenerateResponse, error) {
		return nil, errors.New("out of ideas")
	})
	silent := GeneratorFunc(func(ctx context.Context, req *GenerateRequest) (*GenerateResponse, error) {
		return nil, nil
	})
	for _, tc := range []struct {
		name     string
		hook     Generator
		method   string
		body     string
		wantCode int
		wantBody string
	}{
		{"GET is not allowed", silent, http.MethodGet, "", http.StatusMethodNotAllowed, "patch hooks are called with POST"},
		{"malformed JSON is a bad request", silent, http.MethodPost, `{"items":`, http.StatusBadRequest, "can't decode patch hook request"},
		{"generator error is an internal error with its message", failing, http.MethodPost, `{"items":[]}`, http.StatusInternalServerError, "patch hook failed: out of ideas"},
		{"nil response is an internal error", silent, http.MethodPost, `{"items":[]}`, http.StatusInternalServerError, "patch hook returned no response"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			PatchHandler(tc.hook).ServeHTTP(rec, httptest.NewRequest(tc.method, "/patch", strings.NewReader(tc.body)))
			if rec.Code != tc.wantCode || !strings.Contains(rec.Body.String(), tc.wantBody) {
				t.Errorf("status %d body %q, want %d with %q", rec.Code, rec.Body, tc.wantCode, tc.wantBody)
			}
		})
	}
}
