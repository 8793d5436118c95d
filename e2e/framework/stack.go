// Package framework runs a real Kubernetes control plane on 127.0.0.1 for
// end-to-end tests: etcd, kube-apiserver, kube-controller-manager and
// composite-apiserver behind an APIService, as a cluster admin would deploy
// it, and drives it with the real kubectl and client-go.
package framework

import (
	"bytes"
	"context"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregator "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"
	"k8s.io/utils/ptr"
)

// Names of what the stack registers, as artifacts/deploy names them.
const (
	CompositeNamespace      = "composite-system"
	CompositeServiceAccount = "composite-apiserver"
	CompositeService        = "composite-apiserver"
	APIServiceName          = "v1alpha1.metacontroller.k8s.io"
	// CompositeEtcdPrefix keeps the aggregated server's objects apart from
	// kube-apiserver's in the shared etcd.
	CompositeEtcdPrefix = "/composite-apiserver"
)

// Options change how a stack starts.
type Options struct {
	// Dir holds certificates, kubeconfigs, data and logs; a new temporary
	// directory when empty.
	Dir string
	// CompositeArgs are extra flags of composite-apiserver.
	CompositeArgs []string
	// Log receives progress lines; nil discards them.
	Log io.Writer
	// KubeAPIServerArgs are extra flags of kube-apiserver, after the
	// stack's, e.g. an admission configuration as a managed cluster runs.
	KubeAPIServerArgs []string
	// Pods, when set, makes the stack run pods (pods.go): kube-scheduler,
	// more kube-controller-manager controllers, kwok nodes, a default
	// StorageClass. Without it no pod is ever scheduled, and the stack
	// starts faster.
	Pods *PodStack
}

// Stack is a running control plane with composite-apiserver registered.
type Stack struct {
	Dir   string
	Bin   Binaries
	Certs *Certs
	opts  Options

	EtcdURL            string
	KubeAPIServerURL   string
	CompositePort      int
	AdminKubeconfig    string
	AdminConfig        *rest.Config
	Kube               kubernetes.Interface
	Aggregator         aggregator.Interface
	CompositeIdentity  string // kubeconfig of the server's service account
	compositeServerURL string

	mu        sync.Mutex
	etcd      *Process
	apiserver *Process
	kcm       *Process
	composite *Process
	// scheduler and kwok run in the pod stack only (Options.Pods).
	scheduler, kwok *Process
	// etcdArgs and apiserverArgs start etcd and kube-apiserver again as
	// they first ran: same ports, same data.
	etcdArgs, apiserverArgs []string

	// exits are the processes that ended without being asked to (crashes,
	// a composite-apiserver exiting with an error), each with its log tail.
	exitsMu sync.Mutex
	exits   []string

	// extraCAs are serving CAs trusted besides the stack's (TrustServingCA).
	extraCAsMu sync.Mutex
	extraCAs   [][]byte

	// disruptions are the times tests stopped or killed a stack process
	// on purpose (kcmlog.go).
	disruptionsMu sync.Mutex
	disruptions   []disruption

	// compositeHosts are names composite-apiserver resolves to addresses
	// of a test's choosing (SetCompositeHosts).
	compositeHosts map[string]string
}

// watch records p's exit when nobody asked it to end: TestMain then fails
// the package, and DumpLogsOnFailure the test it happened in.
func (s *Stack) watch(p *Process) {
	go func() {
		<-p.done
		err := p.UnexpectedExit()
		if err == nil {
			return
		}
		msg := fmt.Sprintf("%v\n----- %s (%s), last lines:\n%s", err, p.Name, p.LogFile, p.Tail(4000))
		s.exitsMu.Lock()
		s.exits = append(s.exits, msg)
		s.exitsMu.Unlock()
		s.logf("%v", err)
	}()
}

// UnexpectedExits describes every stack process (composite-apiserver, its
// replicas, etcd, kube-apiserver, kube-controller-manager; kube-scheduler
// and kwok in the pod stack) that ended
// without StopComposite, KillComposite, Process.Stop, Process.Kill or
// Stop asking it to, with the tail of its log.
func (s *Stack) UnexpectedExits() []string {
	s.exitsMu.Lock()
	defer s.exitsMu.Unlock()
	return append([]string(nil), s.exits...)
}

// Down returns an error when a process the stack's tests depend on, the
// control plane or the current composite-apiserver, has ended without being
// asked to: waiting for anything is pointless then.
func (s *Stack) Down() error {
	s.mu.Lock()
	procs := []*Process{s.etcd, s.apiserver, s.kcm, s.scheduler, s.kwok, s.composite}
	s.mu.Unlock()
	for _, p := range procs {
		if p == nil {
			continue
		}
		if err := p.UnexpectedExit(); err != nil {
			return err
		}
	}
	return nil
}

// Start brings a stack up; on error everything started is stopped again,
// and the error is logged with the end of each process's log. (The stack
// is not a named result: returning nil with the error would nil it for
// that deferred report.)
func Start(ctx context.Context, opts Options) (_ *Stack, err error) {
	bin, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	dir := opts.Dir
	if dir == "" {
		if dir, err = os.MkdirTemp("", "composite-e2e-"); err != nil {
			return nil, err
		}
	}
	s := &Stack{Dir: dir, Bin: bin, opts: opts}
	defer func() {
		if err != nil {
			s.logf("start failed: %v\n%s", err, s.LogTails(4000))
			s.Stop()
		}
	}()
	started := time.Now()
	for _, sub := range []string{"certs", "logs", "etcd"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return nil, err
		}
	}
	compositeDNS := []string{
		CompositeService + "." + CompositeNamespace + ".svc",
		CompositeService + "." + CompositeNamespace + ".svc.cluster.local",
	}
	if s.Certs, err = NewCerts(filepath.Join(dir, "certs"), compositeDNS); err != nil {
		return nil, err
	}
	if err := s.startEtcd(ctx); err != nil {
		return nil, err
	}
	s.logf("etcd ready after %s", time.Since(started).Round(time.Millisecond))
	if err := s.startKubeAPIServer(ctx); err != nil {
		return nil, err
	}
	s.logf("kube-apiserver ready after %s", time.Since(started).Round(time.Millisecond))
	if err := s.startControllerManager(); err != nil {
		return nil, err
	}
	if opts.Pods != nil {
		if err := s.startPods(ctx); err != nil {
			return nil, err
		}
		s.logf("kube-scheduler, kwok and %d Ready nodes after %s", s.Nodes(), time.Since(started).Round(time.Millisecond))
	}
	if err := s.installServerIdentity(ctx); err != nil {
		return nil, err
	}
	if s.CompositePort, err = FreePort(); err != nil {
		return nil, err
	}
	s.compositeServerURL = "https://127.0.0.1:" + strconv.Itoa(s.CompositePort)
	if err := s.StartComposite(ctx); err != nil {
		return nil, err
	}
	if err := s.registerAPIService(ctx); err != nil {
		return nil, err
	}
	if err := s.WaitAPIServiceAvailable(ctx, true); err != nil {
		return nil, err
	}
	if err := s.waitOpenAPI(ctx); err != nil {
		return nil, err
	}
	s.logf("stack ready after %s (dir %s)", time.Since(started).Round(time.Millisecond), dir)
	return s, nil
}

func (s *Stack) logf(format string, args ...interface{}) {
	if s.opts.Log != nil {
		fmt.Fprintf(s.opts.Log, "e2e: "+format+"\n", args...)
	}
}

func (s *Stack) startEtcd(ctx context.Context) error {
	clientPort, err := FreePort()
	if err != nil {
		return err
	}
	peerPort, err := FreePort()
	if err != nil {
		return err
	}
	s.EtcdURL = fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	peer := fmt.Sprintf("http://127.0.0.1:%d", peerPort)
	s.etcdArgs = []string{
		"--name=default",
		"--data-dir=" + filepath.Join(s.Dir, "etcd"),
		"--listen-client-urls=" + s.EtcdURL,
		"--advertise-client-urls=" + s.EtcdURL,
		"--listen-peer-urls=" + peer,
		"--initial-advertise-peer-urls=" + peer,
		"--initial-cluster=default=" + peer,
		"--log-level=warn",
	}
	s.etcd, err = StartProcess("etcd", s.logDir(), s.Bin.Etcd, s.etcdArgs...)
	if err != nil {
		return err
	}
	s.watch(s.etcd)
	return s.waitHTTP(ctx, "etcd", s.etcd, http.DefaultClient, s.EtcdURL+"/health", 30*time.Second)
}

func (s *Stack) startKubeAPIServer(ctx context.Context) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	s.KubeAPIServerURL = "https://127.0.0.1:" + strconv.Itoa(port)
	c := s.Certs
	s.apiserverArgs = []string{
		"--etcd-servers=" + s.EtcdURL,
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + c.KubeAPIServerServing.CertFile,
		"--tls-private-key-file=" + c.KubeAPIServerServing.KeyFile,
		"--client-ca-file=" + c.ClientCA.CertFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + c.ServiceAccountPub,
		"--service-account-signing-key-file=" + c.ServiceAccountKey,
		"--service-cluster-ip-range=10.96.0.0/24",
		"--endpoint-reconciler-type=none",
		// The aggregator's identity towards aggregated servers.
		"--requestheader-client-ca-file=" + c.FrontProxyCA.CertFile,
		"--requestheader-allowed-names=" + FrontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + c.FrontProxyClient.CertFile,
		"--proxy-client-key-file=" + c.FrontProxyClient.KeyFile,
		// PodSecurity is among the default plugins; named here so that the
		// tests proving the shipped manifests pass the "restricted" level
		// (e2e/cluster podsecurity_test.go) never run without it.
		"--enable-admission-plugins=PodSecurity",
	}
	s.apiserverArgs = append(s.apiserverArgs, s.opts.KubeAPIServerArgs...)
	s.apiserver, err = StartProcess("kube-apiserver", s.logDir(), s.Bin.KubeAPIServer, s.apiserverArgs...)
	if err != nil {
		return err
	}
	s.watch(s.apiserver)
	admin, err := c.Issue(c.ClientCA, "admin", []string{"system:masters"}, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return err
	}
	s.AdminKubeconfig = filepath.Join(s.Dir, "admin.kubeconfig")
	if err := s.writeCertKubeconfig(s.AdminKubeconfig, admin); err != nil {
		return err
	}
	if s.AdminConfig, err = clientcmd.BuildConfigFromFlags("", s.AdminKubeconfig); err != nil {
		return err
	}
	s.AdminConfig.QPS, s.AdminConfig.Burst = 200, 400
	if s.Kube, err = kubernetes.NewForConfig(s.AdminConfig); err != nil {
		return err
	}
	if s.Aggregator, err = aggregator.NewForConfig(s.AdminConfig); err != nil {
		return err
	}
	adminHTTP, err := rest.HTTPClientFor(s.AdminConfig)
	if err != nil {
		return err
	}
	return s.waitHTTP(ctx, "kube-apiserver", s.apiserver, adminHTTP, s.KubeAPIServerURL+"/readyz", 90*time.Second)
}

// startControllerManager runs the garbage collector (children go when
// their parent goes), the namespace controller, the quota controller and
// the workload controllers that turn Deployments and StatefulSets into
// Pods (which stay Pending: there are no nodes). It gets administrator
// credentials: with its own identity RBAC denies it emptying namespaces.
func (s *Stack) startControllerManager() error {
	c := s.Certs
	ck, err := c.Issue(c.ClientCA, "system:kube-controller-manager", []string{"system:masters"}, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(s.Dir, "kube-controller-manager.kubeconfig")
	if err := s.writeCertKubeconfig(kubeconfig, ck); err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	controllers := "garbagecollector,namespace,clusterrole-aggregation,resourcequota,deployment,replicaset,statefulset,pvc-protection"
	var podArgs []string
	if s.opts.Pods != nil {
		controllers += "," + strings.Join(podControllers, ",")
		podArgs = s.controllerManagerPodArgs()
	}
	s.kcm, err = StartProcess("kube-controller-manager", s.logDir(), s.Bin.KubeControllerManager, append([]string{
		"--kubeconfig=" + kubeconfig,
		// clusterrole-aggregation fills the aggregated ClusterRole through
		// which admins grant composite-apiserver rights on parents and
		// children (artifacts/deploy/rbac.yaml).
		// resourcequota counts objects of every resource, ours too: with
		// the garbage collector and the namespace controller it is what
		// an aggregated server must serve well (protobuf-first metadata
		// clients), and the tests prove it does.
		// deployment, replicaset and statefulset create the Pods of the
		// shipped manifests, so that admission (PodSecurity, quotas) judges
		// them as on a real cluster: applying a Deployment only warns.
		// pvc-protection releases the StatefulSets' PVCs (their finalizer)
		// once no Pod uses them, or their namespaces would never go.
		// The pod stack runs more (podControllers).
		"--controllers=" + controllers,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--concurrent-gc-syncs=5",
		// A quota's usage is recalculated on this period (and on
		// deletes); creates are charged by admission, which
		// kube-apiserver does not run for an aggregated API. Ten
		// seconds instead of five minutes lets a test see a count.
		"--resource-quota-sync-period=10s",
	}, podArgs...)...)
	if err != nil {
		return err
	}
	s.watch(s.kcm)
	return nil
}

// installServerIdentity applies artifacts/deploy's namespace, service account,
// RBAC and the FlowSchema of its Lease requests for real, and gives the server a token of that service account:
// the stack runs composite-apiserver with exactly the rights an admin grants.
func (s *Stack) installServerIdentity(ctx context.Context) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	for _, f := range []string{"namespace.yaml", "serviceaccount.yaml", "rbac.yaml", "flowschema.yaml"} {
		if _, stderr, err := s.Kubectl(ctx, "apply", "-f", filepath.Join(root, "artifacts", "deploy", f)); err != nil {
			return fmt.Errorf("kubectl apply %s: %w: %s", f, err, stderr)
		}
	}
	s.CompositeIdentity, err = s.ServiceAccountKubeconfig(ctx, CompositeNamespace, CompositeServiceAccount)
	return err
}

// ServiceAccountKubeconfig writes a kubeconfig of the stack's
// kube-apiserver with a token of the ServiceAccount namespace/name, as a
// pod of it holds one, and returns its path.
func (s *Stack) ServiceAccountKubeconfig(ctx context.Context, namespace, name string) (string, error) {
	var token *authenticationv1.TokenRequest
	var err error
	// The ServiceAccount may have been created a moment ago.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		token, err = s.Kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](24 * 3600)}},
			metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		return "", fmt.Errorf("can't get a token for ServiceAccount %s/%s: %w", namespace, name, err)
	}
	path := filepath.Join(s.Dir, namespace+"-"+name+".kubeconfig")
	return path, s.writeKubeconfig(path, &clientcmdapi.AuthInfo{Token: token.Status.Token})
}

// StartComposite starts composite-apiserver as a cluster would run it:
// external etcd with its own prefix, delegated authentication and
// authorization, its service account's identity. It returns once /readyz
// answers.
func (s *Stack) StartComposite(ctx context.Context, extraArgs ...string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.composite != nil {
		if exited, _ := s.composite.Exited(); !exited {
			return fmt.Errorf("composite-apiserver is already running")
		}
	}
	args := []string{
		"--etcd-servers=" + s.EtcdURL,
		"--etcd-prefix=" + CompositeEtcdPrefix,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(s.CompositePort),
		"--tls-cert-file=" + s.Certs.CompositeServing.CertFile,
		"--tls-private-key-file=" + s.Certs.CompositeServing.KeyFile,
		"--authentication-kubeconfig=" + s.CompositeIdentity,
		"--authorization-kubeconfig=" + s.CompositeIdentity,
		"--kubeconfig=" + s.CompositeIdentity,
	}
	args = append(args, s.opts.CompositeArgs...)
	args = append(args, extraArgs...)
	bin := s.Bin.CompositeAPIServer
	if len(s.compositeHosts) > 0 {
		var err error
		if bin, args, err = s.resolvingHosts(bin, args); err != nil {
			return err
		}
	}
	p, err := StartProcess("composite-apiserver", s.logDir(), bin, args...)
	if err != nil {
		return err
	}
	p.URL = s.compositeServerURL
	s.composite = p
	s.watch(p)
	client, err := s.compositeHTTPClient(nil)
	if err != nil {
		return err
	}
	if err := s.waitHTTP(ctx, "composite-apiserver", p, client, s.compositeServerURL+"/readyz", 60*time.Second); err != nil {
		return err
	}
	s.Recovered()
	return nil
}

// SetCompositeHosts makes composite-apiserver, from its next start on,
// resolve each name of hosts to its address, as cluster DNS resolves the
// <name>.<namespace> of a Service a hook is given by: the server runs in a
// mount namespace of its own whose /etc/hosts also has these names (root
// and util-linux's unshare needed). nil goes back to the machine's
// resolution. The machine's /etc/hosts is never changed.
func (s *Stack) SetCompositeHosts(hosts map[string]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.compositeHosts = hosts
}

// resolvingHosts returns the command that runs bin with args in a mount
// namespace where /etc/hosts is the machine's plus s.compositeHosts.
func (s *Stack) resolvingHosts(bin string, args []string) (string, []string, error) {
	hosts, err := os.ReadFile("/etc/hosts")
	if err != nil {
		return "", nil, err
	}
	names := make([]string, 0, len(s.compositeHosts))
	for name := range s.compositeHosts {
		names = append(names, name)
	}
	sort.Strings(names)
	var b strings.Builder
	b.Write(hosts)
	b.WriteString("\n# SetCompositeHosts\n")
	for _, name := range names {
		fmt.Fprintf(&b, "%s %s\n", s.compositeHosts[name], name)
	}
	file := filepath.Join(s.Dir, "composite-hosts")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		return "", nil, err
	}
	// unshare and sh exec in turn: the process started is the server.
	script := `mount --bind "$0" /etc/hosts && exec "$@"`
	return "unshare", append([]string{"--mount", "--", "sh", "-c", script, file, bin}, args...), nil
}

// StartReplica starts another composite-apiserver on the stack's etcd and
// identity, as a second replica of a Deployment would run; it is not
// behind the APIService; it serves at the returned Process's URL. It returns
// once /readyz answers; the caller stops it (Stop or Kill: an exit it did not
// ask for fails the package, as one of the stack's own composite-apiserver).
func (s *Stack) StartReplica(ctx context.Context, name string, extraArgs ...string) (*Process, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	args := []string{
		"--etcd-servers=" + s.EtcdURL,
		"--etcd-prefix=" + CompositeEtcdPrefix,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + s.Certs.CompositeServing.CertFile,
		"--tls-private-key-file=" + s.Certs.CompositeServing.KeyFile,
		"--authentication-kubeconfig=" + s.CompositeIdentity,
		"--authorization-kubeconfig=" + s.CompositeIdentity,
		"--kubeconfig=" + s.CompositeIdentity,
	}
	p, err := StartProcess(name, s.logDir(), s.Bin.CompositeAPIServer, append(args, extraArgs...)...)
	if err != nil {
		return nil, err
	}
	p.URL = "https://127.0.0.1:" + strconv.Itoa(port)
	s.watch(p)
	client, err := s.compositeHTTPClient(nil)
	if err != nil {
		p.Kill()
		return nil, err
	}
	if err := s.waitHTTP(ctx, name, p, client, "https://127.0.0.1:"+strconv.Itoa(port)+"/readyz", 60*time.Second); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}

// StopComposite stops composite-apiserver gracefully. Only StopComposite,
// KillComposite and Stop may end it: an exit of its own is reported by
// UnexpectedExits and fails the package.
func (s *Stack) StopComposite() error {
	s.Disrupted()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.composite == nil {
		return nil
	}
	return s.composite.Stop(30 * time.Second)
}

// KillComposite kills composite-apiserver, as a crash would.
func (s *Stack) KillComposite() {
	s.Disrupted()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.composite != nil {
		s.composite.Kill()
	}
}

// CompositeURL is where composite-apiserver serves, bypassing
// kube-apiserver.
func (s *Stack) CompositeURL() string { return s.compositeServerURL }

// KubeAPIServerCPUSeconds is the CPU time kube-apiserver has used so far.
func (s *Stack) KubeAPIServerCPUSeconds() (float64, error) { return s.apiserver.CPUSeconds() }

// CompositeCPUSeconds is the CPU time composite-apiserver has used.
func (s *Stack) CompositeCPUSeconds() (float64, error) { return s.composite.CPUSeconds() }

// EtcdCPUSeconds is the CPU time etcd has used so far.
func (s *Stack) EtcdCPUSeconds() (float64, error) { return s.etcd.CPUSeconds() }

// ControllerManagerCPUSeconds is the CPU time kube-controller-manager has
// used so far.
func (s *Stack) ControllerManagerCPUSeconds() (float64, error) { return s.kcm.CPUSeconds() }

// CompositeHTTPClient talks straight to composite-apiserver, trusting its
// serving CA and presenting cert when given.
func (s *Stack) CompositeHTTPClient(cert *CertKey) (*http.Client, error) {
	return s.compositeHTTPClient(cert)
}

// TrustServingCA adds caPEM to the CAs that the stack's own clients of
// composite-apiserver (its readiness waits, CompositeHTTPClient) trust, for
// a test that runs the server with a serving certificate of another CA, as
// the chart generates one. undo removes it again.
func (s *Stack) TrustServingCA(caPEM []byte) (undo func()) {
	s.extraCAsMu.Lock()
	defer s.extraCAsMu.Unlock()
	s.extraCAs = append(s.extraCAs, caPEM)
	return func() {
		s.extraCAsMu.Lock()
		defer s.extraCAsMu.Unlock()
		for i, ca := range s.extraCAs {
			if bytes.Equal(ca, caPEM) {
				s.extraCAs = append(s.extraCAs[:i], s.extraCAs[i+1:]...)
				return
			}
		}
	}
}

func (s *Stack) compositeHTTPClient(cert *CertKey) (*http.Client, error) {
	cas, err := os.ReadFile(s.Certs.ServingCA.CertFile)
	if err != nil {
		return nil, err
	}
	s.extraCAsMu.Lock()
	for _, ca := range s.extraCAs {
		cas = append(append(cas, '\n'), ca...)
	}
	s.extraCAsMu.Unlock()
	// Verified for the Service's name, as kube-apiserver's aggregator
	// verifies it: a serving certificate made for a cluster (the chart's)
	// names the Service, not 127.0.0.1.
	cfg := &rest.Config{Host: s.compositeServerURL, TLSClientConfig: rest.TLSClientConfig{
		CAData: cas, ServerName: CompositeService + "." + CompositeNamespace + ".svc",
	}}
	if cert != nil {
		cfg.CertFile, cfg.KeyFile = cert.CertFile, cert.KeyFile
	}
	return rest.HTTPClientFor(cfg)
}

// RegisterAPIService registers the APIService (and its Service) again, as
// Start did: for a test that uninstalls the server and installs it back.
func (s *Stack) RegisterAPIService(ctx context.Context) error {
	if err := s.registerAPIService(ctx); err != nil {
		return err
	}
	if err := s.WaitAPIServiceAvailable(ctx, true); err != nil {
		return err
	}
	return s.waitOpenAPI(ctx)
}

// registerAPIService makes kube-apiserver proxy metacontroller.k8s.io to
// composite-apiserver: a Service of type ExternalName "localhost" (which the
// aggregator resolves without endpoint routing, and which loopback needs),
// and the APIService with the real CA bundle of the serving certificate.
func (s *Stack) registerAPIService(ctx context.Context) error {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: CompositeService, Namespace: CompositeNamespace},
		Spec: corev1.ServiceSpec{
			Type:         corev1.ServiceTypeExternalName,
			ExternalName: "localhost",
			Ports:        []corev1.ServicePort{{Name: "https", Port: int32(s.CompositePort)}},
		},
	}
	if _, err := s.Kube.CoreV1().Services(CompositeNamespace).Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("can't create the Service: %w", err)
	}
	caPEM, err := os.ReadFile(s.Certs.ServingCA.CertFile)
	if err != nil {
		return err
	}
	apiService := &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: APIServiceName},
		Spec: apiregistrationv1.APIServiceSpec{
			Group:                "metacontroller.k8s.io",
			Version:              "v1alpha1",
			Service:              &apiregistrationv1.ServiceReference{Namespace: CompositeNamespace, Name: CompositeService, Port: ptr.To(int32(s.CompositePort))},
			CABundle:             caPEM,
			GroupPriorityMinimum: 1000,
			VersionPriority:      15,
		},
	}
	if _, err := s.Aggregator.ApiregistrationV1().APIServices().Create(ctx, apiService, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("can't create the APIService: %w", err)
	}
	return nil
}

// WaitAPIServiceAvailable waits until the APIService's Available condition
// is (or, with want false, is not) True.
func (s *Stack) WaitAPIServiceAvailable(ctx context.Context, want bool) error {
	var last string
	// The aggregator re-checks an ExternalName service's availability on
	// its own schedule (about every 30s): allow a few rounds.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		svc, err := s.Aggregator.ApiregistrationV1().APIServices().Get(ctx, APIServiceName, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, c := range svc.Status.Conditions {
			if c.Type == apiregistrationv1.Available {
				last = fmt.Sprintf("%s: %s", c.Reason, c.Message)
				return (c.Status == apiregistrationv1.ConditionTrue) == want, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("APIService %s never became Available=%v (last: %s): %w", APIServiceName, want, last, err)
	}
	return nil
}

// WaitAuthenticatedRequests waits until a request proxied by kube-apiserver
// is served as the user who made it. The APIService turns Available as soon
// as the server answers, but a server that has just started may not yet
// have loaded the front-proxy's request-header CA, and until it has, every
// proxied request is anonymous ("system:anonymous cannot get ...").
func (s *Stack) WaitAuthenticatedRequests(ctx context.Context) error {
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		last = s.Kube.Discovery().RESTClient().Get().AbsPath("/apis/metacontroller.k8s.io/v1alpha1/compositecontrollers").
			Param("limit", "1").Do(ctx).Error()
		return last == nil, nil
	})
	if err != nil {
		return fmt.Errorf("requests through kube-apiserver were never served as the admin (last: %v): %w", last, err)
	}
	return nil
}

// waitOpenAPI waits until kube-apiserver's aggregated OpenAPI v3 holds our
// group: `kubectl explain` and server-side apply need it, and the aggregator
// fetches it a moment after the APIService becomes available.
func (s *Stack) waitOpenAPI(ctx context.Context) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		paths, err := s.Kube.Discovery().OpenAPIV3().Paths()
		if err != nil {
			return false, nil
		}
		_, ok := paths["apis/metacontroller.k8s.io/v1alpha1"]
		return ok, nil
	})
	if err != nil {
		return fmt.Errorf("kube-apiserver's OpenAPI v3 never listed metacontroller.k8s.io/v1alpha1: %w", err)
	}
	return nil
}

// Kubectl runs the stack's kubectl as the administrator.
func (s *Stack) Kubectl(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	return s.KubectlAs(ctx, s.AdminKubeconfig, nil, args...)
}

// KubectlAs runs kubectl with kubeconfig, stdin when given.
func (s *Stack) KubectlAs(ctx context.Context, kubeconfig string, stdin io.Reader, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.Bin.Kubectl, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stdin = stdin
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// UserKubeconfig writes a kubeconfig for a user authenticated by a client
// certificate from the cluster's client CA.
func (s *Stack) UserKubeconfig(name string, groups ...string) (string, error) {
	ck, err := s.Certs.Issue(s.Certs.ClientCA, name, groups, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return "", err
	}
	path := filepath.Join(s.Dir, "user-"+sanitize(name)+".kubeconfig")
	return path, s.writeCertKubeconfig(path, ck)
}

func (s *Stack) writeCertKubeconfig(path string, ck CertKey) error {
	return s.writeKubeconfig(path, &clientcmdapi.AuthInfo{ClientCertificate: ck.CertFile, ClientKey: ck.KeyFile})
}

func (s *Stack) writeKubeconfig(path string, auth *clientcmdapi.AuthInfo) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["e2e"] = &clientcmdapi.Cluster{Server: s.KubeAPIServerURL, CertificateAuthority: s.Certs.ServingCA.CertFile}
	cfg.AuthInfos["e2e"] = auth
	cfg.Contexts["e2e"] = &clientcmdapi.Context{Cluster: "e2e", AuthInfo: "e2e"}
	cfg.CurrentContext = "e2e"
	return clientcmd.WriteToFile(*cfg, path)
}

// Stop stops everything in the order that lets each part shut down
// cleanly: composite-apiserver, then kube-controller-manager (kwok and
// kube-scheduler) and kube-apiserver, then etcd (killing etcd first leaves kube-apiserver
// hanging for minutes).
func (s *Stack) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	stop := func(p *Process) {
		if p != nil {
			start := time.Now()
			if err := p.Stop(30 * time.Second); err != nil {
				s.logf("%v", err)
			}
			s.logf("%s stopped in %s", p.Name, time.Since(start).Round(time.Millisecond))
		}
	}
	stop(s.composite)
	var wg sync.WaitGroup
	for _, p := range []*Process{s.kwok, s.scheduler, s.kcm, s.apiserver} {
		wg.Add(1)
		go func() { defer wg.Done(); stop(p) }()
	}
	wg.Wait()
	stop(s.etcd)
}

// LogTails returns the end of every process's log, for a failing test.
func (s *Stack) LogTails(n int64) string {
	var b strings.Builder
	for _, p := range []*Process{s.etcd, s.apiserver, s.kcm, s.scheduler, s.kwok, s.composite} {
		if p != nil {
			fmt.Fprintf(&b, "----- %s (%s)\n%s\n", p.Name, p.LogFile, p.Tail(n))
		}
	}
	return b.String()
}

func (s *Stack) logDir() string { return filepath.Join(s.Dir, "logs") }

// waitHTTP polls url until it answers 200, failing early when p exits.
func (s *Stack) waitHTTP(ctx context.Context, name string, p *Process, client *http.Client, url string, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if exited, err := p.Exited(); exited {
			return false, fmt.Errorf("%s exited: %v", name, err)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		resp.Body.Close()
		last = fmt.Sprintf("%d %s", resp.StatusCode, body)
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("%s not ready at %s (last answer: %s): %w\n%s", name, url, last, err, p.Tail(3000))
	}
	return nil
}
