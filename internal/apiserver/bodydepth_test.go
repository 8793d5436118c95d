package apiserver

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestBodyDepthLimit(t *testing.T) {
	nested := func(depth int) string {
		return strings.Repeat(`{"a":`, depth-1) + `[1]` + strings.Repeat(`}`, depth-1)
	}
	yamlBlock := func(depth int) string {
		var b strings.Builder
		for i := 0; i < depth; i++ {
			b.WriteString(strings.Repeat("  ", i) + "a:\n")
		}
		b.WriteString(strings.Repeat("  ", depth) + "b: 1\n")
		return b.String()
	}
	for _, tc := range []struct {
		name, method, contentType, body string
		// maxBytes is the size limit; 1 MiB when 0.
		maxBytes int64
		wantCode int
	}{
		{"JSON at the limit", http.MethodPost, "application/json", nested(maxBodyDepth), 0, http.StatusOK},
		{"JSON past the limit", http.MethodPost, "application/json", nested(maxBodyDepth + 1), 0, http.StatusBadRequest},
		{"JSON 100,000 deep", http.MethodPut, "application/json", strings.Repeat("[", 100000) + strings.Repeat("]", 100000), 0, http.StatusBadRequest},
		{"a merge patch past the limit", http.MethodPatch, "application/merge-patch+json", nested(5000), 0, http.StatusBadRequest},
		{"brackets in strings do not count", http.MethodPost, "application/json", `{"a":"` + strings.Repeat(`[{\"`, 500) + `"}`, 0, http.StatusOK},
		{"YAML flow past the limit", http.MethodPost, "application/yaml", nested(maxBodyDepth + 1), 0, http.StatusBadRequest},
		{"YAML blocks past the limit", http.MethodPatch, "application/apply-patch+yaml", yamlBlock(maxBodyDepth + 1), 0, http.StatusBadRequest},
		{"YAML blocks within the limit", http.MethodPost, "application/yaml; charset=utf-8", yamlBlock(maxBodyDepth - 1), 0, http.StatusOK},
		{"a body over the size limit", http.MethodPost, "application/json", `"` + strings.Repeat("x", 2000) + `"`, 2000, http.StatusRequestEntityTooLarge},
		{"garbage is left to the handler", http.MethodPost, "application/json", `{{{not json`, 0, http.StatusOK},
		{"a GET is left alone", http.MethodGet, "", nested(5000), 0, http.StatusOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got string
			handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				data, _ := io.ReadAll(r.Body)
				got = string(data)
			})
			req := httptest.NewRequest(tc.method, "/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers", strings.NewReader(tc.body))
			req.Header.Set("Content-Type", tc.contentType)
			rec := httptest.NewRecorder()
			maxBytes := tc.maxBytes
			if maxBytes == 0 {
				maxBytes = 1 << 20
			}
			withBodyDepthLimit(handler, maxBodyDepth, maxBytes).ServeHTTP(rec, req)
			if rec.Code != tc.wantCode {
				t.Fatalf("HTTP %d %s, want %d", rec.Code, rec.Body, tc.wantCode)
			}
			if tc.wantCode == http.StatusOK {
				if got != tc.body {
					t.Errorf("the handler read %d bytes, want the body's %d", len(got), len(tc.body))
				}
				return
			}
			var status struct {
				Kind, Message string
				Code          int
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &status); err != nil || status.Kind != "Status" || status.Code != tc.wantCode {
				t.Errorf("answer %s, want a Status %d", rec.Body, tc.wantCode)
			}
			if tc.wantCode == http.StatusBadRequest && !strings.Contains(status.Message, "levels deep; at most 100 are allowed") {
				t.Errorf("message %q does not say how deep it may be", status.Message)
			}
		})
	}
}
