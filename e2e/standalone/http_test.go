package standalone

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func TestRequestsWithoutTheTokenAreUnauthorized(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	c := newAPIClient(t, s.kubeconfig)

	// The same client with the right token gets through: the 401s below
	// are about the token, not about TLS or the address.
	if r := c.do(t, http.MethodGet, ccPath(""), c.token, "", nil); r.code != http.StatusOK {
		t.Fatalf("GET %s with the kubeconfig's token: HTTP %d, want 200: %.500s", ccPath(""), r.code, r.body)
	}

	for _, tc := range []struct {
		name, token string
	}{
		{"no token", ""},
		{"wrong token", "not-the-" + c.token},
	} {
		for _, path := range []string{ccPath(""), ccPath("any"), "/healthz", "/readyz", "/livez", "/version", "/apis", "/openapi/v2"} {
			t.Run(tc.name+" "+path, func(t *testing.T) {
				r := c.do(t, http.MethodGet, path, tc.token, "", nil)
				if r.code != http.StatusUnauthorized {
					t.Fatalf("HTTP %d, want 401: %.500s", r.code, r.body)
				}
				if st := r.status(t); st.Reason != "Unauthorized" || st.Code != http.StatusUnauthorized {
					t.Errorf("Status reason %q code %d, want Unauthorized 401", st.Reason, st.Code)
				}
			})
		}
	}

	t.Run("no token cannot create", func(t *testing.T) {
		body := ccJSON(t, "unauthorized-create", nil)
		if r := c.do(t, http.MethodPost, ccPath(""), "", "application/json", body); r.code != http.StatusUnauthorized {
			t.Errorf("POST without a token: HTTP %d, want 401: %.500s", r.code, r.body)
		}
		expectNotFound(t, s, "unauthorized-create")
	})
}

// ccJSON is a valid CompositeController named name as JSON, with
// annotations.
func ccJSON(t *testing.T, name string, annotations map[string]string) []byte {
	t.Helper()
	obj := map[string]any{
		"apiVersion": "metacontroller.k8s.io/v1alpha1",
		"kind":       "CompositeController",
		"metadata":   map[string]any{"name": name, "annotations": annotations},
		"spec": map[string]any{
			"parentResource": map[string]any{"apiVersion": "example.com/v1", "resource": "hellos"},
			"hooks":          map[string]any{"sync": map[string]any{"webhook": map[string]any{"url": "http://hello.example.com/sync"}}},
		},
	}
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestMalformedRequestsGetClientErrorsAndServerKeepsServing(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	c := newAPIClient(t, s.kubeconfig)
	existing := uniqueName("malformed-target")
	s.mustKubectl(t, "create", "-f", writeManifest(t, ccManifest(existing, "http://hello.example.com/sync", "")))

	configMap := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"not-a-cc"},"data":{"a":"b"}}`)
	deep := []byte(`{"apiVersion":"metacontroller.k8s.io/v1alpha1","kind":"CompositeController","metadata":{"name":"deep"},"spec":` +
		strings.Repeat("[", 100000) + strings.Repeat("]", 100000) + `}`)
	var yamlBomb strings.Builder
	yamlBomb.WriteString(`a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]` + "\n")
	for i := 1; i < 10; i++ {
		fmt.Fprintf(&yamlBomb, "a%d: &a%d [%s]\n", i, i, strings.TrimSuffix(strings.Repeat(fmt.Sprintf("*a%d,", i-1), 10), ","))
	}

	for _, tc := range []struct {
		name, method, path, contentType string
		body                            []byte
	}{
		{"garbage", http.MethodPost, ccPath(""), "application/json", []byte("not json{")},
		{"wrong kind", http.MethodPost, ccPath(""), "application/json", configMap},
		{"3 MiB object", http.MethodPost, ccPath(""), "application/json", ccJSON(t, "too-big", map[string]string{"big": strings.Repeat("x", 3<<20)})},
		{"deeply nested JSON", http.MethodPost, ccPath(""), "application/json", deep},
		{"YAML alias bomb", http.MethodPost, ccPath(""), "application/yaml", []byte(yamlBomb.String())},
		{"garbage merge patch", http.MethodPatch, ccPath(existing), "application/merge-patch+json", []byte("not json{")},
		{"garbage status update", http.MethodPut, ccPath(existing) + "/status", "application/json", []byte("not json{")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := c.do(t, tc.method, tc.path, c.token, tc.contentType, tc.body)
			if r.code < 400 || r.code >= 500 {
				t.Fatalf("%s %s: HTTP %d, want a 4xx: %.500s", tc.method, tc.path, r.code, r.body)
			}
			st := r.status(t)
			if st.Message == "" || st.Code != r.code || st.Status != "Failure" {
				t.Errorf("Status = %+v, want a Failure with a message and code %d", st, r.code)
			}
			if !s.running() {
				t.Fatalf("composite-apiserver exited")
			}
		})
	}

	if r := c.do(t, http.MethodGet, "/readyz", c.token, "", nil); r.code != http.StatusOK {
		t.Errorf("/readyz after the bad requests: HTTP %d: %s", r.code, r.body)
	}
	if r := c.do(t, http.MethodGet, ccPath(""), c.token, "", nil); r.code != http.StatusOK {
		t.Errorf("list after the bad requests: HTTP %d: %.500s", r.code, r.body)
	}
	for _, name := range []string{"too-big", "deep", "not-a-cc"} {
		if r := c.do(t, http.MethodGet, ccPath(name), c.token, "", nil); r.code != http.StatusNotFound {
			t.Errorf("GET %s after its bad create: HTTP %d, want 404", name, r.code)
		}
	}
	tbl := parseTable(t, s.mustKubectl(t, "get", "cc"))
	if row := tbl.row(t, existing); row["SYNC HOOK"] != "http://hello.example.com/sync" {
		t.Errorf("%s after the bad patches: %v", existing, row)
	}
}
