package hooks

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

// authServer answers 200 only to requests with the Authorization header
// want, and 401 otherwise.
func authServer(t *testing.T, want string) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Authorization"); got != want {
			http.Error(w, "unauthorized: got "+got, http.StatusUnauthorized)
			return
		}
		okHandler(okBody)(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

var authSecrets = &fakeSecrets{secrets: map[string]map[string][]byte{
	"sys/token": {"token": []byte("s3cret\n")},
	"sys/basic": {"username": []byte("admin"), "password": []byte("pa:ss\n"), "u": []byte("other"), "p": []byte("pw")},
}}

func TestBearerAuthorizationFromSecret(t *testing.T) {
	srv := authServer(t, "Bearer s3cret")
	wh := urlHook(srv.URL)
	wh.Authorization = &v1alpha1.AuthorizationConfig{SecretRef: v1alpha1.KeyReference{Namespace: "sys", Name: "token", Key: "token"}}
	w := mustNew(t, Config{Webhook: wh, Secrets: authSecrets})
	if _, err := w.Sync(context.Background(), syncRequest()); err != nil {
		t.Fatal(err)
	}
}

func TestCustomAuthorizationType(t *testing.T) {
	srv := authServer(t, "Token s3cret")
	wh := urlHook(srv.URL)
	wh.Authorization = &v1alpha1.AuthorizationConfig{Type: "Token", SecretRef: v1alpha1.KeyReference{Namespace: "sys", Name: "token", Key: "token"}}
	w := mustNew(t, Config{Webhook: wh, Secrets: authSecrets})
	if _, err := w.Sync(context.Background(), syncRequest()); err != nil {
		t.Fatal(err)
	}
}

func TestBasicAuthFromSecret(t *testing.T) {
	for _, tc := range []struct {
		name         string
		userKey, pwd string
		wantUser     string
		wantPassword string
	}{
		{"default keys", "", "", "admin", "pa:ss"},
		{"named keys", "u", "p", "other", "pw"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var gotUser, gotPassword string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				gotUser, gotPassword, _ = r.BasicAuth()
				okHandler(okBody)(w, r)
			}))
			defer srv.Close()
			wh := urlHook(srv.URL)
			wh.BasicAuth = &v1alpha1.BasicAuthConfig{SecretRef: v1alpha1.SecretReference{Namespace: "sys", Name: "basic"}, UsernameKey: tc.userKey, PasswordKey: tc.pwd}
			w := mustNew(t, Config{Webhook: wh, Secrets: authSecrets})
			if _, err := w.Sync(context.Background(), syncRequest()); err != nil {
				t.Fatal(err)
			}
			if gotUser != tc.wantUser || gotPassword != tc.wantPassword {
				t.Errorf("hook got %q:%q, want %q:%q", gotUser, gotPassword, tc.wantUser, tc.wantPassword)
			}
		})
	}
}

func TestAuthConfigErrors(t *testing.T) {
	tokenRef := v1alpha1.KeyReference{Namespace: "sys", Name: "token", Key: "token"}
	for _, tc := range []struct {
		name    string
		set     func(*v1alpha1.Webhook)
		secrets SecretSource
		want    string
	}{
		{"authorization and basicAuth together", func(w *v1alpha1.Webhook) {
			w.Authorization = &v1alpha1.AuthorizationConfig{SecretRef: tokenRef}
			w.BasicAuth = &v1alpha1.BasicAuthConfig{SecretRef: v1alpha1.SecretReference{Namespace: "sys", Name: "basic"}}
		}, authSecrets, "mutually exclusive"},
		{"authorization type Basic", func(w *v1alpha1.Webhook) {
			w.Authorization = &v1alpha1.AuthorizationConfig{Type: "basic", SecretRef: tokenRef}
		}, authSecrets, "use basicAuth"},
		{"authorization without a key", func(w *v1alpha1.Webhook) {
			w.Authorization = &v1alpha1.AuthorizationConfig{SecretRef: v1alpha1.KeyReference{Namespace: "sys", Name: "token"}}
		}, authSecrets, "needs a key"},
		{"credential that would inject a header", func(w *v1alpha1.Webhook) {
			w.Authorization = &v1alpha1.AuthorizationConfig{SecretRef: v1alpha1.KeyReference{Namespace: "sys", Name: "evil", Key: "token"}}
		}, &fakeSecrets{secrets: map[string]map[string][]byte{"sys/evil": {"token": []byte("a\r\nX-Evil: 1")}}}, "not a valid header value"},
		{"Secret without a target cluster", func(w *v1alpha1.Webhook) {
			w.Authorization = &v1alpha1.AuthorizationConfig{SecretRef: tokenRef}
		}, nil, "needs a target cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wh := urlHook("http://127.0.0.1:1/")
			tc.set(wh)
			_, err := New(context.Background(), Config{Controller: "c", Hook: "sync", Webhook: wh, Secrets: tc.secrets})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestEndpointConfigs(t *testing.T) {
	srv := authServer(t, "Bearer s3cret")
	host := strings.TrimPrefix(srv.URL, "http://")
	endpoints := []v1alpha1.EndpointConfig{
		{Host: "unrelated.example"},
		{Host: strings.ToUpper("LOCALHOST") + ":1"},
		{Host: host, Authorization: &v1alpha1.AuthorizationConfig{SecretRef: v1alpha1.KeyReference{Namespace: "sys", Name: "token", Key: "token"}}},
	}

	t.Run("applies to a webhook without its own settings", func(t *testing.T) {
		w := mustNew(t, Config{Webhook: urlHook(srv.URL + "/sync"), EndpointConfigs: endpoints, Secrets: authSecrets})
		if _, err := w.Sync(context.Background(), syncRequest()); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("is ignored when the webhook has its own", func(t *testing.T) {
		wh := urlHook(srv.URL + "/sync")
		wh.BasicAuth = &v1alpha1.BasicAuthConfig{SecretRef: v1alpha1.SecretReference{Namespace: "sys", Name: "basic"}}
		w := mustNew(t, Config{Webhook: wh, EndpointConfigs: endpoints, Secrets: authSecrets})
		_, err := w.Sync(context.Background(), syncRequest())
		if err == nil || !strings.Contains(err.Error(), "401") || !strings.Contains(err.Error(), "got Basic ") {
			t.Fatalf("want the webhook's own basic auth and a 401, got %v", err)
		}
	})

	t.Run("is ignored for another host", func(t *testing.T) {
		w := mustNew(t, Config{Webhook: urlHook("http://127.0.0.2:1/"), EndpointConfigs: endpoints, Secrets: NoClusterSecretSource{}})
		if w.authHeader != "" {
			t.Errorf("auth header %q, want none", w.authHeader)
		}
	})
}

func TestMatchEndpointConfig(t *testing.T) {
	for _, tc := range []struct {
		url, host string
		want      bool
	}{
		{"https://hook.ns.svc/x", "hook.ns.svc", true},
		{"https://hook.ns.svc/x", "HOOK.NS.SVC", true},
		{"https://hook.ns.svc/x", "hook.ns.svc:443", true},
		{"https://hook.ns.svc:443/x", "hook.ns.svc", true},
		{"http://hook.ns.svc/x", "hook.ns.svc:80", true},
		{"http://hook.ns.svc:80/x", "hook.ns.svc", true},
		{"http://hook.ns.svc/x", "hook.ns.svc:443", false},
		{"https://hook.ns.svc:8443/x", "hook.ns.svc", false},
		{"https://hook.ns.svc:8443/x", "hook.ns.svc:8443", true},
		{"https://hook.ns.svc/x", "hook.ns", false},
		{"http://[::1]:8080/x", "[::1]:8080", true},
		{"http://[::1]/x", "::1", true},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		got := matchEndpointConfig(u, []v1alpha1.EndpointConfig{{Host: tc.host}}) != nil
		if got != tc.want {
			t.Errorf("URL %s, endpoint host %q: match = %v, want %v", tc.url, tc.host, got, tc.want)
		}
	}
}
