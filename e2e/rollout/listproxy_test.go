package rollout

import (
	"crypto/tls"
	"crypto/x509"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
)

// slowProxy stands between composite-apiserver and kube-apiserver and
// makes kube-apiserver slow, as load or a large fleet does, for one
// resource only: it holds each list of it for lists, and each write of an
// object's status for statusWrites (time.Durations; 0 passes at once).
// A list is a LIST, or the watch-list stream client-go sends in its place
// (a watch with sendInitialEvents=true): held, the resource's informer
// syncs later than the server's other informers and its rollout driver's
// tick. A watch resumed from a resourceVersion passes at once, as does
// everything else, the server's credentials (its ServiceAccount's token)
// included.
type slowProxy struct {
	group, resource string
	// kubeconfig is the server's identity with the proxy as its cluster:
	// --kubeconfig=<it> makes the server's loop go through the proxy.
	kubeconfig          string
	lists, statusWrites atomic.Int64
	proxy               *httputil.ReverseProxy

	mu sync.Mutex
	// held are the lists held: when each came, and when it was passed on
	// to kube-apiserver.
	held []struct{ arrived, passed time.Time }
}

// startSlowProxy serves a slowProxy of group's resource on 127.0.0.1 until
// the test ends, with a serving certificate of the stack's serving CA,
// which the server's kubeconfig trusts for kube-apiserver.
func startSlowProxy(t *testing.T, group, resource string) *slowProxy {
	t.Helper()
	target, err := url.Parse(suite.KubeAPIServerURL)
	if err != nil {
		t.Fatal(err)
	}
	caPEM, err := os.ReadFile(suite.Certs.ServingCA.CertFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(caPEM)
	p := &slowProxy{group: group, resource: resource}
	p.proxy = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(target) },
		// Watch events go through as they come.
		FlushInterval: -1,
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}, ForceAttemptHTTP2: true},
	}
	serving, err := suite.Certs.Issue(suite.Certs.ServingCA, "slow-proxy-"+t.Name(), nil,
		[]string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, x509.ExtKeyUsageServerAuth)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: p}
	go func() { _ = srv.ServeTLS(l, serving.CertFile, serving.KeyFile) }()
	t.Cleanup(func() { _ = srv.Close() })

	cfg, err := clientcmd.LoadFromFile(suite.CompositeIdentity)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cfg.Clusters {
		c.Server = "https://" + l.Addr().String()
	}
	p.kubeconfig = filepath.Join(t.TempDir(), "through-slow-proxy.kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, p.kubeconfig); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *slowProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	list := p.isList(r)
	delay := p.statusWrites.Load()
	if list {
		delay = p.lists.Load()
	} else if !p.isStatusWrite(r) {
		delay = 0
	}
	if delay > 0 {
		arrived := time.Now()
		select {
		case <-time.After(time.Duration(delay)):
		case <-r.Context().Done():
			return
		}
		if list {
			p.mu.Lock()
			p.held = append(p.held, struct{ arrived, passed time.Time }{arrived, time.Now()})
			p.mu.Unlock()
		}
	}
	p.proxy.ServeHTTP(w, r)
}

// isList tells whether r lists the proxy's resource, in every namespace or
// one.
func (p *slowProxy) isList(r *http.Request) bool {
	if r.Method != http.MethodGet || !strings.HasPrefix(r.URL.Path, "/apis/"+p.group+"/") || !strings.HasSuffix(r.URL.Path, "/"+p.resource) {
		return false
	}
	q := r.URL.Query()
	watch := q.Get("watch") == "true" || q.Get("watch") == "1"
	return !watch || q.Get("sendInitialEvents") == "true"
}

// isStatusWrite tells whether r writes the status of an object of the
// proxy's resource.
func (p *slowProxy) isStatusWrite(r *http.Request) bool {
	return (r.Method == http.MethodPut || r.Method == http.MethodPatch) && strings.HasPrefix(r.URL.Path, "/apis/"+p.group+"/") &&
		strings.Contains(r.URL.Path, "/"+p.resource+"/") && strings.HasSuffix(r.URL.Path, "/status")
}

// listPassedSince is when the first list that came at or after since was
// passed on to kube-apiserver; zero while there is none.
func (p *slowProxy) listPassedSince(since time.Time) time.Time {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range p.held {
		if !h.arrived.Before(since) {
			return h.passed
		}
	}
	return time.Time{}
}
