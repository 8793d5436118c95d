package framework

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// The stack has no kubelet, no endpoints controller and no kube-proxy: a
// Deployment's replicas run as processes (StartReplica). Prober and Service
// play those parts for them, from a rendered container's probes, so that a
// test can measure what the aggregator's clients see while replicas come
// and go: kubelet probes each replica as the container's probes say, the
// Service routes each new connection to a replica whose readiness probe
// passes, and a connection once routed stays with its replica until one
// end closes it, as kube-proxy's iptables and IPVS modes do.
//
// Only the readiness probe takes a replica out of the Service here. In a
// cluster, deleting a pod also takes it out at once (its EndpointSlice
// entry turns terminating); the readiness probe is the slower path, the one
// left when a container is stopped without its pod being deleted, and it is
// the one a replica's shutdown has to outlast.

// Prober probes one replica as kubelet probes a container: the startup
// probe until it passes, then the readiness and liveness probes, each at
// its own period, counting consecutive results against its thresholds.
// A liveness probe past its failure threshold would restart the container;
// here it is recorded (Restarts), for the test to fail on.
type Prober struct {
	proc   *Process
	client *http.Client
	host   string
	cancel context.CancelFunc
	done   chan struct{}

	mu    sync.Mutex
	ready bool
	// readyChanged is closed, and replaced, whenever ready changes.
	readyChanged chan struct{}
	restarts     []string
	liveness     []ProbeResult
}

// ProbeResult is one probe's answer.
type ProbeResult struct {
	At     time.Time
	Passed bool
	// Detail is the status and the start of the body, or the error.
	Detail string
}

// StartProber starts probing p with c's probes (HTTP GET only, each path on
// p's address). Until the startup probe, when c has one, passes, neither of
// the others runs and the replica is not ready, as with kubelet.
func StartProber(p *Process, c corev1.Container) (*Prober, error) {
	for _, probe := range []*corev1.Probe{c.StartupProbe, c.ReadinessProbe, c.LivenessProbe} {
		if probe != nil && probe.HTTPGet == nil {
			return nil, fmt.Errorf("container %s has a probe that is not an HTTP GET: not modelled", c.Name)
		}
	}
	u, err := url.Parse(p.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("can't tell where %s serves (%q)", p.Name, p.URL)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr := &Prober{
		proc: p, host: u.Host, cancel: cancel, done: make(chan struct{}),
		readyChanged: make(chan struct{}),
		// kubelet does not verify a probed server's certificate.
		client: &http.Client{Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
			DisableKeepAlives: true,
		}},
	}
	go pr.run(ctx, c)
	return pr, nil
}

func (pr *Prober) run(ctx context.Context, c corev1.Container) {
	defer close(pr.done)
	if c.StartupProbe != nil {
		if !pr.startup(ctx, c.StartupProbe) {
			return
		}
	}
	var wg sync.WaitGroup
	if c.ReadinessProbe != nil {
		wg.Add(1)
		go func() { defer wg.Done(); pr.readiness(ctx, c.ReadinessProbe) }()
	} else {
		// Without a readiness probe a started container is ready.
		pr.setReady(true)
	}
	if c.LivenessProbe != nil {
		wg.Add(1)
		go func() { defer wg.Done(); pr.livenessLoop(ctx, c.LivenessProbe) }()
	}
	wg.Wait()
}

// startup runs the startup probe until it passes (true), or fails
// failureThreshold times in a row, when kubelet would restart the
// container (recorded; false).
func (pr *Prober) startup(ctx context.Context, probe *corev1.Probe) bool {
	failures := 0
	passed := false
	pr.every(ctx, probe, func(r ProbeResult) bool {
		if r.Passed {
			passed = true
			return false
		}
		failures++
		if failures >= threshold(probe.FailureThreshold) {
			pr.restart(fmt.Sprintf("startup probe %s failed %d times in a row, last: %s", probe.HTTPGet.Path, failures, r.Detail))
			return false
		}
		return true
	})
	return passed
}

func (pr *Prober) readiness(ctx context.Context, probe *corev1.Probe) {
	successes, failures := 0, 0
	pr.every(ctx, probe, func(r ProbeResult) bool {
		if r.Passed {
			successes, failures = successes+1, 0
			if successes >= threshold(probe.SuccessThreshold) {
				pr.setReady(true)
			}
		} else {
			successes, failures = 0, failures+1
			if failures >= threshold(probe.FailureThreshold) {
				pr.setReady(false)
			}
		}
		return true
	})
}

func (pr *Prober) livenessLoop(ctx context.Context, probe *corev1.Probe) {
	failures := 0
	pr.every(ctx, probe, func(r ProbeResult) bool {
		pr.mu.Lock()
		pr.liveness = append(pr.liveness, r)
		pr.mu.Unlock()
		if r.Passed {
			failures = 0
			return true
		}
		failures++
		if failures >= threshold(probe.FailureThreshold) {
			pr.restart(fmt.Sprintf("liveness probe %s failed %d times in a row, last: %s", probe.HTTPGet.Path, failures, r.Detail))
			failures = 0
		}
		return true
	})
}

// every runs probe after its initial delay and then each period, handing
// each result to next until it returns false or ctx ends. An exited
// process is not probed: its container is gone.
func (pr *Prober) every(ctx context.Context, probe *corev1.Probe, next func(ProbeResult) bool) {
	period := time.Duration(orDefault(probe.PeriodSeconds, 10)) * time.Second
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Duration(probe.InitialDelaySeconds) * time.Second):
	}
	ticker := time.NewTicker(period)
	defer ticker.Stop()
	for {
		if exited, _ := pr.proc.Exited(); exited {
			pr.setReady(false)
			return
		}
		if !next(pr.probe(ctx, probe)) {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// probe makes one HTTP GET as kubelet does: 200 to 399 within
// timeoutSeconds passes.
func (pr *Prober) probe(ctx context.Context, probe *corev1.Probe) ProbeResult {
	get := probe.HTTPGet
	scheme := "http"
	if get.Scheme == corev1.URISchemeHTTPS {
		scheme = "https"
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(orDefault(probe.TimeoutSeconds, 1))*time.Second)
	defer cancel()
	r := ProbeResult{At: time.Now()}
	// The path may carry a query (/livez?exclude=etcd), as kubelet allows.
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, scheme+"://"+pr.host+get.Path, nil)
	if err != nil {
		r.Detail = err.Error()
		return r
	}
	req.Header.Set("User-Agent", "kube-probe/e2e")
	resp, err := pr.client.Do(req)
	if err != nil {
		r.Detail = err.Error()
		return r
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 2048))
	r.Passed = resp.StatusCode >= 200 && resp.StatusCode < 400
	r.Detail = fmt.Sprintf("%d %s", resp.StatusCode, body)
	return r
}

func threshold(n int32) int { return int(orDefault(n, 1)) }

// orDefault is n, or def when n is unset (kube-apiserver's defaulting, which
// a rendered manifest has not been through).
func orDefault(n, def int32) int32 {
	if n <= 0 {
		return def
	}
	return n
}

func (pr *Prober) setReady(ready bool) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	if pr.ready != ready {
		pr.ready = ready
		close(pr.readyChanged)
		pr.readyChanged = make(chan struct{})
	}
}

func (pr *Prober) restart(reason string) {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	pr.restarts = append(pr.restarts, reason)
}

// Ready tells whether the replica's readiness probe passes, as kubelet
// would report it.
func (pr *Prober) Ready() bool {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return pr.ready
}

// WaitReady waits until Ready is want.
func (pr *Prober) WaitReady(ctx context.Context, want bool, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		pr.mu.Lock()
		ready, changed := pr.ready, pr.readyChanged
		pr.mu.Unlock()
		if ready == want {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("%s did not become ready=%v within %s", pr.proc.Name, want, timeout)
		}
	}
}

// Restarts are the reasons kubelet would have restarted the container
// for: a startup or liveness probe past its failure threshold.
func (pr *Prober) Restarts() []string {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	return append([]string(nil), pr.restarts...)
}

// LivenessSince are the liveness probe's results from t on.
func (pr *Prober) LivenessSince(t time.Time) []ProbeResult {
	pr.mu.Lock()
	defer pr.mu.Unlock()
	var out []ProbeResult
	for _, r := range pr.liveness {
		if !r.At.Before(t) {
			out = append(out, r)
		}
	}
	return out
}

// Stop stops probing.
func (pr *Prober) Stop() {
	pr.cancel()
	<-pr.done
}

// Service stands for a Service in front of replicas: it listens on
// loopback and sends each connection to one of its replicas whose Prober
// says ready, chosen at random as kube-proxy does; with none ready, or a
// replica that refuses, the connection is closed, as a client of a Service
// without endpoints sees it refused.
type Service struct {
	listener net.Listener

	mu        sync.Mutex
	endpoints []serviceEndpoint
	open      map[net.Conn]struct{}
	// routed counts connections per replica; unrouted those closed
	// because no replica was ready or the chosen one refused.
	routed   map[string]int
	unrouted []string
	wg       sync.WaitGroup
}

type serviceEndpoint struct {
	proc   *Process
	prober *Prober
	host   string
}

// StartService listens on a free loopback port.
func StartService() (*Service, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Service{listener: l, open: map[net.Conn]struct{}{}, routed: map[string]int{}}
	s.wg.Add(1)
	go s.serve()
	return s, nil
}

// Port is where the Service listens.
func (s *Service) Port() int { return s.listener.Addr().(*net.TCPAddr).Port }

// Add makes p an endpoint, ready whenever pr says so.
func (s *Service) Add(p *Process, pr *Prober) error {
	u, err := url.Parse(p.URL)
	if err != nil || u.Host == "" {
		return fmt.Errorf("can't tell where %s serves (%q)", p.Name, p.URL)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.endpoints = append(s.endpoints, serviceEndpoint{proc: p, prober: pr, host: u.Host})
	return nil
}

// Remove takes p out of the endpoints; its connections stay open.
func (s *Service) Remove(p *Process) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, e := range s.endpoints {
		if e.proc == p {
			s.endpoints = append(s.endpoints[:i], s.endpoints[i+1:]...)
			return
		}
	}
}

// Routed counts the connections sent to each replica, by name.
func (s *Service) Routed() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.routed {
		out[k] = v
	}
	return out
}

// Unrouted are the connections the Service closed, and why.
func (s *Service) Unrouted() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.unrouted...)
}

// Close stops listening and closes every connection.
func (s *Service) Close() {
	s.listener.Close()
	s.mu.Lock()
	for c := range s.open {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *Service) serve() {
	defer s.wg.Done()
	for {
		c, err := s.listener.Accept()
		if err != nil {
			return
		}
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.forward(c)
		}()
	}
}

// pick chooses a ready endpoint at random.
func (s *Service) pick() (serviceEndpoint, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ready []serviceEndpoint
	for _, e := range s.endpoints {
		if e.prober.Ready() {
			ready = append(ready, e)
		}
	}
	if len(ready) == 0 {
		return serviceEndpoint{}, false
	}
	return ready[rand.IntN(len(ready))], true
}

func (s *Service) forward(c net.Conn) {
	e, ok := s.pick()
	if !ok {
		s.refuse(c, "no ready endpoint")
		return
	}
	backend, err := net.DialTimeout("tcp", e.host, 10*time.Second)
	if err != nil {
		s.refuse(c, fmt.Sprintf("%s: %v", e.proc.Name, err))
		return
	}
	s.mu.Lock()
	s.routed[e.proc.Name]++
	s.open[c], s.open[backend] = struct{}{}, struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.open, c)
		delete(s.open, backend)
		s.mu.Unlock()
		c.Close()
		backend.Close()
	}()
	// Each direction is closed for writing once the other end is done
	// with it, so that a response still on its way is delivered.
	var wg sync.WaitGroup
	wg.Add(2)
	pipe := func(dst, src net.Conn) {
		defer wg.Done()
		_, _ = io.Copy(dst, src)
		if tcp, ok := dst.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
	}
	go pipe(backend, c)
	go pipe(c, backend)
	wg.Wait()
}

func (s *Service) refuse(c net.Conn, why string) {
	s.mu.Lock()
	s.unrouted = append(s.unrouted, time.Now().Format("15:04:05.000")+" "+why)
	s.mu.Unlock()
	// A reset, as a refused connection is, rather than an orderly close.
	if tcp, ok := c.(*net.TCPConn); ok {
		_ = tcp.SetLinger(0)
	}
	c.Close()
}

// RouteAPIServiceTo makes the APIService send our group's requests to port
// on the Service's host (instead of the stack's own composite-apiserver),
// and waits until it is Available there; restore sends them back. The
// stack's composite-apiserver keeps running meanwhile, so that nothing is
// disrupted while the route changes.
func (s *Stack) RouteAPIServiceTo(ctx context.Context, port int) (restore func() error, err error) {
	set := func(port int) error {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			api, err := s.Aggregator.ApiregistrationV1().APIServices().Get(ctx, APIServiceName, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			api.Spec.Service.Port = ptr.To(int32(port))
			_, err = s.Aggregator.ApiregistrationV1().APIServices().Update(ctx, api, metav1.UpdateOptions{})
			return err == nil, nil
		})
		if err != nil {
			return fmt.Errorf("can't point the APIService at port %d: %w", port, err)
		}
		return s.WaitAPIServiceAvailable(ctx, true)
	}
	if err := set(port); err != nil {
		return nil, err
	}
	return func() error { return set(s.CompositePort) }, nil
}

// errNotServed is what WaitServedThrough says while requests do not reach
// the Service yet.
var errNotServed = errors.New("no request through kube-apiserver reached the Service yet")

// WaitServedThrough waits until a request for our group made to
// kube-apiserver is answered and svc has routed a connection: the
// aggregator's transport for the APIService's new port is in use.
func (s *Stack) WaitServedThrough(ctx context.Context, svc *Service) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = s.Kube.Discovery().RESTClient().Get().AbsPath("/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers").
			Param("limit", "1").Do(ctx).Error()
		if last == nil && len(svc.Routed()) == 0 {
			last = errNotServed
		}
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("%w (last: %v)", err, last)
	}
	return nil
}
