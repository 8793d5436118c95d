package hooks

import (
	"context"
	"crypto/x509"
	"errors"
	"strings"
	"testing"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
)

func TestPrivateCAFromInlineCABundle(t *testing.T) {
	ca := newTestCA(t, "hook-ca")
	srv := newTLSServer(t, ca, nil, okHandler(okBody))

	t.Run("trusted with the caBundle", func(t *testing.T) {
		wh := urlHook(srv.URL)
		wh.CABundle = &v1alpha1.CABundleConfig{Inline: ptr(string(ca.pem))}
		w := mustNew(t, Config{Webhook: wh})
		if _, err := w.Sync(context.Background(), syncRequest()); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("rejected with system roots", func(t *testing.T) {
		w := mustNew(t, Config{Webhook: urlHook(srv.URL)})
		_, err := w.Sync(context.Background(), syncRequest())
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) {
			t.Fatalf("want an x509 unknown authority error, got %v", err)
		}
		if !strings.Contains(err.Error(), "x509") {
			t.Errorf("error %q does not mention x509", err)
		}
		var ce *CallError
		if !errors.As(err, &ce) || ce.Reason != ReasonTransport {
			t.Errorf("want reason transport, got %#v", ce)
		}
	})

	t.Run("rejected with another CA's bundle", func(t *testing.T) {
		wh := urlHook(srv.URL)
		wh.CABundle = &v1alpha1.CABundleConfig{Inline: ptr(string(newTestCA(t, "other").pem))}
		w := mustNew(t, Config{Webhook: wh})
		_, err := w.Sync(context.Background(), syncRequest())
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) {
			t.Fatalf("want an x509 unknown authority error, got %v", err)
		}
	})
}

func TestCABundleFromSecretAndConfigMap(t *testing.T) {
	ca := newTestCA(t, "hook-ca")
	srv := newTLSServer(t, ca, nil, okHandler(okBody))
	secrets := &fakeSecrets{
		secrets:    map[string]map[string][]byte{"sys/ca": {"ca.crt": ca.pem, "other.pem": ca.pem}},
		configMaps: map[string]map[string]string{"sys/ca": {"ca.crt": string(ca.pem)}},
	}
	for _, tc := range []struct {
		name string
		ca   *v1alpha1.CABundleConfig
	}{
		{"Secret with the default key", &v1alpha1.CABundleConfig{SecretRef: &v1alpha1.KeyReference{Namespace: "sys", Name: "ca"}}},
		{"Secret with a named key", &v1alpha1.CABundleConfig{SecretRef: &v1alpha1.KeyReference{Namespace: "sys", Name: "ca", Key: "other.pem"}}},
		{"ConfigMap with the default key", &v1alpha1.CABundleConfig{ConfigMapRef: &v1alpha1.KeyReference{Namespace: "sys", Name: "ca"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wh := urlHook(srv.URL)
			wh.CABundle = tc.ca
			w := mustNew(t, Config{Webhook: wh, Secrets: secrets})
			if _, err := w.Sync(context.Background(), syncRequest()); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestMutualTLS(t *testing.T) {
	serverCA := newTestCA(t, "server-ca")
	clientCA := newTestCA(t, "client-ca")
	srv := newTLSServer(t, serverCA, clientCA, okHandler(okBody))
	certPEM, keyPEM, _ := clientCA.issue(t, "composite-apiserver", false)
	secrets := &fakeSecrets{secrets: map[string]map[string][]byte{
		"sys/client": {"tls.crt": certPEM, "tls.key": keyPEM},
	}}

	t.Run("works with clientTLS", func(t *testing.T) {
		wh := urlHook(srv.URL)
		wh.CABundle = &v1alpha1.CABundleConfig{Inline: ptr(string(serverCA.pem))}
		wh.ClientTLS = &v1alpha1.ClientTLSConfig{SecretRef: v1alpha1.SecretReference{Namespace: "sys", Name: "client"}}
		w := mustNew(t, Config{Webhook: wh, Secrets: secrets})
		if _, err := w.Sync(context.Background(), syncRequest()); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("fails without clientTLS", func(t *testing.T) {
		wh := urlHook(srv.URL)
		wh.CABundle = &v1alpha1.CABundleConfig{Inline: ptr(string(serverCA.pem))}
		w := mustNew(t, Config{Webhook: wh, Secrets: secrets})
		_, err := w.Sync(context.Background(), syncRequest())
		var ce *CallError
		if !errors.As(err, &ce) || ce.Reason != ReasonTransport {
			t.Fatalf("want a transport error, got %v", err)
		}
	})
}

func TestTLSMaterialErrors(t *testing.T) {
	ca := newTestCA(t, "ca")
	certPEM, _, _ := ca.issue(t, "client", false)
	secrets := &fakeSecrets{secrets: map[string]map[string][]byte{
		"sys/client": {"tls.crt": certPEM, "tls.key": []byte("not a key")},
		"sys/empty":  {},
	}}
	for _, tc := range []struct {
		name string
		set  func(*v1alpha1.Webhook)
		want string
	}{
		{"inline caBundle without certificates", func(w *v1alpha1.Webhook) {
			w.CABundle = &v1alpha1.CABundleConfig{Inline: ptr("garbage")}
		}, "can't resolve caBundle: no PEM certificates found"},
		{"caBundle with two sources", func(w *v1alpha1.Webhook) {
			w.CABundle = &v1alpha1.CABundleConfig{Inline: ptr(string(ca.pem)), ConfigMapRef: &v1alpha1.KeyReference{Namespace: "sys", Name: "x"}}
		}, "exactly one of inline, secretRef and configMapRef"},
		{"caBundle Secret without the key", func(w *v1alpha1.Webhook) {
			w.CABundle = &v1alpha1.CABundleConfig{SecretRef: &v1alpha1.KeyReference{Namespace: "sys", Name: "empty"}}
		}, `Secret sys/empty has no key "ca.crt"`},
		{"missing Secret", func(w *v1alpha1.Webhook) {
			w.CABundle = &v1alpha1.CABundleConfig{SecretRef: &v1alpha1.KeyReference{Namespace: "sys", Name: "nope"}}
		}, "secret sys/nope not found"},
		{"clientTLS with a bad key", func(w *v1alpha1.Webhook) {
			w.ClientTLS = &v1alpha1.ClientTLSConfig{SecretRef: v1alpha1.SecretReference{Namespace: "sys", Name: "client"}}
		}, "can't load certificate and key from Secret sys/client"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wh := urlHook("https://127.0.0.1:1/")
			tc.set(wh)
			_, err := New(context.Background(), Config{Controller: "c", Hook: "sync", Webhook: wh, Secrets: secrets})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if !strings.HasPrefix(err.Error(), `can't configure CompositeController "c" sync hook: `) {
				t.Errorf("error %q does not name the controller and hook", err)
			}
		})
	}
}
