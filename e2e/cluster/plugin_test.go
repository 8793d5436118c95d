package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"sigs.k8s.io/yaml"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
	"github.com/composite-apiserver/composite-apiserver/pkg/hookapi"
)

// buildPlugin builds cmd/kubectl-composite once for the package, into a
// directory of its own that goes first on kubectl's PATH.
func buildPlugin(t *testing.T) string {
	t.Helper()
	dir, err := framework.BuildKubectlPlugin()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

type pluginResult struct {
	code           int
	stdout, stderr string
}

// kubectlComposite runs `kubectl composite args...` as the administrator:
// the real kubectl finds the plugin on PATH, as it would for a user.
func kubectlComposite(t *testing.T, stdin string, args ...string) pluginResult {
	t.Helper()
	dir := buildPlugin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args = append(append([]string{"composite"}, args...), "--kubeconfig", suite.AdminKubeconfig)
	cmd := exec.CommandContext(ctx, suite.Bin.Kubectl, args...)
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+suite.AdminKubeconfig)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	r := pluginResult{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		r.code = exit.ExitCode()
	default:
		t.Fatalf("kubectl composite %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// want fails t unless the plugin exited with code.
func (r pluginResult) want(t *testing.T, code int, what string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("%s: exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", what, r.code, code, r.stdout, r.stderr)
	}
}

// oneErrorLine checks a failure: exit code 2 and one line on stderr.
func (r pluginResult) oneErrorLine(t *testing.T, what string, want ...string) {
	t.Helper()
	r.want(t, 2, what)
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "error: ") {
		t.Errorf("%s: stderr %q, want one line starting with error:", what, r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("%s: stderr %q lacks %q", what, r.stderr, w)
		}
	}
}

func writeTemp(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func helloParent(namespace, name, color string, configMaps ...string) string {
	return fmt.Sprintf("apiVersion: example.com/v1\nkind: Hello\nmetadata: {name: %s, namespace: %s}\nspec: {color: %s, configMaps: [%s]}\n",
		name, namespace, color, strings.Join(configMaps, ", "))
}

func TestPluginPreviewOfAnInlineParent(t *testing.T) {
	t.Parallel()
	const controller, ns = "plugin-inline", "plugin-inline"
	inPlaceHelloController(t, controller, ns)

	// A parent that does not exist: everything is to create.
	r := kubectlComposite(t, "", "preview", controller, "-f", writeTemp(t, "new.yaml", helloParent(ns, "new", "blue", "a", "b")))
	r.want(t, 1, "preview of a new parent")
	for _, want := range []string{"ACTION", "Create", "ConfigMap", ns + "/new-a", ns + "/new-b"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("preview of a new parent lacks %q:\n%s", want, r.stdout)
		}
	}

	// A live parent whose children are as the controller writes them: the
	// same parent, inline, changes nothing...
	suite.MustApply(t, helloParent(ns, "live", "blue", "a"))
	kubectlComposite(t, "", "sync", controller, "--parent", ns+"/live").want(t, 0, "sync")
	live := mustKubectl(t, "get", "hellos.example.com", "live", "-n", ns, "-o", "yaml")
	r = kubectlComposite(t, "", "preview", controller, "-f", writeTemp(t, "live.yaml", live))
	r.want(t, 0, "preview of a parent whose children are up to date")
	if !strings.Contains(r.stdout, "Unchanged") || strings.Contains(r.stdout, "---") {
		t.Errorf("preview of an up-to-date parent:\n%s", r.stdout)
	}
	// ...while a change of its spec updates its child, shown as a diff.
	changed := strings.Replace(live, "color: blue", "color: green", 1)
	if changed == live {
		t.Fatalf("no color in\n%s", live)
	}
	r = kubectlComposite(t, changed, "preview", controller, "-f", "-")
	r.want(t, 1, "preview of a changed parent")
	for _, want := range []string{
		"Update   ConfigMap   " + ns + "/live-a   1 change",
		"--- live/v1.ConfigMap." + ns + ".live-a\n+++ desired/v1.ConfigMap." + ns + ".live-a\n@@ -1,1 +1,1 @@ Update",
		"\n-data.color: \"blue\"\n+data.color: \"green\"\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("preview of a changed parent lacks %q:\n%s", want, r.stdout)
		}
	}
	// Inline observed children stand for the live ones, with the
	// managedFields that say what the controller set...
	children := mustKubectl(t, "get", "configmaps", "-n", ns, "-l", "app=live", "-o", "yaml", "--show-managed-fields")
	r = kubectlComposite(t, "", "preview", controller, "-f", writeTemp(t, "live.yaml", live), "--children", writeTemp(t, "children.yaml", children))
	r.want(t, 0, "preview with the live children inline")
	// ...and without them, a warning says why every field is adopted.
	children = mustKubectl(t, "get", "configmaps", "-n", ns, "-l", "app=live", "-o", "yaml")
	r = kubectlComposite(t, "", "preview", controller, "-f", writeTemp(t, "live.yaml", live), "--children", writeTemp(t, "children.yaml", children))
	r.want(t, 1, "preview with the live children inline, without managedFields")
	if !strings.Contains(r.stderr, "--show-managed-fields") || !strings.Contains(r.stdout, "(adopt)") {
		t.Errorf("children without managedFields: stderr %q, stdout\n%s", r.stderr, r.stdout)
	}
	// Nothing of the previews was persisted.
	cm, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "live-a", metav1.GetOptions{})
	if err != nil || cm.Data["color"] != "blue" {
		t.Errorf("live-a after the previews: %v %v", cm.Data, err)
	}
	if _, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(context.Background(), "new-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the preview of a new parent created new-a: %v", err)
	}
}

func TestPluginPreviewOfALiveParentSavesTheHookRequest(t *testing.T) {
	t.Parallel()
	const controller, ns = "plugin-live", "plugin-live"
	hook := inPlaceHelloController(t, controller, ns)
	suite.MustApply(t, helloParent(ns, "p", "blue", "a"))

	fixtures := filepath.Join(t.TempDir(), "fixtures")
	r := kubectlComposite(t, "", "preview", controller, "--parent", ns+"/p", "--save-request", fixtures)
	r.want(t, 1, "preview of a live parent without children")
	if !strings.Contains(r.stdout, "Create") || !strings.Contains(r.stdout, ns+"/p-a") {
		t.Errorf("preview of a live parent:\n%s", r.stdout)
	}
	data, err := os.ReadFile(filepath.Join(fixtures, ns+".p.json"))
	if err != nil {
		t.Fatalf("no hook request saved (stderr %q): %v", r.stderr, err)
	}
	var req hookapi.SyncHookRequest
	if err := json.Unmarshal(data, &req); err != nil {
		t.Fatalf("the saved hook request is not one: %v\n%s", err, data)
	}
	if req.Controller == nil || req.Controller.Name != controller || req.Parent == nil || req.Parent.GetName() != "p" || req.Parent.GetUID() == "" {
		t.Errorf("saved hook request %s: want controller %s and the live parent p", data, controller)
	}
	if _, ok := req.Children["ConfigMap.v1"]; !ok {
		t.Errorf("saved hook request's children %v lack the ConfigMap.v1 group", req.Children)
	}
	// It is a fixture the hook takes as it is.
	resp, err := http.Post(hook.URL+"/sync", "application/json", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var answer hookapi.SyncHookResponse
	if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || resp.StatusCode != http.StatusOK || len(answer.Children) != 1 {
		t.Errorf("the hook answered the fixture %s: %+v %v", resp.Status, answer, err)
	}
}

func TestPluginSyncCreatesTheChildren(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const controller, ns = "plugin-sync", "plugin-sync"
	inPlaceHelloController(t, controller, ns)
	suite.MustApply(t, helloParent(ns, "p", "blue", "a", "b"))

	// The loop is off in this package: what exists is the plugin's doing.
	r := kubectlComposite(t, "", "sync", controller, "--parent", ns+"/p")
	r.want(t, 0, "sync")
	want := "ConfigMap " + ns + "/p-a created\nConfigMap " + ns + "/p-b created\n"
	if r.stdout != want {
		t.Errorf("sync printed\n%s\nwant\n%s", r.stdout, want)
	}
	for _, name := range []string{"p-a", "p-b"} {
		cm, err := suite.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Errorf("after the sync: %v", err)
			continue
		}
		if ref := metav1.GetControllerOf(cm); ref == nil || ref.Name != "p" || cm.Data["color"] != "blue" {
			t.Errorf("%s: controller %v, data %v", name, ref, cm.Data)
		}
	}
	r = kubectlComposite(t, "", "sync", controller, "--parent", ns+"/p")
	r.want(t, 0, "second sync")
	if !strings.Contains(r.stdout, "no child changed") {
		t.Errorf("a second sync printed %q", r.stdout)
	}
}

func TestPluginRBACAppliesAndGrantsTheController(t *testing.T) {
	t.Parallel()
	suite.SetUp(t)
	hook := setUpHellos(t)
	const controller = "plugin-rbac"
	suite.MustApply(t, helloController(controller, hook.URL, "InPlace"))

	r := kubectlComposite(t, "", "rbac", controller)
	r.want(t, 0, "rbac")
	if err := suite.Apply(context.Background(), r.stdout); err != nil {
		t.Fatalf("kubectl apply of the rbac output: %v\n%s", err, r.stdout)
	}
	t.Cleanup(func() {
		_ = suite.Kube.RbacV1().ClusterRoles().Delete(context.Background(), "composite-apiserver-"+controller, metav1.DeleteOptions{})
	})
	role, err := suite.Kube.RbacV1().ClusterRoles().Get(context.Background(), "composite-apiserver-"+controller, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if role.Labels["metacontroller.k8s.io/aggregate-to-composite-apiserver"] != "true" {
		t.Errorf("labels %v: the aggregated role would not take it in", role.Labels)
	}
	rules := map[string]string{}
	for _, rule := range role.Rules {
		for _, res := range rule.Resources {
			rules[rule.APIGroups[0]+"/"+res] = strings.Join(rule.Verbs, ",")
		}
	}
	// Exactly the rights the loop checks (rights.Needed), no more.
	children := "list,watch,create,patch,delete"
	want := map[string]string{
		"example.com/hellos":        "get,list,watch,patch",
		"example.com/hellos/status": "update",
		"/configmaps":               children,
		"/services":                 children,
		"/events":                   "create",
	}
	if fmt.Sprint(rules) != fmt.Sprint(want) {
		t.Errorf("rules %v, want %v", rules, want)
	}
}

func TestPluginErrorsAreOneLine(t *testing.T) {
	t.Parallel()
	suite.SetUp(t)
	setUpHellos(t)
	// A hook of its own: it breaks it below, and the package's hook serves
	// the tests running alongside.
	hook := suite.Hook(t)
	const controller, ns = "plugin-errors", "plugin-errors"
	suite.MustCreateNamespace(t, ns)
	suite.MustApply(t, helloController(controller, hook.URL, "InPlace"))
	parent := writeTemp(t, "parent.yaml", helloParent(ns, "p", "blue", "a"))

	kubectlComposite(t, "", "preview", "no-such-controller", "-f", parent).
		oneErrorLine(t, "unknown controller", "no-such-controller", "not found")
	kubectlComposite(t, "", "rbac", "no-such-controller").
		oneErrorLine(t, "rbac of an unknown controller", "no-such-controller", "not found")
	kubectlComposite(t, "", "preview", controller, "-f", filepath.Join(t.TempDir(), "missing.yaml")).
		oneErrorLine(t, "missing file", "missing.yaml")

	if err := hook.SetMode("error500"); err != nil {
		t.Fatal(err)
	}
	kubectlComposite(t, "", "preview", controller, "-f", parent).
		oneErrorLine(t, "failing hook", controller, "sync hook", "500")
}

// proposalFile writes the fleet's controller with spec as a manifest, as
// a user would keep a proposed change.
func proposalFile(t *testing.T, spec *v1alpha1.CompositeControllerSpec) string {
	t.Helper()
	cc := &v1alpha1.CompositeController{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "CompositeController"},
		ObjectMeta: metav1.ObjectMeta{Name: fleetController},
		Spec:       *spec,
	}
	data, err := yaml.Marshal(cc)
	if err != nil {
		t.Fatal(err)
	}
	return writeTemp(t, "proposed.yaml", string(data))
}

// TestPluginPreviewAcrossTheFleet: `kubectl composite preview --all-parents
// -f proposed.yaml` prints a row per parent and the totals, -o diff every
// change, -o json the whole answer across pages; the exit code is 0
// without changes, 1 with, 2 when a parent can't be previewed.
func TestPluginPreviewAcrossTheFleet(t *testing.T) {
	t.Parallel()
	f := setUpFleet(t)
	secrets := func(s *v1alpha1.CompositeControllerSpec) {
		s.ChildResources = append(s.ChildResources, v1alpha1.CompositeControllerChildResourceRule{ResourceRule: v1alpha1.ResourceRule{APIVersion: "v1", Resource: "secrets"}})
	}
	proposed := proposalFile(t, f.proposal(t, "proposed", secrets))

	r := kubectlComposite(t, "", "preview", "--all-parents", "-f", proposed)
	r.want(t, 1, "a proposal that changes every parent")
	header := regexp.MustCompile(`(?m)^PARENT\s+CREATES\s+UPDATES\s+DELETES\s+UNCHANGED\s+STATUS\s+ERRORS$`)
	if !header.MatchString(r.stdout) {
		t.Errorf("no table header:\n%s", r.stdout)
	}
	for key := range f.parents {
		row := `(?m)^` + regexp.QuoteMeta(key) + `\s+1\s+0\s+0\s+1\s+-\s+-$`
		if f.gold[key] {
			row = `(?m)^` + regexp.QuoteMeta(key) + `\s+1\s+1\s+0\s+0\s+1 changes\s+-$`
		}
		if !regexp.MustCompile(row).MatchString(r.stdout) {
			t.Errorf("no row %s for %s:\n%s", row, key, r.stdout)
		}
	}
	if want := "50 parents: 50 would change, 0 can't be previewed; children: 50 to create, 17 to update, 0 to delete, 33 unchanged"; !strings.Contains(r.stdout, want) {
		t.Errorf("no totals %q:\n%s", want, r.stdout)
	}

	// -o diff of the gold parents only: each one's changed field.
	r = kubectlComposite(t, "", "preview", "--selector", "tier=gold", "-f", proposed, "-o", "diff")
	r.want(t, 1, "the diff of the gold parents")
	for key := range f.parents {
		name := key[strings.Index(key, "/")+1:]
		shown := strings.Contains(r.stdout, "# "+key+"\n")
		if shown != f.gold[key] {
			t.Errorf("parent %s shown: %v, want %v:\n%s", key, shown, f.gold[key], r.stdout)
		}
		if f.gold[key] {
			ns := key[:strings.Index(key, "/")]
			for _, want := range []string{
				"--- live/v1.ConfigMap." + ns + "." + name + "-cm\n", "-data.color: \"blue\"\n+data.color: \"teal\"\n",
				"# Create Secret " + key + "-token\n", "+status.color: \"teal\"\n",
			} {
				if !strings.Contains(r.stdout, want) {
					t.Errorf("the diff of %s lacks %q", key, want)
				}
			}
		}
	}

	// The stored controller as it is changes nothing: exit 0.
	r = kubectlComposite(t, "", "preview", fleetController, "--all-parents")
	r.want(t, 0, "the stored controller")
	if !strings.Contains(r.stdout, "50 parents: 0 would change") {
		t.Errorf("the stored controller:\n%s", r.stdout)
	}

	// A hook that fails for some parents: exit 2, one line on stderr, the
	// errors in the table on those parents.
	r = kubectlComposite(t, "", "preview", "--all-parents", "-f", proposalFile(t, f.proposal(t, "failing", nil)))
	r.oneErrorLine(t, "a failing hook", "5 of the 50 parents can't be previewed")
	for key := range f.failing {
		if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(key) + `\s.*the new hook deployment breaks on`).MatchString(r.stdout) {
			t.Errorf("no error on %s:\n%s", key, r.stdout)
		}
	}

	// -o json across pages of 7: one FleetPreview with every parent.
	r = kubectlComposite(t, "", "preview", "--all-parents", "-f", proposed, "-o", "json", "--chunk-size", "7")
	r.want(t, 1, "-o json")
	var answer v1alpha1.FleetPreview
	if err := json.Unmarshal([]byte(r.stdout), &answer); err != nil {
		t.Fatalf("-o json is not a FleetPreview: %v\n%s", err, r.stdout)
	}
	if answer.Kind != "FleetPreview" || len(answer.Status.Parents) != fleetParents || answer.Status.Totals.Parents != fleetParents || answer.Status.Continue != "" {
		t.Errorf("-o json: kind %q, %d parents, totals %+v, continue %q", answer.Kind, len(answer.Status.Parents), answer.Status.Totals, answer.Status.Continue)
	}
}
