package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	clienttesting "k8s.io/client-go/testing"

	"github.com/composite-apiserver/composite-apiserver/apis/metacontroller/v1alpha1"
	"github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned/fake"
	ccclient "github.com/composite-apiserver/composite-apiserver/pkg/generated/clientset/versioned/typed/metacontroller/v1alpha1"
)

// fakeServer answers /sync with answer (or err) and records the requests.
type fakeServer struct {
	client   *fake.Clientset
	answer   v1alpha1.SyncRequestStatus
	err      error
	requests []*v1alpha1.SyncRequest
	dryRun   [][]string
	// synced are the controllers whose /sync was called, resource/name.
	synced []string
}

func newFakeServer(objects ...runtime.Object) *fakeServer {
	s := &fakeServer{client: fake.NewClientset(objects...)}
	for _, resource := range []string{"compositecontrollers", "decoratorcontrollers"} {
		s.client.PrependReactor("create", resource, s.answerSync)
	}
	return s
}

func (s *fakeServer) answerSync(action clienttesting.Action) (bool, runtime.Object, error) {
	create := action.(clienttesting.CreateActionImpl)
	if create.GetSubresource() != "sync" {
		return false, nil, nil
	}
	req := create.GetObject().(*v1alpha1.SyncRequest)
	s.requests = append(s.requests, req)
	s.dryRun = append(s.dryRun, create.CreateOptions.DryRun)
	s.synced = append(s.synced, create.GetResource().Resource+"/"+create.Name)
	if s.err != nil {
		return true, nil, s.err
	}
	out := req.DeepCopy()
	out.Status = s.answer
	return true, out, nil
}

type result struct {
	code           int
	stdout, stderr string
}

func (s *fakeServer) run(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var out, errOut bytes.Buffer
	streams := genericiooptions.IOStreams{In: strings.NewReader(stdin), Out: &out, ErrOut: &errOut}
	client := func() (ccclient.MetacontrollerV1alpha1Interface, error) {
		return s.client.MetacontrollerV1alpha1(), nil
	}
	cmd := NewCommand(streams, genericclioptions.NewConfigFlags(false), client)
	cmd.SetArgs(args)
	code := exitCode(cmd.ExecuteContext(context.Background()), &errOut)
	return result{code: code, stdout: out.String(), stderr: errOut.String()}
}

// oneErrorLine checks that a failure is one line on stderr, holding want.
func (r result) oneErrorLine(t *testing.T, want ...string) {
	t.Helper()
	if r.code != ExitError {
		t.Errorf("exit code %d, want %d (stdout %q, stderr %q)", r.code, ExitError, r.stdout, r.stderr)
	}
	if strings.Count(r.stderr, "\n") != 1 || !strings.HasPrefix(r.stderr, "error: ") {
		t.Errorf("stderr %q, want one line starting with error:", r.stderr)
	}
	for _, w := range want {
		if !strings.Contains(r.stderr, w) {
			t.Errorf("stderr %q lacks %q", r.stderr, w)
		}
	}
}

const helloParent = "apiVersion: example.com/v1\nkind: Hello\nmetadata: {name: p1, namespace: ns}\nspec: {color: green}\n"

func TestPreviewExitCodes(t *testing.T) {
	parent := writeFile(t, "hello.yaml", helloParent)
	unchanged := v1alpha1.SyncPlanItem{Action: v1alpha1.SyncActionUnchanged, APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "p1-a"}
	update := v1alpha1.SyncPlanItem{Action: v1alpha1.SyncActionUpdate, APIVersion: "v1", Kind: "ConfigMap", Namespace: "ns", Name: "p1-b",
		Reason: "differs; updateStrategy InPlace updates it in place", Diff: []string{`data.color: "blue" -> "green"`, `- data.size: "L"`}}

	s := newFakeServer()
	s.answer = v1alpha1.SyncRequestStatus{DryRun: true, Plan: []v1alpha1.SyncPlanItem{unchanged}}
	r := s.run(t, "", "preview", "hello", "-f", parent)
	if r.code != ExitOK || r.stderr != "" || !strings.Contains(r.stdout, "Unchanged   ConfigMap   ns/p1-a") || strings.Contains(r.stdout, "---") {
		t.Errorf("nothing to change: exit %d, stdout\n%s\nstderr %q", r.code, r.stdout, r.stderr)
	}
	if got := s.dryRun[0]; len(got) != 1 || got[0] != metav1.DryRunAll {
		t.Errorf("preview sent dryRun %v, want [All]", got)
	}
	if p := s.requests[0].Spec.Parent; p == nil || !strings.Contains(string(p.Raw), `"color":"green"`) || s.requests[0].Spec.ParentRef != nil {
		t.Errorf("request %+v: want the inline parent", s.requests[0].Spec)
	}

	s.answer = v1alpha1.SyncRequestStatus{DryRun: true, Plan: []v1alpha1.SyncPlanItem{unchanged, update}, Warnings: []string{"careful"}}
	r = s.run(t, "", "preview", "hello", "-f", parent)
	wantOut := `ACTION      KIND        NAMESPACE/NAME   CHANGES
Unchanged   ConfigMap   ns/p1-a          -
Update      ConfigMap   ns/p1-b          2 changes
--- live/v1.ConfigMap.ns.p1-b
+++ desired/v1.ConfigMap.ns.p1-b
@@ -1,2 +1,1 @@ Update: differs; updateStrategy InPlace updates it in place
-data.color: "blue"
+data.color: "green"
-data.size: "L"
`
	if r.code != ExitChanges || r.stdout != wantOut || r.stderr != "Warning: careful\n" {
		t.Errorf("changes: exit %d, stdout\n%s\nwant\n%s\nstderr %q", r.code, r.stdout, wantOut, r.stderr)
	}

	// -o yaml and json print the whole answer; the exit code still tells.
	r = s.run(t, "", "preview", "hello", "-f", parent, "-o", "json")
	var answer v1alpha1.SyncRequest
	if err := json.Unmarshal([]byte(r.stdout), &answer); err != nil || answer.Kind != "SyncRequest" || len(answer.Status.Plan) != 2 || r.code != ExitChanges {
		t.Errorf("-o json: exit %d, %v\n%s", r.code, err, r.stdout)
	}
	r = s.run(t, "", "preview", "hello", "-f", parent, "-o", "yaml")
	if !strings.HasPrefix(r.stdout, "apiVersion: metacontroller.k8s.io/v1alpha1\nkind: SyncRequest\n") || r.code != ExitChanges {
		t.Errorf("-o yaml: exit %d\n%s", r.code, r.stdout)
	}
}

func TestPreviewOfALiveParentWithChildren(t *testing.T) {
	children := writeFile(t, "children.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: p1-a, namespace: ns}\n")
	s := newFakeServer()
	r := s.run(t, "", "preview", "hello", "--parent", "ns/p1", "--children", children, "--server-dry-run")
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	spec := s.requests[0].Spec
	if spec.ParentRef == nil || *spec.ParentRef != (v1alpha1.ParentReference{Namespace: "ns", Name: "p1"}) || spec.Parent != nil || !spec.ServerDryRun {
		t.Errorf("spec %+v: want parentRef ns/p1 and serverDryRun", spec)
	}
	if spec.Children == nil || !strings.Contains(string(spec.Children.Raw), `{"ConfigMap.v1":{"p1-a":{`) {
		t.Errorf("children %s", spec.Children)
	}
	if !strings.Contains(r.stdout, "No children") {
		t.Errorf("an empty plan printed %q", r.stdout)
	}
	if !strings.HasPrefix(r.stderr, "Warning: 1 of the 1 children have no metadata.managedFields") || strings.Count(r.stderr, "\n") != 1 {
		t.Errorf("children without managedFields: stderr %q, want one warning", r.stderr)
	}
}

func TestPreviewSavesTheHookRequest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fixtures")
	s := newFakeServer()
	s.answer.HookRequest = &runtime.RawExtension{Raw: []byte(`{"controller":{"metadata":{"name":"hello"}},"parent":{"metadata":{"name":"p1"}},"children":{}}`)}
	r := s.run(t, helloParent, "preview", "hello", "-f", "-", "--save-request", dir)
	if r.code != ExitOK {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	data, err := os.ReadFile(filepath.Join(dir, "ns.p1.json"))
	if err != nil {
		t.Fatal(err)
	}
	var saved map[string]interface{}
	if err := json.Unmarshal(data, &saved); err != nil || saved["parent"] == nil || !strings.Contains(string(data), "\n  \"children\"") {
		t.Errorf("saved %s: %v", data, err)
	}
	if !strings.Contains(r.stderr, "ns.p1.json") {
		t.Errorf("stderr %q does not say where the request went", r.stderr)
	}

	s.answer.HookRequest = nil
	s.run(t, helloParent, "preview", "hello", "-f", "-", "--save-request", dir).oneErrorLine(t, "no hook")
}

func TestErrorsAreOneLineAndExitCode2(t *testing.T) {
	parent := writeFile(t, "hello.yaml", helloParent)
	s := newFakeServer()
	s.err = apierrors.NewNotFound(v1alpha1.Resource("compositecontrollers"), "nope")
	s.run(t, "", "preview", "nope", "-f", parent).oneErrorLine(t, `CompositeController "nope"`, "not found")
	s.run(t, "", "sync", "nope", "--parent", "ns/p1").oneErrorLine(t, `CompositeController "nope"`, "not found")
	s.run(t, "", "rbac", "nope").oneErrorLine(t, `CompositeController "nope"`, "not found")

	// A failing hook is the server's 502 HookFailed; its message is kept,
	// on one line.
	s.err = &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusBadGateway, Reason: "HookFailed",
		Message: "CompositeController \"hello\": sync hook http://hook/sync answered 500:\nhook is broken on purpose"}}
	s.run(t, "", "preview", "hello", "-f", parent).oneErrorLine(t, "sync hook http://hook/sync", "broken on purpose")
	s.run(t, "", "sync", "hello", "--parent", "ns/p1").oneErrorLine(t, "sync hook")

	s.err = nil
	for _, args := range [][]string{
		{"preview", "hello"},
		{"preview", "hello", "-f", "/does/not/exist.yaml"},
		{"preview", "hello", "-f", parent, "-o", "wide"},
		{"preview", "-f", parent},
		{"preview", "hello", "--bogus"},
		{"sync", "hello"},
		{"sync", "hello", "--parent", "a/b/c"},
		{"rbac"},
		{"frobnicate"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			s.run(t, "", args...).oneErrorLine(t)
		})
	}
	if len(s.requests) != 4 {
		t.Errorf("%d requests were sent: bad arguments must be refused before any", len(s.requests))
	}
}

func TestSyncPrintsWhatWasDone(t *testing.T) {
	s := newFakeServer()
	s.answer.Plan = []v1alpha1.SyncPlanItem{
		{Action: v1alpha1.SyncActionCreate, Kind: "ConfigMap", Namespace: "ns", Name: "p1-a"},
		{Action: v1alpha1.SyncActionUnchanged, Kind: "ConfigMap", Namespace: "ns", Name: "p1-same"},
		{Action: v1alpha1.SyncActionAdopt, Kind: "ConfigMap", Namespace: "ns", Name: "p1-orphan"},
		{Action: v1alpha1.SyncActionDelete, Kind: "Service", Namespace: "ns", Name: "p1"},
	}
	r := s.run(t, "", "sync", "hello", "--parent", "ns/p1")
	want := "ConfigMap ns/p1-a created\nConfigMap ns/p1-orphan adopted\nService ns/p1 deleted\n"
	if r.code != ExitOK || r.stdout != want || r.stderr != "" {
		t.Errorf("exit %d, stdout\n%s\nwant\n%s\nstderr %q", r.code, r.stdout, want, r.stderr)
	}
	if got := s.dryRun[0]; len(got) != 0 {
		t.Errorf("sync sent dryRun %v", got)
	}

	s.answer.Plan = []v1alpha1.SyncPlanItem{{Action: v1alpha1.SyncActionUnchanged, Kind: "ConfigMap", Namespace: "ns", Name: "p1-same"}}
	if r := s.run(t, "", "sync", "hello", "--parent", "ns/p1"); r.code != ExitOK || r.stdout != "parent ns/p1 synced: no child changed\n" {
		t.Errorf("nothing to do: exit %d, %q", r.code, r.stdout)
	}

	s.answer.Plan = []v1alpha1.SyncPlanItem{
		{Action: v1alpha1.SyncActionCreate, Kind: "ConfigMap", Namespace: "ns", Name: "p1-a"},
		{Action: v1alpha1.SyncActionUpdate, Kind: "ConfigMap", Namespace: "ns", Name: "p1-b", Error: "admission webhook \"x\" denied the request:\nno"},
		{Action: v1alpha1.SyncActionUnchanged, Kind: "ConfigMap", Namespace: "ns", Name: "p1-same"},
	}
	r = s.run(t, "", "sync", "hello", "--parent", "ns/p1")
	r.oneErrorLine(t, "1 of 2 actions failed")
	if r.stdout != "ConfigMap ns/p1-a created\nConfigMap ns/p1-b: Update failed: admission webhook \"x\" denied the request: no\n" {
		t.Errorf("stdout %q", r.stdout)
	}
}

func TestRBACReadsTheController(t *testing.T) {
	cc := controllerWithChildren("hello", v1alpha1.ResourceRule{APIVersion: "v1", Resource: "configmaps"})
	s := newFakeServer(cc)
	r := s.run(t, "", "rbac", "hello")
	if r.code != ExitOK || !strings.Contains(r.stdout, "name: composite-apiserver-hello") || !strings.Contains(r.stdout, "hellos/status") {
		t.Errorf("exit %d, stderr %q, stdout\n%s", r.code, r.stderr, r.stdout)
	}
}

func TestHelpExplainsEveryCommandWithAnExample(t *testing.T) {
	s := newFakeServer()
	for _, command := range []string{"preview", "sync", "rbac"} {
		r := s.run(t, "", command, "--help")
		if r.code != ExitOK || !strings.Contains(r.stdout, "Examples:\n  # ") || !strings.Contains(r.stdout, "kubectl composite "+command+" ") {
			t.Errorf("%s --help: exit %d\n%s", command, r.code, r.stdout)
		}
	}
}
