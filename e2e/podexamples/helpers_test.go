package podexamples

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// exampleTimeout bounds each step of an example: a step waits for pods
// that kube-scheduler binds and kwok makes Ready one sync after another,
// on a shared 2-core machine.
const exampleTimeout = 3 * time.Minute

// example is one of Metacontroller's examples, installed for a test.
type example struct {
	// dir is the test's copy of testdata/metacontroller/<name>.
	dir string
	// ns is the test's own namespace, where test.sh would use default.
	ns string
}

// installExample installs Metacontroller's example name as its test.sh
// does (`kubectl apply -k <base>`: v1, or manifest), with the hook server
// its Deployment would run (Metacontroller's nodejs server for .js hooks,
// python for sync.py, jsonnetd for .jsonnet) running as a local process
// instead. The only change to the example's manifests is an overlay that
// points each hook's URL (http://<service>.metacontroller/<path>) at that
// process; its Deployment, Service and ConfigMap are applied as they are
// (the pod stack schedules and readies the Deployment's pod: no
// container runs). The example's objects go to a namespace of the test's
// own.
func installExample(t *testing.T, name, base string) *example {
	t.Helper()
	ctx := context.Background()
	ex := &example{dir: filepath.Join(t.TempDir(), name), ns: "ex-" + name}
	if err := os.CopyFS(ex.dir, os.DirFS(filepath.Join("testdata", "metacontroller", name))); err != nil {
		t.Fatal(err)
	}
	hookURL := ex.startHook(t, filepath.Join(ex.dir, "manifest"))
	overlay, err := hookOverlay(filepath.Join(ex.dir, "manifest"), base, hookURL)
	if err != nil {
		t.Fatal(err)
	}
	overlayDir := filepath.Join(ex.dir, "e2e-overlay")
	if err := os.MkdirAll(overlayDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(overlayDir, "kustomization.yaml"), overlay, 0o644); err != nil {
		t.Fatal(err)
	}
	suite.MustApply(t, exampleRights)
	for _, ns := range []string{"metacontroller", ex.ns} {
		suite.MustCreateNamespace(t, ns)
	}
	// As test.sh: the example's objects name their namespaces.
	if out, errOut, err := suite.Kubectl(ctx, "apply", "-k", overlayDir); err != nil {
		t.Fatalf("kubectl apply -k %s: %v\n%s%s", overlayDir, err, out, errOut)
	}
	t.Cleanup(func() {
		_, _, _ = suite.Kubectl(context.Background(), "delete", "-k", overlayDir, "--wait=false", "--ignore-not-found")
		_, _, _ = suite.Kubectl(context.Background(), "delete", "namespace", ex.ns, "--wait=false", "--ignore-not-found")
	})
	return ex
}

// exampleRights is what an administrator grants composite-apiserver, as
// the README says (a ClusterRole aggregated into its own), for the
// examples' controllers: their parents, the parents' status, and the
// children and decorated objects, where Metacontroller's own install
// grants every verb on every resource.
var exampleRights = framework.AggregatedRights("composite-apiserver-metacontroller-examples", `- apiGroups: ["ctl.enisoc.com", "ctl.example.com"]
  resources: ["*"]
  verbs: ["get", "list", "watch", "update", "patch"]
- apiGroups: [""]
  resources: ["pods", "persistentvolumeclaims", "services"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
- apiGroups: ["apps"]
  resources: ["replicasets", "daemonsets", "statefulsets", "deployments"]
  verbs: ["get", "list", "watch", "create", "update", "patch", "delete"]
# A DecoratorController writes the status its hook answers for the objects
# it decorates (service-per-pod: StatefulSets and Pods).
- apiGroups: [""]
  resources: ["pods/status"]
  verbs: ["update"]
- apiGroups: ["apps"]
  resources: ["statefulsets/status"]
  verbs: ["update"]
`)

// startHook starts the hook server of the hooks in dir, as the example's
// Deployment runs it, on a free loopback port, and answers its URL.
func (ex *example) startHook(t *testing.T, dir string) string {
	t.Helper()
	log, err := os.Create(filepath.Join(ex.dir, "hook.log"))
	if err != nil {
		t.Fatal(err)
	}
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	hooks := filepath.Join(root, "e2e", "hooks")
	var cmd *exec.Cmd
	switch {
	case exists(filepath.Join(dir, "sync.js")):
		// examples/nodejs/server.js serves ./hooks/*.js beside it.
		server := filepath.Join(ex.dir, "nodejs-server")
		if err := os.MkdirAll(server, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.CopyFS(server, os.DirFS(filepath.Join("testdata", "metacontroller", "nodejs"))); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(dir, filepath.Join(server, "hooks")); err != nil {
			t.Fatal(err)
		}
		cmd = exec.Command("node", "-r", filepath.Join(hooks, "listen-anywhere.js"), "server.js")
		cmd.Dir = server
	case exists(filepath.Join(dir, "sync.py")):
		cmd = exec.Command("python3", filepath.Join(hooks, "listen-anywhere.py"), filepath.Join(dir, "sync.py"))
	default:
		cmd = exec.Command(jsonnetd(t), "-dir", dir)
	}
	port, err := framework.StartListening(cmd, log, "the hook server of "+filepath.Base(ex.dir))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			data, _ := os.ReadFile(log.Name())
			t.Logf("the hook server's log:\n%s", data)
		}
		log.Close()
	})
	return fmt.Sprintf("http://127.0.0.1:%d", port)
}

var (
	jsonnetdOnce sync.Once
	jsonnetdBin  string
	jsonnetdErr  error
)

// jsonnetd builds e2e/hooks/jsonnetd once.
func jsonnetd(t *testing.T) string {
	t.Helper()
	jsonnetdOnce.Do(func() {
		dir, err := os.MkdirTemp("", "jsonnetd-")
		if err != nil {
			jsonnetdErr = err
			return
		}
		jsonnetdBin = filepath.Join(dir, "jsonnetd")
		out, err := exec.Command("go", "build", "-o", jsonnetdBin, "github.com/composite-apiserver/composite-apiserver/e2e/hooks/jsonnetd").CombinedOutput()
		if err != nil {
			jsonnetdErr = fmt.Errorf("go build jsonnetd: %v\n%s", err, out)
		}
	})
	if jsonnetdErr != nil {
		t.Fatal(jsonnetdErr)
	}
	return jsonnetdBin
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// hookOverlay is the kustomization, beside the example's base (v1 or
// manifest), that replaces the host of every hook URL of the example's
// controllers (in the YAML files of manifestDir) with hookURL's, keeping
// each URL's path.
func hookOverlay(manifestDir, base, hookURL string) ([]byte, error) {
	files, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	to, err := url.Parse(hookURL)
	if err != nil {
		return nil, err
	}
	var patches []interface{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		docs, err := framework.SplitManifests(string(data))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, doc := range docs {
			if !strings.HasPrefix(doc.APIVersion, "metacontroller.k8s.io/") {
				continue
			}
			o := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc.YAML), &o.Object); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			ops, err := hookURLOps(o, to)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if len(ops) == 0 {
				continue
			}
			patch, err := json.Marshal(ops)
			if err != nil {
				return nil, err
			}
			patches = append(patches, map[string]interface{}{
				"target": map[string]interface{}{"group": "metacontroller.k8s.io", "kind": doc.Kind, "name": doc.Name},
				"patch":  string(patch),
			})
		}
	}
	if len(patches) == 0 {
		return nil, fmt.Errorf("no hook URL in the controllers of %s", manifestDir)
	}
	return json.Marshal(map[string]interface{}{"resources": []string{"../" + base}, "patches": patches})
}

// hookURLOps are the JSON patch operations that point o's hooks' URLs at
// to's host.
func hookURLOps(o *unstructured.Unstructured, to *url.URL) ([]map[string]interface{}, error) {
	hooks, _, _ := unstructured.NestedMap(o.Object, "spec", "hooks")
	var ops []map[string]interface{}
	for name := range hooks {
		raw, found, _ := unstructured.NestedString(hooks, name, "webhook", "url")
		if !found {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil {
			return nil, err
		}
		u.Scheme, u.Host = to.Scheme, to.Host
		ops = append(ops, map[string]interface{}{"op": "replace", "path": "/spec/hooks/" + name + "/webhook/url", "value": u.String()})
	}
	return ops, nil
}

// kubectl runs kubectl in the test's namespace and fails
// the test if it fails.
func (ex *example) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := suite.Kubectl(context.Background(), append([]string{"-n", ex.ns}, args...)...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// applyFile applies one of the example's files (as test.sh's
// `kubectl apply -f my-....yaml`) to the test's namespace.
func (ex *example) applyFile(t *testing.T, name string) {
	t.Helper()
	ex.kubectl(t, "apply", "-f", filepath.Join(ex.dir, name))
}

// jsonpath answers `kubectl get <what> -o jsonpath=<path>`; an error
// (not found yet) is an answer of its own.
func (ex *example) jsonpath(what []string, path string) (string, error) {
	args := append([]string{"get"}, what...)
	if ex.ns != "" {
		args = append([]string{"-n", ex.ns}, args...)
	}
	out, errOut, err := suite.Kubectl(context.Background(), append(args, "-o", "jsonpath="+path)...)
	if err != nil {
		return "", fmt.Errorf("%v: %s", err, strings.TrimSpace(errOut))
	}
	return strings.TrimSpace(out), nil
}

// until waits, as test.sh's `until [[ ... ]]; do sleep 1; done`, for
// `kubectl get <what> -o jsonpath=<path>` to answer want; it fails at
// once if the stack went down.
func (ex *example) until(t *testing.T, what []string, path, want string) {
	t.Helper()
	ex.waitFor(t, fmt.Sprintf("kubectl get %s -o jsonpath=%s to be %q", strings.Join(what, " "), path, want), func() (bool, error) {
		got, err := ex.jsonpath(what, path)
		if err != nil {
			return false, err
		}
		if got != want {
			return false, fmt.Errorf("it is %q", got)
		}
		return true, nil
	})
}

// updatedCondition reads the reason and the message of what's Updated
// condition in one read: two reads could mix a condition with the next.
func (ex *example) updatedCondition(what []string) (reason, message string, err error) {
	got, err := ex.jsonpath(what, `{.status.conditions[?(@.type=="Updated")].reason}{"\n"}{.status.conditions[?(@.type=="Updated")].message}`)
	reason, message, _ = strings.Cut(got, "\n")
	return reason, message, err
}

// untilRolloutWaitsOn waits for what's Updated condition to say
// RolloutWaiting on child's check. A rollout waits on other things before
// (the old child being deleted, a generation not observed yet), so the
// reason alone could be an earlier step.
func (ex *example) untilRolloutWaitsOn(t *testing.T, what []string, child, check string) {
	t.Helper()
	ex.waitFor(t, fmt.Sprintf("%s's rollout to wait on %s's %s check", strings.Join(what, " "), child, check), func() (bool, error) {
		reason, message, err := ex.updatedCondition(what)
		if err != nil {
			return false, err
		}
		if reason != "RolloutWaiting" || !strings.Contains(message, child) || !strings.Contains(message, check) {
			return false, fmt.Errorf("its Updated condition is %s: %q", reason, message)
		}
		return true, nil
	})
}

// untilServed waits, as test.sh's `until kubectl get <resource>`, for
// the example's CRD to serve resource.
func (ex *example) untilServed(t *testing.T, resource string) {
	t.Helper()
	ex.waitFor(t, resource+" to be served", func() (bool, error) {
		_, err := ex.jsonpath([]string{resource}, "{.items}")
		return err == nil, err
	})
}

// untilGone waits for `kubectl get <what>` to answer NotFound.
func (ex *example) untilGone(t *testing.T, what ...string) {
	t.Helper()
	ex.waitFor(t, fmt.Sprintf("%s to be gone", strings.Join(what, " ")), func() (bool, error) {
		_, err := ex.jsonpath(what, "{.metadata.name}")
		if err == nil {
			return false, fmt.Errorf("it is still there")
		}
		return strings.Contains(err.Error(), "NotFound"), err
	})
}

func (ex *example) waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, exampleTimeout, true, func(context.Context) (bool, error) {
		if down := suite.Down(); down != nil {
			return false, down
		}
		ok, err := cond()
		last = err
		return ok, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v (last: %v)\nthe namespace's Events:\n%s", what, err, last, suite.NamespaceEvents(context.Background(), ex.ns))
	}
}
