package hooks

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/internal/definition"
)

const (
	// DefaultTimeout is a call's timeout when the webhook sets none,
	// Metacontroller's default.
	DefaultTimeout = definition.DefaultHookTimeout
	// DefaultMaxResponseBytes bounds a hook's answer when Config sets no
	// limit. Answers are held in memory whole, and a hook that streams
	// forever must not take the server down.
	DefaultMaxResponseBytes int64 = 16 << 20
)

// Config says which hook to call and how. New resolves it once.
type Config struct {
	// Controller is the controller's name, for errors and metrics.
	Controller string
	// ControllerKind is its kind, for metrics; empty means
	// CompositeController.
	ControllerKind string
	// Hook is the hook's role: "sync", "customize", "finalize" or, for a
	// patch hook, "patch:<name>" (definition.PatchHookName).
	Hook string
	// Webhook is where and how the hook is called.
	Webhook *v1alpha1.Webhook
	// Resolved is the hook as a compiled definition resolved it (its
	// version, decoding mode and timeout). Without it, New resolves
	// Webhook as a v1 hook's with definition.ResolveHook, the one place a
	// hook is defaulted.
	Resolved *definition.Hook
	// EndpointConfigs are the controller's per-host connection settings.
	EndpointConfigs []v1alpha1.EndpointConfig
	// Secrets resolves secretRef and configMapRef; nil means there is no
	// target cluster (NoClusterSecretSource).
	Secrets SecretSource
	// MaxResponseBytes bounds the answer; zero or less means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
	// Destinations are the address ranges the hook may not be called at,
	// checked when connecting.
	Destinations Destinations
}

// connection is the resolved TLS and authentication material of a webhook.
type connection struct {
	rootCAs    *x509.CertPool // nil: system roots
	clientCert *tls.Certificate
	authHeader string
}

// New resolves cfg once — URL, timeout, TLS material, credentials — and
// returns a Webhook with its own HTTP client. Metacontroller resolves once per
// controller definition too: a rotated Secret takes effect when the
// controller's Webhook is rebuilt, and a missing Secret fails here, visibly,
// rather than on every call.
func New(ctx context.Context, cfg Config) (*Webhook, error) {
	RegisterMetrics()
	w, err := newWebhook(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("can't configure %s %q %s hook: %w", kindOrComposite(cfg.ControllerKind), cfg.Controller, cfg.Hook, err)
	}
	return w, nil
}

// kindOrComposite is a controller's kind, CompositeController when unset.
func kindOrComposite(kind string) string {
	if kind == "" {
		return definition.KindComposite
	}
	return kind
}

func newWebhook(ctx context.Context, cfg Config) (*Webhook, error) {
	if cfg.Webhook == nil {
		return nil, errors.New("webhook is required")
	}
	if cfg.Controller == "" || cfg.Hook == "" {
		return nil, errors.New("controller and hook names are required")
	}
	hook := cfg.Resolved
	if hook == nil {
		var err error
		if hook, err = definition.ResolveHook(cfg.Hook, nil, cfg.Webhook); err != nil {
			return nil, err
		}
	}
	u, err := webhookURL(hook.Webhook)
	if err != nil {
		return nil, err
	}

	maxBytes := cfg.MaxResponseBytes
	if maxBytes <= 0 {
		maxBytes = DefaultMaxResponseBytes
	}

	secrets := cfg.Secrets
	if secrets == nil {
		secrets = NoClusterSecretSource{}
	}
	conn, err := resolveConnection(ctx, secrets, u, cfg.Webhook, cfg.EndpointConfigs)
	if err != nil {
		return nil, err
	}

	return &Webhook{
		controller:       cfg.Controller,
		controllerKind:   kindOrComposite(cfg.ControllerKind),
		hook:             cfg.Hook,
		url:              u.String(),
		displayURL:       u.Redacted(),
		version:          hook.Version,
		strict:           hook.Strict,
		timeout:          hook.Timeout,
		maxResponseBytes: maxBytes,
		authHeader:       conn.authHeader,
		client:           newHTTPClient(conn, cfg.Destinations),
		now:              time.Now,
		etags:            newETagCache(cfg.Webhook.Etag, time.Now),
	}, nil
}

// webhookURL is the hook's URL: url as given, or the service's in-cluster
// DNS name in Metacontroller's form, <protocol>://<name>.<namespace>:<port><path>,
// without ".svc", so that endpointConfigs hosts written for Metacontroller
// match the same hooks here.
func webhookURL(wh *v1alpha1.Webhook) (*url.URL, error) {
	var raw string
	switch {
	case wh.URL != nil:
		// As in Metacontroller, a full url overrides everything else:
		// service and path (validation warns that they are ignored).
		raw = *wh.URL
	case wh.Service != nil:
		svc := wh.Service
		if svc.Name == "" || svc.Namespace == "" {
			return nil, errors.New("service name and namespace are required")
		}
		port := v1alpha1.DefaultServicePort
		if svc.Port != nil {
			port = *svc.Port
		}
		if port < 1 || port > 65535 {
			return nil, fmt.Errorf("service port %d is not in 1-65535", port)
		}
		protocol := v1alpha1.DefaultServiceProtocol
		if svc.Protocol != nil {
			protocol = *svc.Protocol
		}
		path := ""
		if wh.Path != nil {
			path = *wh.Path
		}
		if path != "" && !strings.HasPrefix(path, "/") {
			return nil, fmt.Errorf("path %q must start with /", path)
		}
		host := net.JoinHostPort(svc.Name+"."+svc.Namespace, strconv.Itoa(int(port)))
		raw = protocol + "://" + host + path
	default:
		return nil, errors.New("one of url and service is required")
	}

	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("can't parse hook URL: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("hook URL %q must use http or https", u.Redacted())
	}
	if u.Host == "" {
		return nil, fmt.Errorf("hook URL %q has no host", u.Redacted())
	}
	return u, nil
}

// resolveConnection resolves the TLS and authentication settings: the
// webhook's own if it sets any of them, else those of the first endpoint
// config whose host matches. The two are never merged, as in Metacontroller:
// a webhook that sets only a caBundle must not silently pick up a token meant
// for the host.
func resolveConnection(ctx context.Context, secrets SecretSource, u *url.URL, wh *v1alpha1.Webhook, endpoints []v1alpha1.EndpointConfig) (*connection, error) {
	if wh.CABundle != nil || wh.ClientTLS != nil || wh.Authorization != nil || wh.BasicAuth != nil {
		return resolveFields(ctx, secrets, wh.CABundle, wh.ClientTLS, wh.Authorization, wh.BasicAuth)
	}
	ep := matchEndpointConfig(u, endpoints)
	if ep == nil {
		return &connection{}, nil
	}
	conn, err := resolveFields(ctx, secrets, ep.CABundle, ep.ClientTLS, ep.Authorization, ep.BasicAuth)
	if err != nil {
		return nil, fmt.Errorf("endpointConfigs host %q: %w", ep.Host, err)
	}
	return conn, nil
}

// matchEndpointConfig returns the first endpoint config whose host is the
// URL's host, compared case-insensitively, where an omitted port means the
// scheme's default: "Hook.NS" matches https://hook.ns:443/x and
// "hook.ns:443" matches https://hook.ns/x.
func matchEndpointConfig(u *url.URL, endpoints []v1alpha1.EndpointConfig) *v1alpha1.EndpointConfig {
	defaultPort := "80"
	if u.Scheme == "https" {
		defaultPort = "443"
	}
	port := u.Port()
	if port == "" {
		port = defaultPort
	}
	want := canonicalHostPort(u.Hostname(), port)
	for i := range endpoints {
		if canonicalHost(endpoints[i].Host, defaultPort) == want {
			return &endpoints[i]
		}
	}
	return nil
}

func canonicalHost(hostport, defaultPort string) string {
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		// No port; a bare IPv6 address may still be bracketed.
		host, port = strings.TrimSuffix(strings.TrimPrefix(hostport, "["), "]"), defaultPort
	}
	return canonicalHostPort(host, port)
}

func canonicalHostPort(host, port string) string {
	return strings.ToLower(net.JoinHostPort(host, port))
}

func resolveFields(ctx context.Context, secrets SecretSource, ca *v1alpha1.CABundleConfig, clientTLS *v1alpha1.ClientTLSConfig, authz *v1alpha1.AuthorizationConfig, basic *v1alpha1.BasicAuthConfig) (*connection, error) {
	if authz != nil && basic != nil {
		return nil, errors.New("authorization and basicAuth are mutually exclusive")
	}
	conn := &connection{}
	var err error
	if ca != nil {
		if conn.rootCAs, err = resolveCABundle(ctx, secrets, ca); err != nil {
			return nil, fmt.Errorf("can't resolve caBundle: %w", err)
		}
	}
	if clientTLS != nil {
		if conn.clientCert, err = resolveClientTLS(ctx, secrets, clientTLS); err != nil {
			return nil, fmt.Errorf("can't resolve clientTLS: %w", err)
		}
	}
	switch {
	case authz != nil:
		if conn.authHeader, err = resolveAuthorization(ctx, secrets, authz); err != nil {
			return nil, fmt.Errorf("can't resolve authorization: %w", err)
		}
	case basic != nil:
		if conn.authHeader, err = resolveBasicAuth(ctx, secrets, basic); err != nil {
			return nil, fmt.Errorf("can't resolve basicAuth: %w", err)
		}
	}
	return conn, nil
}

func resolveCABundle(ctx context.Context, secrets SecretSource, ca *v1alpha1.CABundleConfig) (*x509.CertPool, error) {
	n := 0
	for _, set := range []bool{ca.Inline != nil, ca.SecretRef != nil, ca.ConfigMapRef != nil} {
		if set {
			n++
		}
	}
	if n != 1 {
		return nil, errors.New("exactly one of inline, secretRef and configMapRef is required")
	}

	var pemData []byte
	switch {
	case ca.Inline != nil:
		pemData = []byte(*ca.Inline)
	case ca.SecretRef != nil:
		ref := ca.SecretRef
		data, err := secrets.SecretData(ctx, ref.Namespace, ref.Name)
		if err != nil {
			return nil, err
		}
		if pemData, err = lookup(data, "Secret", ref.Namespace, ref.Name, keyOr(ref.Key, v1alpha1.DefaultCABundleKey)); err != nil {
			return nil, err
		}
	default:
		ref := ca.ConfigMapRef
		data, err := secrets.ConfigMapData(ctx, ref.Namespace, ref.Name)
		if err != nil {
			return nil, err
		}
		key := keyOr(ref.Key, v1alpha1.DefaultCABundleKey)
		s, ok := data[key]
		if !ok {
			return nil, fmt.Errorf("ConfigMap %s/%s has no key %q", ref.Namespace, ref.Name, key)
		}
		pemData = []byte(s)
	}

	// Only these CAs are trusted, not the system's: a private CA for
	// in-cluster hooks must not widen trust to every public CA, nor the
	// other way round.
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pemData) {
		return nil, errors.New("no PEM certificates found")
	}
	return pool, nil
}

func resolveClientTLS(ctx context.Context, secrets SecretSource, c *v1alpha1.ClientTLSConfig) (*tls.Certificate, error) {
	ref := c.SecretRef
	data, err := secrets.SecretData(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return nil, err
	}
	certPEM, err := lookup(data, "Secret", ref.Namespace, ref.Name, keyOr(c.CertKey, v1alpha1.DefaultClientTLSCertKey))
	if err != nil {
		return nil, err
	}
	keyPEM, err := lookup(data, "Secret", ref.Namespace, ref.Name, keyOr(c.PrivateKeyKey, v1alpha1.DefaultClientTLSPrivateKeyKey))
	if err != nil {
		return nil, err
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("can't load certificate and key from Secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	return &cert, nil
}

func resolveAuthorization(ctx context.Context, secrets SecretSource, a *v1alpha1.AuthorizationConfig) (string, error) {
	typ := strings.TrimSpace(keyOr(a.Type, v1alpha1.DefaultAuthorizationType))
	if strings.EqualFold(typ, "Basic") {
		return "", errors.New(`type "Basic" is not supported: use basicAuth`)
	}
	if !httpguts.ValidHeaderFieldName(typ) {
		return "", fmt.Errorf("type %q is not a valid authorization scheme", typ)
	}
	ref := a.SecretRef
	if ref.Key == "" {
		return "", fmt.Errorf("secretRef to Secret %s/%s needs a key", ref.Namespace, ref.Name)
	}
	data, err := secrets.SecretData(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return "", err
	}
	raw, err := lookup(data, "Secret", ref.Namespace, ref.Name, ref.Key)
	if err != nil {
		return "", err
	}
	// Secrets written with "echo" end with a newline that is not part of
	// the credential.
	credential := strings.TrimSpace(string(raw))
	// Control characters are refused, so that a credential cannot inject
	// headers and fails at configuration rather than on every call.
	if credential == "" || !httpguts.ValidHeaderFieldValue(credential) {
		return "", fmt.Errorf("key %q of Secret %s/%s is empty or not a valid header value", ref.Key, ref.Namespace, ref.Name)
	}
	return typ + " " + credential, nil
}

func resolveBasicAuth(ctx context.Context, secrets SecretSource, b *v1alpha1.BasicAuthConfig) (string, error) {
	ref := b.SecretRef
	data, err := secrets.SecretData(ctx, ref.Namespace, ref.Name)
	if err != nil {
		return "", err
	}
	user, err := lookup(data, "Secret", ref.Namespace, ref.Name, keyOr(b.UsernameKey, v1alpha1.DefaultBasicAuthUsernameKey))
	if err != nil {
		return "", err
	}
	password, err := lookup(data, "Secret", ref.Namespace, ref.Name, keyOr(b.PasswordKey, v1alpha1.DefaultBasicAuthPasswordKey))
	if err != nil {
		return "", err
	}
	u, p := strings.TrimSpace(string(user)), strings.TrimSpace(string(password))
	if strings.Contains(u, ":") {
		// RFC 7617: the user-id cannot contain a colon.
		return "", fmt.Errorf("username in Secret %s/%s contains a colon", ref.Namespace, ref.Name)
	}
	return "Basic " + base64.StdEncoding.EncodeToString([]byte(u+":"+p)), nil
}

func lookup(data map[string][]byte, kind, namespace, name, key string) ([]byte, error) {
	v, ok := data[key]
	if !ok {
		return nil, fmt.Errorf("%s %s/%s has no key %q", kind, namespace, name, key)
	}
	return v, nil
}

func keyOr(key, def string) string {
	if key == "" {
		return def
	}
	return key
}

// hookWriteBufferSize is the size of each hook connection's write buffer:
// a B2 parent's request (ten observed ConfigMaps, some KiB) fits. It
// lives as long as the connection, up to 16 idle ones per hook, so it is
// no larger than that (BenchmarkWebhookSync: 16, 32 and 64 KiB as fast).
const hookWriteBufferSize = 16 << 10

// newHTTPClient builds a client for one webhook. It is not shared so that
// one hook's TLS material and connection pool never serve another.
func newHTTPClient(conn *connection, dest Destinations) *http.Client {
	tlsConfig := &tls.Config{
		MinVersion: tls.VersionTLS12,
		RootCAs:    conn.rootCAs,
	}
	if conn.clientCert != nil {
		tlsConfig.Certificates = []tls.Certificate{*conn.clientCert}
	}
	transport := &http.Transport{
		// Hooks run in or next to the cluster; a proxy from the server's
		// environment would route them through a third party.
		Proxy: nil,
		DialContext: (&net.Dialer{
			Timeout:   30 * time.Second,
			KeepAlive: 30 * time.Second,
			// Every address a name resolves to is checked as it is
			// dialled: a name that resolves to a denied range later,
			// or only sometimes, is refused too.
			Control: dest.control,
		}).DialContext,
		TLSClientConfig:       tlsConfig,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   16, // several workers call the same hook at once
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
		// A sync request (the parent and every observed child) is some
		// kilobytes to a few hundred. With the default 4 KiB buffer, an
		// HTTP/1.1 request's body went out in a write of its own after
		// the headers, through a 32 KiB copy buffer allocated for each
		// call; in this buffer, a request of up to 16 KiB is one write.
		WriteBufferSize: hookWriteBufferSize,
	}
	return &http.Client{
		Transport: transport,
		// A redirect would send the request, and its Authorization header,
		// to a URL the controller does not name. The 3xx is reported as an
		// error instead.
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}
}
