package pods

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// kubectl runs the stack's kubectl as the administrator and fails t when it
// fails. The stack's kubectl is killed after 2 minutes: waits give kubectl
// a --timeout a little shorter, so that it says what it waited for.
func kubectl(ctx context.Context, t *testing.T, args ...string) string {
	t.Helper()
	stdout, stderr, err := suite.Kubectl(ctx, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, stdout, stderr)
	}
	return stdout
}

// getJSON decodes `kubectl get ... -o json` into out.
func getJSON(ctx context.Context, t *testing.T, out interface{}, args ...string) {
	t.Helper()
	if err := json.Unmarshal([]byte(kubectl(ctx, t, append(append([]string{"get"}, args...), "-o", "json")...)), out); err != nil {
		t.Fatal(err)
	}
}

// apply applies manifest with kubectl.
func apply(ctx context.Context, t *testing.T, manifest string) {
	t.Helper()
	if err := suite.Apply(ctx, manifest); err != nil {
		t.Fatal(err)
	}
}

// namespace creates a namespace for t with kubectl and waits for its
// default ServiceAccount, without which admission refuses every pod.
func namespace(ctx context.Context, t *testing.T, name string) {
	t.Helper()
	kubectl(ctx, t, "create", "namespace", name)
	if err := suite.WaitDefaultServiceAccount(ctx, name); err != nil {
		t.Fatal(err)
	}
}

// start is the common beginning of a test: parallel (each in a namespace of
// its own), logs of the stack on failure, a deadline that a loaded 2-core
// machine keeps well within.
func start(t *testing.T, ns string) context.Context {
	t.Parallel()
	suite.DumpLogsOnFailure(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	namespace(ctx, t, ns)
	return ctx
}

const pause = "registry.k8s.io/pause:3.10"

// rollOut applies the workload kind (apps/v1: Deployment, DaemonSet) ns/name
// of pause containers labelled app=name, with extraSpec (YAML lines
// indented as fields of spec), waits for kubectl rollout status to say it
// is done, and returns its pods.
func rollOut(ctx context.Context, t *testing.T, kind, ns, name, extraSpec string) corev1.PodList {
	t.Helper()
	apply(ctx, t, fmt.Sprintf(`apiVersion: apps/v1
kind: %[1]s
metadata: {name: %[3]s, namespace: %[2]s}
spec:
%[5]s  selector: {matchLabels: {app: %[3]s}}
  template:
    metadata: {labels: {app: %[3]s}}
    spec:
      containers: [{name: %[3]s, image: %[4]s}]
`, kind, ns, name, pause, extraSpec))
	kubectl(ctx, t, "rollout", "status", "-n", ns, strings.ToLower(kind)+"/"+name, "--timeout=110s")
	var pods corev1.PodList
	getJSON(ctx, t, &pods, "pods", "-n", ns, "-l", "app="+name)
	return pods
}

// readyPod applies a bare pod of one container and waits until it is Ready.
func readyPod(ctx context.Context, t *testing.T, namespace, name string) {
	t.Helper()
	apply(ctx, t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: %s}
spec:
  containers: [{name: c, image: %s}]
`, name, namespace, pause))
	kubectl(ctx, t, "wait", "-n", namespace, "--for=condition=Ready", "pod/"+name, "--timeout=110s")
}

func TestDeploymentReachesReadyReplicas(t *testing.T) {
	ctx := start(t, "deployment")
	pods := rollOut(ctx, t, "Deployment", "deployment", "web", "  replicas: 3\n")
	var d appsv1.Deployment
	getJSON(ctx, t, &d, "-n", "deployment", "deployment/web")
	if d.Status.ReadyReplicas != 3 || d.Status.AvailableReplicas != 3 {
		t.Fatalf("deployment/web: %d ready, %d available replicas, want 3", d.Status.ReadyReplicas, d.Status.AvailableReplicas)
	}
	for _, p := range pods.Items {
		if p.Spec.NodeName == "" || p.Status.Phase != corev1.PodRunning || !podReady(&p) {
			t.Errorf("pod %s: node %q, phase %s, ready %v; want scheduled, Running and Ready", p.Name, p.Spec.NodeName, p.Status.Phase, podReady(&p))
		}
	}
}

func TestStatefulSetClaimsBindAndPodsBecomeReadyInOrder(t *testing.T) {
	ctx := start(t, "statefulset")
	apply(ctx, t, `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db, namespace: statefulset}
spec:
  replicas: 3
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers:
      - name: db
        image: `+pause+`
        volumeMounts: [{name: data, mountPath: /data}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 1Gi}}
`)
	kubectl(ctx, t, "rollout", "status", "-n", "statefulset", "statefulset/db", "--timeout=110s")
	var claims corev1.PersistentVolumeClaimList
	getJSON(ctx, t, &claims, "pvc", "-n", "statefulset")
	if len(claims.Items) != 3 {
		t.Fatalf("%d PersistentVolumeClaims, want 3 (one per pod)", len(claims.Items))
	}
	for _, c := range claims.Items {
		if c.Status.Phase != corev1.ClaimBound || c.Spec.VolumeName == "" {
			t.Errorf("claim %s is %s (volume %q), want Bound", c.Name, c.Status.Phase, c.Spec.VolumeName)
		}
	}
	// OrderedReady: pod i+1 is created only once pod i is Ready.
	var readyAt []time.Time
	for i := 0; i < 3; i++ {
		var p corev1.Pod
		getJSON(ctx, t, &p, "pod", "-n", "statefulset", fmt.Sprintf("db-%d", i))
		if !podReady(&p) {
			t.Fatalf("pod %s is not Ready", p.Name)
		}
		if i > 0 && p.CreationTimestamp.Time.Before(readyAt[i-1]) {
			t.Errorf("pod %s created at %s, before db-%d became Ready at %s", p.Name, p.CreationTimestamp, i-1, readyAt[i-1])
		}
		readyAt = append(readyAt, readySince(&p))
	}
}

func TestJobCompletes(t *testing.T) {
	ctx := start(t, "job")
	apply(ctx, t, `apiVersion: batch/v1
kind: Job
metadata: {name: once, namespace: job}
spec:
  completions: 2
  parallelism: 2
  template:
    spec:
      restartPolicy: Never
      containers: [{name: once, image: busybox, command: [echo, done]}]
`)
	kubectl(ctx, t, "wait", "-n", "job", "--for=condition=Complete", "job/once", "--timeout=110s")
	var pods corev1.PodList
	getJSON(ctx, t, &pods, "pods", "-n", "job", "-l", "job-name=once")
	if len(pods.Items) != 2 {
		t.Fatalf("%d pods of job/once, want 2", len(pods.Items))
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodSucceeded {
			t.Errorf("pod %s is %s, want Succeeded", p.Name, p.Status.Phase)
		}
	}
}

// A pod that a controller owns directly (no Job), as Metacontroller's
// IndexedJob owns its pods, completes when its restartPolicy says that its
// container exits for good (hack/tools/kwok/pod-exit.yaml); one with
// restartPolicy Always, owned the same way, keeps running.
func TestDirectlyOwnedPodWhoseContainerExitsCompletes(t *testing.T) {
	ctx := start(t, "direct")
	apply(ctx, t, `apiVersion: v1
kind: ConfigMap
metadata: {name: owner, namespace: direct}
`)
	uid := kubectl(ctx, t, "get", "-n", "direct", "configmap/owner", "-o", "jsonpath={.metadata.uid}")
	for _, pod := range []struct{ name, restart string }{{"exits", "Never"}, {"retries", "OnFailure"}, {"serves", "Always"}} {
		apply(ctx, t, fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata:
  name: %s
  namespace: direct
  ownerReferences: [{apiVersion: v1, kind: ConfigMap, name: owner, uid: %s, controller: true}]
spec:
  restartPolicy: %s
  containers: [{name: c, image: busybox, command: [echo, index]}]
`, pod.name, uid, pod.restart))
	}
	for _, name := range []string{"exits", "retries"} {
		kubectl(ctx, t, "wait", "-n", "direct", "--for=jsonpath={.status.phase}=Succeeded", "pod/"+name, "--timeout=110s")
	}
	kubectl(ctx, t, "wait", "-n", "direct", "--for=condition=Ready", "pod/serves", "--timeout=110s")
	var p corev1.Pod
	getJSON(ctx, t, &p, "-n", "direct", "pod/exits")
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Terminated == nil ||
		p.Status.ContainerStatuses[0].State.Terminated.ExitCode != 0 {
		t.Errorf("pod/exits: container statuses %+v, want one terminated with exit code 0", p.Status.ContainerStatuses)
	}
	// Both Stages have had their turn at pod/serves by now: it is Ready,
	// and pod/exits, created before it, has completed.
	getJSON(ctx, t, &p, "-n", "direct", "pod/serves")
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("pod/serves (restartPolicy Always) is %s, want Running", p.Status.Phase)
	}
}

func TestDaemonSetRunsAPodPerNode(t *testing.T) {
	ctx := start(t, "daemonset")
	pods := rollOut(ctx, t, "DaemonSet", "daemonset", "agent", "")
	var nodes []string
	for _, p := range pods.Items {
		if !podReady(&p) {
			t.Errorf("pod %s is not Ready", p.Name)
		}
		nodes = append(nodes, p.Spec.NodeName)
	}
	sort.Strings(nodes)
	var want []string
	for i := 0; i < suite.Nodes(); i++ {
		want = append(want, framework.NodeName(i))
	}
	if len(want) == 0 || strings.Join(nodes, ",") != strings.Join(want, ",") {
		t.Fatalf("daemonset/agent's pods are on nodes %v, want one on each of %v", nodes, want)
	}
}

func TestDeletedPodGoes(t *testing.T) {
	ctx := start(t, "delete")
	readyPod(ctx, t, "delete", "doomed")
	// A graceful delete, as a user makes one: the kubelet (here kwok) ends
	// the pod, and the object goes.
	kubectl(ctx, t, "delete", "-n", "delete", "pod/doomed", "--wait=true", "--timeout=110s")
	if out := kubectl(ctx, t, "get", "-n", "delete", "pods", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Fatalf("pods left after the delete: %s", out)
	}
}

// Without Leases renewed (kwok's --node-lease-duration-seconds),
// kube-controller-manager's node-lifecycle controller takes a node for
// NotReady --node-monitor-grace-period (50 s) after its last heartbeat.
// The test waits, per node, for a Lease renewal well past that since the
// node was created, then finds every node Ready, untainted and never
// reported NotReady.
func TestNodesStayReady(t *testing.T) {
	t.Parallel()
	suite.DumpLogsOnFailure(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const past = 75 * time.Second
	if suite.Nodes() == 0 {
		t.Fatal("the stack has no nodes: it was started without framework.WithPods")
	}
	for i := 0; i < suite.Nodes(); i++ {
		name := framework.NodeName(i)
		var node corev1.Node
		getJSON(ctx, t, &node, "node", name)
		var last string
		err := wait.PollUntilContextTimeout(ctx, 2*time.Second, 4*time.Minute, true, func(ctx context.Context) (bool, error) {
			var lease coordinationv1.Lease
			stdout, stderr, err := suite.Kubectl(ctx, "get", "lease", "-n", "kube-node-lease", name, "-o", "json")
			if err != nil {
				last = stderr
				return false, nil
			}
			if err := json.Unmarshal([]byte(stdout), &lease); err != nil {
				return false, err
			}
			if lease.Spec.RenewTime == nil {
				last = "no renewTime"
				return false, nil
			}
			last = "renewed at " + lease.Spec.RenewTime.String()
			return lease.Spec.RenewTime.Time.Sub(node.CreationTimestamp.Time) > past, nil
		})
		if err != nil {
			t.Fatalf("node %s (created %s): its Lease was never renewed %s after (last: %s): %v", name, node.CreationTimestamp, past, last, err)
		}
	}
	var nodes corev1.NodeList
	getJSON(ctx, t, &nodes, "nodes")
	if len(nodes.Items) != suite.Nodes() {
		t.Errorf("%d nodes, want %d", len(nodes.Items), suite.Nodes())
	}
	for _, n := range nodes.Items {
		if !framework.NodeReady(&n) || len(n.Spec.Taints) > 0 {
			t.Errorf("node %s: Ready %v, taints %v; want Ready and untainted", n.Name, framework.NodeReady(&n), n.Spec.Taints)
		}
	}
	var events corev1.EventList
	getJSON(ctx, t, &events, "events", "-A", "--field-selector", "involvedObject.kind=Node,reason=NodeNotReady")
	for _, e := range events.Items {
		t.Errorf("node %s was reported NotReady at %s: %s", e.InvolvedObject.Name, e.FirstTimestamp, e.Message)
	}
}

// A pod carries what admission adds to it as on a real cluster: the
// kube-api-access token volume (the ServiceAccount plugin, given the
// namespace's default ServiceAccount by kube-controller-manager), mounted in
// each container, and the default tolerations.
func TestPodsCarryWhatAdmissionAdds(t *testing.T) {
	ctx := start(t, "admission")
	readyPod(ctx, t, "admission", "plain")
	var p corev1.Pod
	getJSON(ctx, t, &p, "-n", "admission", "pod/plain")
	if p.Spec.ServiceAccountName != "default" {
		t.Errorf("serviceAccountName %q, want default", p.Spec.ServiceAccountName)
	}
	var tokenVolume string
	for _, v := range p.Spec.Volumes {
		if strings.HasPrefix(v.Name, "kube-api-access-") && v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.ServiceAccountToken != nil {
					tokenVolume = v.Name
				}
			}
		}
	}
	if tokenVolume == "" {
		t.Fatalf("no kube-api-access-… projected token volume among %+v", p.Spec.Volumes)
	}
	mounted := false
	for _, m := range p.Spec.Containers[0].VolumeMounts {
		mounted = mounted || (m.Name == tokenVolume && m.MountPath == "/var/run/secrets/kubernetes.io/serviceaccount")
	}
	if !mounted {
		t.Errorf("container c does not mount %s: %+v", tokenVolume, p.Spec.Containers[0].VolumeMounts)
	}
	tolerated := map[string]bool{}
	for _, tol := range p.Spec.Tolerations {
		tolerated[tol.Key] = true
	}
	if !tolerated["node.kubernetes.io/not-ready"] || !tolerated["node.kubernetes.io/unreachable"] {
		t.Errorf("tolerations %+v, want the defaults for not-ready and unreachable nodes", p.Spec.Tolerations)
	}
	// The volume projects this ConfigMap, which kube-controller-manager
	// publishes in every namespace.
	kubectl(ctx, t, "wait", "-n", "admission", "--for=create", "configmap/kube-root-ca.crt", "--timeout=110s")
}

func podReady(p *corev1.Pod) bool {
	return !readySince(p).IsZero()
}

// readySince is when p became Ready; zero when it is not.
func readySince(p *corev1.Pod) time.Time {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
			return c.LastTransitionTime.Time
		}
	}
	return time.Time{}
}
