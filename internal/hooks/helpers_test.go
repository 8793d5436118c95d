package hooks

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
)

// fakeSecrets is an in-memory SecretSource keyed by "namespace/name".
type fakeSecrets struct {
	secrets    map[string]map[string][]byte
	configMaps map[string]map[string]string
}

func (f *fakeSecrets) SecretData(_ context.Context, namespace, name string) (map[string][]byte, error) {
	d, ok := f.secrets[namespace+"/"+name]
	if !ok {
		return nil, fmt.Errorf("secret %s/%s not found", namespace, name)
	}
	return d, nil
}

func (f *fakeSecrets) ConfigMapData(_ context.Context, namespace, name string) (map[string]string, error) {
	d, ok := f.configMaps[namespace+"/"+name]
	if !ok {
		return nil, fmt.Errorf("configmap %s/%s not found", namespace, name)
	}
	return d, nil
}

// testCA is a private certificate authority.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a leaf certificate: a server certificate for 127.0.0.1, or a
// client certificate.
func (ca *testCA) issue(t *testing.T, cn string, server bool) (certPEM, keyPEM []byte, pair tls.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	pair, err = tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return certPEM, keyPEM, pair
}

// newTLSServer serves h over TLS with a certificate from ca. With clientCA,
// it requires a client certificate issued by it.
func newTLSServer(t *testing.T, ca *testCA, clientCA *testCA, h http.Handler) *httptest.Server {
	t.Helper()
	_, _, pair := ca.issue(t, "hook", true)
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}}
	if clientCA != nil {
		pool := x509.NewCertPool()
		pool.AddCert(clientCA.cert)
		srv.TLS.ClientCAs = pool
		srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
	}
	// Failed handshakes are what some tests are about; keep them out of the
	// test log.
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// okHandler answers a fixed, valid sync response.
func okHandler(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, body)
	}
}

const okBody = `{"status":{"ready":true},"children":[],"resyncAfterSeconds":0,"finalized":false}`

func ptr[T any](v T) *T { return &v }

func urlHook(u string) *v1alpha1.Webhook {
	return &v1alpha1.Webhook{URL: &u}
}

// mustNew builds a Webhook for controller "c" and hook "sync" unless cfg
// says otherwise.
// resolved is wh resolved as a hook of version, as a compiled definition
// hands it to New.
func resolved(t *testing.T, version v1alpha1.HookVersion, wh *v1alpha1.Webhook) *definition.Hook {
	t.Helper()
	h, err := definition.ResolveHook("sync", &version, wh)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func mustNew(t testing.TB, cfg Config) *Webhook {
	t.Helper()
	if cfg.Controller == "" {
		cfg.Controller = "c"
	}
	if cfg.Hook == "" {
		cfg.Hook = "sync"
	}
	w, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(w.CloseIdleConnections)
	return w
}
