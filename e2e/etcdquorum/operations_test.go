package etcdquorum

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	versioned "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned"
)

// clientSecretDir puts the server's etcd client certificate in a directory
// of its own, under the key names of the chart's <fullname>-etcd-client
// Secret, and points the cluster's client at it: the files the server and
// the CronJobs read, which a rotation rewrites.
func (c *cluster) clientSecretDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(c.dir, "etcd-client")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, from := range map[string]string{"ca.crt": c.ca, "tls.crt": c.client.CertFile, "tls.key": c.client.KeyFile} {
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		writeAtomically(t, filepath.Join(dir, name), data)
	}
	c.ca = filepath.Join(dir, "ca.crt")
	c.client = framework.CertKey{CertFile: filepath.Join(dir, "tls.crt"), KeyFile: filepath.Join(dir, "tls.key")}
	return dir
}

// writeAtomically replaces path as the kubelet updates a Secret's volume
// (a new file swapped in): a reader never sees half a certificate.
func writeAtomically(t *testing.T, path string, data []byte) {
	t.Helper()
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

func (c *cluster) endpoints() []string {
	var out []string
	for _, m := range c.members {
		out = append(out, m.clientURL)
	}
	return out
}

// chartCronJobs renders the chart with set and returns its CronJobs by
// name.
func chartCronJobs(t *testing.T, set ...string) map[string]batchv1.CronJob {
	t.Helper()
	rendered, err := framework.RenderChart(framework.CompositeNamespace, "", set...)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := framework.SplitManifests(rendered)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]batchv1.CronJob{}
	for _, o := range objs {
		if o.Kind != "CronJob" {
			continue
		}
		var cj batchv1.CronJob
		if err := yaml.UnmarshalStrict([]byte(o.YAML), &cj); err != nil {
			t.Fatal(err)
		}
		out[cj.Name] = cj
	}
	return out
}

// jobCommand is a CronJob container's command line and environment as a
// process here runs them: each volume's mount path replaced by the local
// directory standing for it, --endpoints by the loopback members, and
// etcdctl by the pinned one. Everything else is the chart's.
func jobCommand(t *testing.T, ctr corev1.Container, volumes map[string]string, endpoints []string, etcdClients string) *exec.Cmd {
	t.Helper()
	replace := func(s string) string {
		for _, m := range ctr.VolumeMounts {
			dir, ok := volumes[m.Name]
			if !ok {
				t.Fatalf("container %s mounts %s, which the test has no directory for", ctr.Name, m.Name)
			}
			s = strings.ReplaceAll(s, strings.TrimSuffix(m.MountPath, "/"), dir)
		}
		return s
	}
	var argv []string
	for _, a := range append(slices.Clone(ctr.Command), ctr.Args...) {
		if strings.HasPrefix(a, "--endpoints=") {
			a = "--endpoints=" + strings.Join(endpoints, ",")
		}
		argv = append(argv, replace(a))
	}
	if argv[0] == "etcdctl" {
		argv[0] = filepath.Join(etcdClients, "etcdctl")
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = os.Environ()
	for _, e := range ctr.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+replace(e.Value))
	}
	return cmd
}

func runJobCommand(t *testing.T, what string, cmd *exec.Cmd) string {
	t.Helper()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %s: %v\n%s", what, strings.Join(cmd.Args, " "), err, out)
	}
	return string(out)
}

// TestChartBackupAndDefragCronJobsRunAndThreeMembersRestore runs what the
// chart's etcd.backup and etcd.defrag CronJobs run (their containers'
// command lines, with the pinned etcdctl and a shell) against three etcd
// members running the chart's arguments with the server on them: each
// backup run leaves a snapshot and keeps the newest etcd.backup.keep; the
// defrag run defragments every member and gives back the space the
// compaction freed. Then the restore artifacts/deploy/README.md describes
// (every member restored from the newest snapshot with etcdutl, under its
// own name, with the whole member list) brings back a three-member
// cluster on which a new server serves every object with its UID.
func TestChartBackupAndDefragCronJobsRunAndThreeMembersRestore(t *testing.T) {
	bin := findBinaries(t)
	const keep = 2
	jobs := chartCronJobs(t, "etcd.backup.enabled=true", "etcd.defrag.enabled=true", fmt.Sprintf("etcd.backup.keep=%d", keep))
	backupJob, ok := jobs["composite-apiserver-etcd-backup"]
	if !ok {
		t.Fatalf("with etcd.backup.enabled the chart renders no composite-apiserver-etcd-backup CronJob (CronJobs: %v)", slices.Sorted(maps.Keys(jobs)))
	}
	defragJob, ok := jobs["composite-apiserver-etcd-defrag"]
	if !ok {
		t.Fatalf("with etcd.defrag.enabled the chart renders no composite-apiserver-etcd-defrag CronJob (CronJobs: %v)", slices.Sorted(maps.Keys(jobs)))
	}

	dir := t.TempDir()
	c := newCluster(t, bin.Etcd, dir)
	clientDir := c.clientSecretDir(t)
	c.startAll(t)
	client, server := startServer(t, bin.CompositeAPIServer, filepath.Join(dir, "server"), c, c.endpoints(), "")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("composite-apiserver:\n%s", server.Tail(4000))
		}
	})
	ctx := context.Background()
	ccs := client.MetacontrollerV1alpha1().CompositeControllers()
	// Objects to keep, and objects written and deleted: the space their
	// revisions take is what compaction frees and defrag gives back.
	for i := range 300 {
		name := fmt.Sprintf("gone-%d", i)
		if _, err := ccs.Create(ctx, controller(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := ccs.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		if _, err := ccs.Create(ctx, controller(fmt.Sprintf("kept-%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	stored := storedUIDs(t, client)

	newest := runBackups(t, backupJob, c, clientDir, keep)
	compactAndDefrag(t, defragJob, c, clientDir)

	// The README's order: the server first, so nothing writes to the
	// members being replaced.
	if err := server.Stop(30 * time.Second); err != nil {
		t.Fatal(err)
	}
	restoreThreeMembers(t, c, newest)
	restored, _ := startServer(t, bin.CompositeAPIServer, filepath.Join(dir, "restored-server"), c, c.endpoints(), "")
	got := storedUIDs(t, restored)
	missing := 0
	for name, uid := range stored {
		if got[name] != uid {
			missing++
		}
	}
	t.Logf("restored three members from %s: %d of %d objects served with their UIDs", filepath.Base(newest), len(stored)-missing, len(stored))
	if missing > 0 || len(got) != len(stored) {
		t.Errorf("after the restore the server serves %d objects; %d of the %d backed up are missing or changed", len(got), missing, len(stored))
	}
}

// runBackups runs the backup CronJob's pod keep+1 times, each the init
// container's etcdctl and then the shell that names and prunes (a member
// standing for the Service's name), and returns the newest snapshot.
func runBackups(t *testing.T, job batchv1.CronJob, c *cluster, clientDir string, keep int) string {
	t.Helper()
	ctx := context.Background()
	tools, err := framework.FindEtcdClients()
	if err != nil {
		t.Fatal(err)
	}
	backupDir := filepath.Join(c.dir, "backup")
	if err := os.MkdirAll(backupDir, 0o700); err != nil {
		t.Fatal(err)
	}
	volumes := map[string]string{"backup": backupDir, "etcd-client": clientDir}
	pod := job.Spec.JobTemplate.Spec.Template.Spec
	if len(pod.InitContainers) != 1 || len(pod.Containers) != 1 {
		t.Fatalf("the backup CronJob's pod has %d init containers and %d containers, want 1 and 1", len(pod.InitContainers), len(pod.Containers))
	}
	var last time.Time
	for run := range keep + 1 {
		// Snapshots are named by the second: a run in the same second as
		// the previous one would replace its file, not add one.
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
			return time.Now().UTC().Truncate(time.Second).After(last), nil
		}); err != nil {
			t.Fatal(err)
		}
		last = time.Now().UTC().Truncate(time.Second)
		t.Logf("backup run %d: %s", run, strings.TrimSpace(runJobCommand(t, "the backup's snapshot container",
			jobCommand(t, pod.InitContainers[0], volumes, c.endpoints()[:1], tools))))
		t.Logf("backup run %d: %s", run, strings.TrimSpace(runJobCommand(t, "the backup's keep container",
			jobCommand(t, pod.Containers[0], volumes, nil, tools))))
	}
	snapshots, err := filepath.Glob(filepath.Join(backupDir, "snapshot-*.db"))
	if err != nil {
		t.Fatal(err)
	}
	if len(snapshots) != keep {
		t.Fatalf("after %d backup runs with keep=%d the volume holds %v", keep+1, keep, snapshots)
	}
	slices.Sort(snapshots)
	newest := snapshots[len(snapshots)-1]
	t.Logf("etcdutl snapshot status %s:\n%s", filepath.Base(newest), strings.TrimSpace(runJobCommand(t, "etcdutl",
		exec.Command(filepath.Join(tools, "etcdutl"), "snapshot", "status", newest, "-w", "table"))))
	return newest
}

// compactAndDefrag compacts to now, as the server does every five minutes,
// then runs the defrag CronJob's etcdctl: every member is defragmented and
// its backend shrinks.
func compactAndDefrag(t *testing.T, job batchv1.CronJob, c *cluster, clientDir string) {
	t.Helper()
	ctx := context.Background()
	tools, err := framework.FindEtcdClients()
	if err != nil {
		t.Fatal(err)
	}
	cli := c.etcdClient(t, c.endpoints()...)
	head, err := cli.Get(ctx, "compact-marker")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Compact(ctx, head.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	before := dbSizes(t, c)
	out := runJobCommand(t, "the defrag container", jobCommand(t, job.Spec.JobTemplate.Spec.Template.Spec.Containers[0],
		map[string]string{"etcd-client": clientDir}, c.endpoints(), tools))
	t.Logf("defrag:\n%s", strings.TrimSpace(out))
	after := dbSizes(t, c)
	for i, m := range c.members {
		if !strings.Contains(out, m.clientURL) {
			t.Errorf("the defrag run did not defragment %s (%s)", m.name, m.clientURL)
		}
		t.Logf("%s: backend %d bytes before defrag, %d after", m.name, before[i], after[i])
		if after[i] >= before[i] {
			t.Errorf("%s's backend is %d bytes after defrag, %d before: nothing given back", m.name, after[i], before[i])
		}
	}
}

// restoreThreeMembers follows artifacts/deploy/README.md, "Restore": the
// server and every member stopped, each member's data directory restored
// anew from the same snapshot with etcdutl under its own name and peer
// URL, the whole member list and the chart's cluster token, then the
// members started with the chart's arguments.
func restoreThreeMembers(t *testing.T, c *cluster, snapshot string) {
	t.Helper()
	tools, err := framework.FindEtcdClients()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range c.members {
		if err := m.proc.Stop(30 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	var token string
	for _, a := range c.etcd.container.Args {
		if v, ok := strings.CutPrefix(a, "--initial-cluster-token="); ok {
			token = v
		}
	}
	if token == "" {
		t.Fatal("the chart's etcd has no --initial-cluster-token")
	}
	var initial []string
	for _, m := range c.members {
		initial = append(initial, m.name+"="+m.peerURL)
	}
	for _, m := range c.members {
		// A new data directory: the old one is moved aside, as the README says.
		dataDir := filepath.Join(c.dir, m.name+"-restored")
		runJobCommand(t, "etcdutl snapshot restore", exec.Command(filepath.Join(tools, "etcdutl"), "snapshot", "restore", snapshot,
			"--data-dir", dataDir, "--name", m.name, "--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-token", token, "--initial-advertise-peer-urls", m.peerURL))
		m.args = c.args(t, m, strings.Join(initial, ","), dataDir)
	}
	c.startAll(t)
}

func dbSizes(t *testing.T, c *cluster) []int64 {
	t.Helper()
	var out []int64
	for _, m := range c.members {
		cli := c.etcdClient(t, m.clientURL)
		st, err := cli.Status(context.Background(), m.clientURL)
		if err != nil {
			t.Fatalf("status of %s: %v", m.name, err)
		}
		out = append(out, st.DbSize)
	}
	return out
}

func storedUIDs(t *testing.T, client versioned.Interface) map[string]types.UID {
	t.Helper()
	list, err := client.MetacontrollerV1alpha1().CompositeControllers().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]types.UID{}
	for _, cc := range list.Items {
		out[cc.Name] = cc.UID
	}
	return out
}
