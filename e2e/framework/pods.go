package framework

import (
	"context"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
)

// PodStack makes a stack run pods (Options.Pods): kube-scheduler,
// kube-controller-manager's workload, node and volume controllers, and kwok
// as the nodes' kubelets. No container runs: kwok's Stages move each pod
// through its phases (Running and Ready at once; Succeeded for the pods of
// a Job and for pods whose restartPolicy is Never or OnFailure; gone once
// deleted), and keep the nodes Ready by renewing their Leases.
type PodStack struct {
	// Nodes is how many kwok nodes the stack creates (kwok-node-0, ...);
	// 3 when zero.
	Nodes int
}

// WithPods returns opts with the pod stack turned on, with its default
// nodes.
func WithPods(opts Options) Options {
	opts.Pods = &PodStack{}
	return opts
}

// DefaultStorageClass is the default StorageClass of a pod stack: kube-
// controller-manager's persistentvolume-binder provisions a hostPath
// PersistentVolume for each claim of it at once (--enable-hostpath-provisioner;
// no directory is made, no pod mounts it) and deletes it with its claim.
const DefaultStorageClass = "standard"

// EnvKwok names a directory holding kwok and its stages/ (as
// hack/install-kwok.sh prints); when unset they are built (or taken from
// the cache) by hack/install-kwok.sh.
const EnvKwok = "COMPOSITE_KWOK"

// nodeLeaseSeconds is the Lease duration kwok gives its nodes, as kubelet's
// default: kwok renews each Lease at a quarter of it. Without a Lease (or a
// fresher heartbeat than kwok's node-heartbeat-with-lease Stage gives, every
// 10 to 20 minutes) kube-controller-manager's node-lifecycle controller
// takes a node for NotReady after --node-monitor-grace-period (50 s), taints
// it and evicts its pods.
const nodeLeaseSeconds = 40

// podControllers are kube-controller-manager's controllers of the pod stack,
// beside those of every stack: the workload controllers (daemonset, job,
// cronjob; deployment, replicaset and statefulset run in every stack), the
// "default" ServiceAccount of each namespace (the ServiceAccount admission
// plugin refuses pods without it, and gives the others their
// kube-api-access token volume) and its tokens, kube-root-ca.crt (which
// that volume projects), EndpointSlices of Services, PersistentVolumes and
// their binding, node lifecycle (a node that stops renewing its Lease turns
// NotReady and its pods are evicted), PodDisruptionBudgets, and the pod
// garbage collector.
var podControllers = []string{
	"daemonset", "job", "cronjob", "ttl-after-finished",
	"serviceaccount", "serviceaccount-token", "root-ca-cert-publisher",
	"endpointslice", "endpointslicemirroring",
	"persistentvolume-binder", "pv-protection",
	"nodelifecycle", "taint-eviction-controller", "podgc", "disruption",
}

// controllerManagerPodArgs are kube-controller-manager's flags for the pod
// stack.
func (s *Stack) controllerManagerPodArgs() []string {
	return []string{
		// The serviceaccount-token controller signs the legacy token
		// Secrets with the key kube-apiserver verifies, and puts this CA
		// in them and in kube-root-ca.crt.
		"--service-account-private-key-file=" + s.Certs.ServiceAccountKey,
		"--root-ca-file=" + s.Certs.ServingCA.CertFile,
		"--enable-hostpath-provisioner",
	}
}

var (
	kwokOnce sync.Once
	kwokDir  string
	kwokErr  error
)

// findKwok returns the directory of kwok and its Stage files, building them
// once per test process when EnvKwok is unset.
func findKwok() (string, error) {
	kwokOnce.Do(func() {
		kwokDir = os.Getenv(EnvKwok)
		if kwokDir == "" {
			kwokDir, kwokErr = runInstallScript("install-kwok.sh")
			if kwokErr != nil {
				return
			}
		}
		if _, err := os.Stat(filepath.Join(kwokDir, "kwok")); err != nil {
			kwokErr = fmt.Errorf("kwok missing (run hack/install-kwok.sh): %w", err)
		}
	})
	return kwokDir, kwokErr
}

// startPods starts what makes pods run, once kube-controller-manager runs:
// kube-scheduler, kwok with its Stages, the nodes and the default
// StorageClass; it returns once every node is Ready.
func (s *Stack) startPods(ctx context.Context) error {
	if _, err := os.Stat(s.Bin.KubeScheduler); err != nil {
		return fmt.Errorf("kube-scheduler missing from the test binaries (run hack/install-test-binaries.sh): %w", err)
	}
	kwok, err := findKwok()
	if err != nil {
		return err
	}
	if err := s.startScheduler(); err != nil {
		return err
	}
	if err := s.startKwok(kwok); err != nil {
		return err
	}
	if err := s.createNodes(ctx); err != nil {
		return err
	}
	sc := &storagev1.StorageClass{
		ObjectMeta: metav1.ObjectMeta{Name: DefaultStorageClass, Annotations: map[string]string{
			"storageclass.kubernetes.io/is-default-class": "true",
		}},
		Provisioner:       "kubernetes.io/host-path",
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimDelete),
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
	}
	if _, err := s.Kube.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("can't create the StorageClass %s: %w", DefaultStorageClass, err)
	}
	return s.waitNodesReady(ctx)
}

// adminKubeconfigFor writes a kubeconfig of a system:masters identity
// named user, for a control plane component.
func (s *Stack) adminKubeconfigFor(file, user string) (string, error) {
	c := s.Certs
	ck, err := c.Issue(c.ClientCA, user, []string{"system:masters"}, nil, nil, x509.ExtKeyUsageClientAuth)
	if err != nil {
		return "", err
	}
	kubeconfig := filepath.Join(s.Dir, file)
	return kubeconfig, s.writeCertKubeconfig(kubeconfig, ck)
}

func (s *Stack) startScheduler() error {
	kubeconfig, err := s.adminKubeconfigFor("kube-scheduler.kubeconfig", "system:kube-scheduler")
	if err != nil {
		return err
	}
	port, err := FreePort()
	if err != nil {
		return err
	}
	p, err := StartProcess("kube-scheduler", s.logDir(), s.Bin.KubeScheduler,
		"--kubeconfig="+kubeconfig,
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port="+strconv.Itoa(port),
	)
	return s.keep(&s.scheduler, p, err)
}

// keep records a started process in its slot and watches it for an exit
// nobody asked for.
func (s *Stack) keep(slot **Process, p *Process, err error) error {
	if err != nil {
		return err
	}
	s.mu.Lock()
	*slot = p
	s.mu.Unlock()
	s.watch(p)
	return nil
}

// startKwok runs kwok as the kubelet of every node (--manage-all-nodes:
// the stack's nodes are all kwok's), with kwok's Stages from its module and
// ours (hack/tools/kwok/pod-exit.yaml).
func (s *Stack) startKwok(dir string) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	kubeconfig, err := s.adminKubeconfigFor("kwok.kubeconfig", "kwok")
	if err != nil {
		return err
	}
	stages, err := filepath.Glob(filepath.Join(dir, "stages", "*.yaml"))
	if err != nil || len(stages) == 0 {
		return fmt.Errorf("no kwok Stage files in %s/stages (run hack/install-kwok.sh)", dir)
	}
	stages = append(stages, filepath.Join(root, "hack", "tools", "kwok", "pod-exit.yaml"))
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--manage-all-nodes=true",
		"--node-lease-duration-seconds=" + strconv.Itoa(nodeLeaseSeconds),
		// kwok's own endpoint (health, metrics), on loopback. Nothing
		// here reads it, so kwok binds a port the kernel picks: a port
		// picked for it beforehand could be taken by another package's
		// stack before kwok binds it (CI saw kwok exit on that).
		"--server-address=127.0.0.1:0",
	}
	for _, st := range stages {
		args = append(args, "--config="+st)
	}
	p, err := StartProcess("kwok", s.logDir(), filepath.Join(dir, "kwok"), args...)
	return s.keep(&s.kwok, p, err)
}

// NodeName is the name of the stack's i-th kwok node.
func NodeName(i int) string { return "kwok-node-" + strconv.Itoa(i) }

// Nodes is how many kwok nodes the stack has (0 without Options.Pods).
func (s *Stack) Nodes() int {
	if s.opts.Pods == nil {
		return 0
	}
	if s.opts.Pods.Nodes == 0 {
		return 3
	}
	return s.opts.Pods.Nodes
}

// createNodes registers the nodes as a kubelet would register itself; kwok
// fills their status (node-initialize) and keeps their Lease.
func (s *Stack) createNodes(ctx context.Context) error {
	for i := 0; i < s.Nodes(); i++ {
		name := NodeName(i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				"kubernetes.io/hostname": name,
				"kubernetes.io/os":       "linux",
				"kubernetes.io/arch":     "amd64",
				"type":                   "kwok",
			},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
		}}
		if _, err := s.Kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("can't create node %s: %w", name, err)
		}
	}
	return nil
}

// waitNodesReady waits until every node is Ready and without taints, so
// that the scheduler places pods at once.
func (s *Stack) waitNodesReady(ctx context.Context) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := s.Down(); err != nil {
			return false, err
		}
		nodes, err := s.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		ready := 0
		var waiting []string
		for _, n := range nodes.Items {
			if NodeReady(&n) && len(n.Spec.Taints) == 0 {
				ready++
			} else {
				waiting = append(waiting, fmt.Sprintf("%s (taints %v)", n.Name, n.Spec.Taints))
			}
		}
		last = fmt.Sprintf("%d of %d Ready; waiting for %v", ready, s.Nodes(), waiting)
		return ready >= s.Nodes(), nil
	})
	if err != nil {
		return fmt.Errorf("the kwok nodes never became Ready (%s): %w", last, err)
	}
	return nil
}

// NodeReady tells whether node's Ready condition is True.
func NodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// WaitDefaultServiceAccount waits until kube-controller-manager has created
// namespace's "default" ServiceAccount: until then the ServiceAccount
// admission plugin refuses a pod that names none.
func (s *Stack) WaitDefaultServiceAccount(ctx context.Context, namespace string) error {
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := s.Kube.CoreV1().ServiceAccounts(namespace).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	if err != nil {
		return fmt.Errorf("namespace %s never got its default ServiceAccount (is kube-controller-manager's serviceaccount controller running?): %w", namespace, err)
	}
	return nil
}

// SchedulerCPUSeconds is the CPU time kube-scheduler has used so far (pod
// stack only).
func (s *Stack) SchedulerCPUSeconds() (float64, error) { return s.scheduler.CPUSeconds() }

// KwokCPUSeconds is the CPU time kwok has used so far (pod stack only).
func (s *Stack) KwokCPUSeconds() (float64, error) { return s.kwok.CPUSeconds() }
