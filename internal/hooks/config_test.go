package hooks

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

func TestServiceReferenceBuildsInClusterURL(t *testing.T) {
	for _, tc := range []struct {
		name string
		svc  v1alpha1.ServiceReference
		path *string
		want string
	}{
		{"defaults to http on port 80", v1alpha1.ServiceReference{Name: "hook", Namespace: "ns"}, ptr("/sync"), "http://hook.ns:80/sync"},
		{"https on a named port", v1alpha1.ServiceReference{Name: "hook", Namespace: "ns", Port: ptr[int32](8443), Protocol: ptr("https")}, ptr("/v2/sync"), "https://hook.ns:8443/v2/sync"},
		{"no path", v1alpha1.ServiceReference{Name: "hook", Namespace: "ns"}, nil, "http://hook.ns:80"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := tc.svc
			w := mustNew(t, Config{Webhook: &v1alpha1.Webhook{Service: &svc, Path: tc.path}})
			if w.URL() != tc.want {
				t.Errorf("URL() = %q, want %q", w.URL(), tc.want)
			}
		})
	}
}

func TestURLOverridesServiceAndPath(t *testing.T) {
	// As in Metacontroller: validation warns, the call goes to url.
	w := mustNew(t, Config{Webhook: &v1alpha1.Webhook{URL: ptr("http://x/sync"),
		Service: &v1alpha1.ServiceReference{Name: "hook", Namespace: "ns"}, Path: ptr("/other")}})
	if w.URL() != "http://x/sync" {
		t.Errorf("URL() = %q, want the url as given", w.URL())
	}
}

func TestTimeoutDefaultsTo10s(t *testing.T) {
	w := mustNew(t, Config{Webhook: urlHook("http://hook/")})
	if w.Timeout() != 10*time.Second {
		t.Errorf("Timeout() = %s, want 10s", w.Timeout())
	}
	wh := urlHook("http://hook/")
	wh.Timeout = &metav1.Duration{Duration: 3 * time.Second}
	if w := mustNew(t, Config{Webhook: wh}); w.Timeout() != 3*time.Second {
		t.Errorf("Timeout() = %s, want 3s", w.Timeout())
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	svc := &v1alpha1.ServiceReference{Name: "hook", Namespace: "ns"}
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"no webhook", Config{}, "webhook is required"},
		{"neither url nor service", Config{Webhook: &v1alpha1.Webhook{}}, "one of url and service is required"},
		{"relative url", Config{Webhook: urlHook("/sync")}, "must use http or https"},
		{"ftp url", Config{Webhook: urlHook("ftp://x/")}, "must use http or https"},
		{"url without host", Config{Webhook: urlHook("http:///sync")}, "has no host"},
		{"service without namespace", Config{Webhook: &v1alpha1.Webhook{Service: &v1alpha1.ServiceReference{Name: "hook"}}}, "name and namespace are required"},
		{"service with a bad port", Config{Webhook: &v1alpha1.Webhook{Service: &v1alpha1.ServiceReference{Name: "hook", Namespace: "ns", Port: ptr[int32](0)}}}, "not in 1-65535"},
		{"service with a bad protocol", Config{Webhook: &v1alpha1.Webhook{Service: &v1alpha1.ServiceReference{Name: "hook", Namespace: "ns", Protocol: ptr("grpc")}}}, "must use http or https"},
		{"path without slash", Config{Webhook: &v1alpha1.Webhook{Service: svc, Path: ptr("sync")}}, "must start with /"},
		{"unknown unmarshal mode", Config{Webhook: &v1alpha1.Webhook{URL: ptr("http://x/"), ResponseUnMarshallMode: ptr[v1alpha1.ResponseUnmarshallMode]("lenient")}}, "unsupported responseUnMarshallMode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := tc.cfg
			cfg.Controller, cfg.Hook = "c", "sync"
			_, err := New(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestURLCredentialsAreRedactedInErrors(t *testing.T) {
	w := mustNew(t, Config{Webhook: urlHook("http://user:hunter2@127.0.0.1:1/sync")})
	_, err := w.Sync(context.Background(), syncRequest())
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %v leaks the URL's password", err)
	}
}

func TestServiceURLMatchesMetacontrollerEndpointConfigHosts(t *testing.T) {
	token := &v1alpha1.AuthorizationConfig{SecretRef: v1alpha1.KeyReference{Namespace: "sys", Name: "token", Key: "token"}}
	for _, tc := range []struct {
		name     string
		svc      v1alpha1.ServiceReference
		host     string
		wantAuth bool
	}{
		{"name.namespace:port", v1alpha1.ServiceReference{Name: "hook", Namespace: "ns", Port: ptr[int32](8443), Protocol: ptr("https")}, "hook.ns:8443", true},
		{"default port 80 over http", v1alpha1.ServiceReference{Name: "hook", Namespace: "ns"}, "hook.ns", true},
		{"default port 80 spelled out", v1alpha1.ServiceReference{Name: "hook", Namespace: "ns"}, "hook.ns:80", true},
		{"a .svc host is another host", v1alpha1.ServiceReference{Name: "hook", Namespace: "ns"}, "hook.ns.svc:80", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			svc := tc.svc
			w := mustNew(t, Config{
				Webhook:         &v1alpha1.Webhook{Service: &svc, Path: ptr("/sync")},
				EndpointConfigs: []v1alpha1.EndpointConfig{{Host: tc.host, Authorization: token}},
				Secrets:         authSecrets,
			})
			if got := w.authHeader != ""; got != tc.wantAuth {
				t.Errorf("endpointConfigs host %q applied to %s: %v, want %v", tc.host, w.URL(), got, tc.wantAuth)
			}
		})
	}
}
