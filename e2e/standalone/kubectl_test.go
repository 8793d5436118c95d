package standalone

import (
	"bytes"
	"context"
	"encoding/json"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestKubectlGetPrintsControllerColumns(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	name := uniqueName("table-hello")
	const syncURL = "http://hello-controller.example.com/sync"
	manifest := writeManifest(t, ccManifest(name, syncURL, `    customize:
      webhook:
        service:
          name: hello-customize
          namespace: hooks
        path: /customize
`))

	out := s.mustKubectl(t, "create", "-f", manifest)
	if want := "compositecontroller.metacontroller.k8s.io/" + name + " created"; strings.TrimSpace(out) != want {
		t.Errorf("kubectl create printed %q, want %q", out, want)
	}

	wantColumns := []string{"NAME", "PARENT", "CHILDREN", "SYNC HOOK", "READY", "PARENTS", "AGE"}
	wantRow := map[string]string{
		"NAME":      name,
		"PARENT":    "example.com/v1/hellos",
		"CHILDREN":  "configmaps",
		"SYNC HOOK": syncURL,
		"READY":     "Unknown",
		"PARENTS":   "0",
	}
	checkRow := func(t *testing.T, out string, columns []string, want map[string]string) {
		t.Helper()
		tbl := parseTable(t, out)
		if !reflect.DeepEqual(tbl.columns, columns) {
			t.Errorf("columns = %q, want %q\noutput:\n%s", tbl.columns, columns, out)
		}
		row := tbl.row(t, name)
		for col, v := range want {
			if row[col] != v {
				t.Errorf("%s = %q, want %q\noutput:\n%s", col, row[col], v, out)
			}
		}
		if row["AGE"] == "" {
			t.Errorf("AGE is empty\noutput:\n%s", out)
		}
	}

	t.Run("get cc", func(t *testing.T) {
		checkRow(t, s.mustKubectl(t, "get", "cc"), wantColumns, wantRow)
	})
	for _, resource := range []string{"cctl", "compositecontrollers", "compositecontroller.metacontroller.k8s.io"} {
		t.Run("get "+resource, func(t *testing.T) {
			checkRow(t, s.mustKubectl(t, "get", resource, name), wantColumns, wantRow)
		})
	}
	// The category holds DecoratorControllers too, so it takes no name.
	t.Run("get metacontroller", func(t *testing.T) {
		if out := s.mustKubectl(t, "get", "metacontroller", "-o", "name"); !strings.Contains(out, "compositecontroller.metacontroller.k8s.io/"+name+"\n") {
			t.Errorf("kubectl get metacontroller -o name does not list %s:\n%s", name, out)
		}
	})
	t.Run("get -o wide", func(t *testing.T) {
		wide := map[string]string{
			// The service's port is defaulted to 80 by the server.
			"CUSTOMIZE HOOK": "hooks/hello-customize:80/customize",
			"FINALIZE HOOK":  "<none>",
			"LAST SYNC":      "<never>",
			"PAUSED":         "0",
			"REVISION":       "1",
			"ROLLOUT":        "<none>",
			"MESSAGE":        "",
		}
		for k, v := range wantRow {
			wide[k] = v
		}
		columns := append(append([]string{}, wantColumns...), "CUSTOMIZE HOOK", "FINALIZE HOOK", "LAST SYNC", "PAUSED", "REVISION", "ROLLOUT", "MESSAGE")
		checkRow(t, s.mustKubectl(t, "get", "cc", name, "-o", "wide"), columns, wide)
	})
}

// invalidManifest breaks six rules at once.
// invalidManifest breaks six rules that Metacontroller enforces too (what
// it accepts, such as long timeouts, is a warning here, not an error).
const invalidManifest = `apiVersion: metacontroller.k8s.io/v1alpha1
kind: CompositeController
metadata:
  name: %s
spec:
  parentResource:
    apiVersion: example.com/v1
  childResources:
  - apiVersion: v1
    resource: configmaps
    updateStrategy:
      method: Sometimes
  hooks:
    sync:
      webhook:
        url: ftp://hello.example.com/sync
    customize:
      webhook:
        service: {name: hello, namespace: hooks}
        path: customize
    finalize:
      webhook: {}
  workers: 0
`

func TestInvalidControllerIsRejectedNamingEveryBrokenField(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	wantFields := []string{
		"spec.parentResource.resource",
		"spec.childResources[0].updateStrategy.method",
		"spec.hooks.sync.webhook.url",
		"spec.hooks.customize.webhook.path",
		"spec.hooks.finalize.webhook",
		"spec.workers",
	}
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"apply", []string{"apply"}},
		{"server-side apply", []string{"apply", "--server-side"}},
		{"create", []string{"create"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			name := uniqueName("invalid-" + strings.ReplaceAll(tc.name, " ", "-"))
			manifest := writeManifest(t, strings.Replace(invalidManifest, "%s", name, 1))
			stdout, stderr, err := s.kubectl(append(tc.args, "-f", manifest)...)
			if err == nil {
				t.Fatalf("kubectl %s succeeded on an invalid object:\n%s", tc.args, stdout)
			}
			if want := `The CompositeController "` + name + `" is invalid`; !strings.Contains(stderr, want) {
				t.Errorf("stderr does not say %q:\n%s", want, stderr)
			}
			// Each error is a line "* <field path>: <message>"; compare
			// whole paths, as spec.hooks.sync.webhook is a prefix of others.
			got := map[string]bool{}
			for _, line := range strings.Split(stderr, "\n") {
				if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "* "); ok {
					if path, _, ok := strings.Cut(rest, ": "); ok {
						got[path] = true
					}
				}
			}
			for _, f := range wantFields {
				if !got[f] {
					t.Errorf("stderr names no error at %s:\n%s", f, stderr)
				}
			}
			expectNotFound(t, s, name)
		})
	}
}

// expectNotFound checks that `kubectl get cc name` says NotFound.
func expectNotFound(t *testing.T, s *server, name string) {
	t.Helper()
	stdout, stderr, err := s.kubectl("get", "cc", name)
	if err == nil {
		t.Fatalf("kubectl get cc %s found it:\n%s", name, stdout)
	}
	if !strings.Contains(stderr, "NotFound") || !strings.Contains(stderr, `"`+name+`" not found`) {
		t.Errorf("kubectl get cc %s failed without NotFound:\n%s", name, stderr)
	}
}

func TestKubectlExplainShowsFieldDocs(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	for _, tc := range []struct {
		field string
		want  []string
	}{
		{"cc", []string{"KIND:       CompositeController", "makes a parent resource own the child resources", "spec", "status"}},
		{"cc.spec.hooks", []string{"FIELD: hooks <CompositeControllerHooks>", "A sync hook is required", "customize", "finalize", "sync computes a parent's status"}},
		{"cc.spec.hooks.sync.webhook.url", []string{"FIELD: url <string>", "absolute http(s) URL"}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			out := s.mustKubectl(t, "explain", tc.field)
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("kubectl explain %s does not say %q:\n%s", tc.field, w, out)
				}
			}
		})
	}
}

func TestServerSideApplyCreatesThenUpdatesOnlyOnChange(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	name := uniqueName("ssa-hello")
	generation := func() string {
		t.Helper()
		return s.mustKubectl(t, "get", "cc", name, "-o", "jsonpath={.metadata.generation}")
	}

	first := writeManifest(t, ccManifest(name, "http://hello.example.com/sync", ""))
	out := s.mustKubectl(t, "apply", "--server-side", "-f", first)
	if want := "compositecontroller.metacontroller.k8s.io/" + name + " serverside-applied"; strings.TrimSpace(out) != want {
		t.Errorf("kubectl apply printed %q, want %q", out, want)
	}
	if g := generation(); g != "1" {
		t.Fatalf("generation after creation = %q, want 1", g)
	}

	changed := writeManifest(t, ccManifest(name, "http://hello.example.com/v2/sync", "  resyncPeriodSeconds: 30\n"))
	s.mustKubectl(t, "apply", "--server-side", "-f", changed)
	if g := generation(); g != "2" {
		t.Errorf("generation after a spec change = %q, want 2", g)
	}
	if got := s.mustKubectl(t, "get", "cc", name, "-o", "jsonpath={.spec.hooks.sync.webhook.url} {.spec.resyncPeriodSeconds}"); got != "http://hello.example.com/v2/sync 30" {
		t.Errorf("spec after the change = %q, want the applied url and resync period", got)
	}

	s.mustKubectl(t, "apply", "--server-side", "-f", changed)
	if g := generation(); g != "2" {
		t.Errorf("generation after applying the same manifest again = %q, want 2", g)
	}

	var obj struct {
		Metadata struct {
			ManagedFields []struct {
				Manager   string `json:"manager"`
				Operation string `json:"operation"`
			} `json:"managedFields"`
		} `json:"metadata"`
	}
	raw := s.mustKubectl(t, "get", "cc", name, "-o", "json", "--show-managed-fields")
	if err := json.Unmarshal([]byte(raw), &obj); err != nil {
		t.Fatalf("kubectl get -o json: %v\n%s", err, raw)
	}
	found := false
	for _, mf := range obj.Metadata.ManagedFields {
		if mf.Manager == "kubectl" && mf.Operation == "Apply" {
			found = true
		}
	}
	if !found {
		t.Errorf("managedFields have no manager kubectl with operation Apply: %+v", obj.Metadata.ManagedFields)
	}
}

func TestServerDryRunCreatePrintsObjectButStoresNothing(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	name := uniqueName("dry-run-hello")
	manifest := writeManifest(t, ccManifest(name, "http://hello.example.com/sync", ""))
	out := s.mustKubectl(t, "create", "--dry-run=server", "-f", manifest, "-o", "yaml")
	for _, want := range []string{
		"kind: CompositeController",
		"name: " + name,
		// Defaulted by the server: the object did go through it.
		"version: v1",
		"method: OnDelete",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("dry-run output does not have %q:\n%s", want, out)
		}
	}
	expectNotFound(t, s, name)
}

func TestWatchSeesControllerAddedThenModified(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	name := uniqueName("watched-hello")

	// -o name would print no event types; the table with
	// --output-watch-events has an EVENT column, and -L a column FOO of
	// the label the test sets.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	watch := exec.CommandContext(ctx, kubectlPath, "get", "cc", "--watch", "--output-watch-events",
		"--field-selector", "metadata.name="+name, "-L", "foo")
	watch.Env = kubectlEnv(s.kubeconfig)
	lines := newLineWriter()
	var stderr bytes.Buffer
	watch.Stdout = lines
	watch.Stderr = &stderr
	if err := watch.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	// The watch must end before the test does: an open watch holds up the
	// server's shutdown.
	t.Cleanup(func() {
		cancel()
		_ = watch.Wait()
	})

	waitForEvent := func(event string, match func(fields []string) bool) {
		t.Helper()
		deadline := time.NewTimer(30 * time.Second)
		defer deadline.Stop()
		for {
			select {
			case line := <-lines.ch:
				fields := strings.Fields(line)
				if len(fields) >= 2 && fields[0] == event && fields[1] == name && match(fields) {
					return
				}
			case <-deadline.C:
				t.Fatalf("the watch showed no %s event for %s within 30s; its output:\n%s\nstderr:\n%s", event, name, lines.String(), stderr.String())
			}
		}
	}

	// The list the watch starts with and the watch itself both show a
	// creation as ADDED, so it does not matter which one sees it.
	s.mustKubectl(t, "create", "-f", writeManifest(t, ccManifest(name, "http://hello.example.com/sync", "")))
	waitForEvent("ADDED", func([]string) bool { return true })

	s.mustKubectl(t, "label", "cc", name, "foo=bar")
	waitForEvent("MODIFIED", func(fields []string) bool { return fields[len(fields)-1] == "bar" })
}

// lineWriter passes each complete line written to it on a channel, and
// keeps everything for failure messages.
type lineWriter struct {
	ch chan string

	mu      sync.Mutex
	all     bytes.Buffer
	partial []byte
}

func newLineWriter() *lineWriter { return &lineWriter{ch: make(chan string, 1000)} }

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all.Write(p)
	w.partial = append(w.partial, p...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			break
		}
		line := string(w.partial[:i])
		w.partial = w.partial[i+1:]
		select {
		case w.ch <- line:
		default: // nobody is reading that much; it is still in all
		}
	}
	return len(p), nil
}

func (w *lineWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.all.String()
}

func TestStatusIsWrittenOnlyThroughStatusSubresource(t *testing.T) {
	t.Parallel()
	s := sharedServer(t)
	name := uniqueName("status-hello")
	get := func(jsonpath string) string {
		t.Helper()
		return s.mustKubectl(t, "get", "cc", name, "-o", "jsonpath="+jsonpath)
	}
	withStatus := func(parents int) string {
		return ccManifest(name, "http://hello.example.com/sync", "") + `status:
  parents: ` + strconv.Itoa(parents) + `
  lastSyncError: written by a user
  conditions:
  - type: Ready
    status: "True"
    reason: UserSaysSo
    message: not the controller
    lastTransitionTime: "2024-01-01T00:00:00Z"
`
	}

	t.Run("a user's writes drop status", func(t *testing.T) {
		// All the status holds is the author the server recorded, from
		// the request: nothing of the user's stanza.
		written := func() string { return get("{.status.parents}{.status.lastSyncError}{.status.conditions}") }
		s.mustKubectl(t, "apply", "-f", writeManifest(t, withStatus(7)))
		if got := written(); got != "" {
			t.Errorf("status after creating with a status stanza = %s, want none of it", got)
		}
		if got := get("{.status.author.username}"); got == "" {
			t.Errorf("no author recorded: status %s", get("{.status}"))
		}
		s.mustKubectl(t, "apply", "-f", writeManifest(t, withStatus(8)))
		if got := written(); got != "" {
			t.Errorf("status after an update with a status stanza = %s, want none of it", got)
		}
		s.mustKubectl(t, "apply", "--server-side", "--force-conflicts", "-f", writeManifest(t, withStatus(9)))
		if got := written(); got != "" {
			t.Errorf("status after a server-side apply with a status stanza = %s, want none of it", got)
		}
		if g := get("{.metadata.generation}"); g != "1" {
			t.Errorf("generation = %s, want 1: the spec never changed", g)
		}
	})

	specBefore := get("{.spec}")
	t.Run("the status subresource writes status only", func(t *testing.T) {
		out := s.mustKubectl(t, "patch", "cc", name, "--subresource=status", "--type=merge", "-p", `{"status":{"parents":3}}`)
		if !strings.Contains(out, "patched") {
			t.Errorf("kubectl patch printed %q", out)
		}
		if got := get("{.status.parents}"); got != "3" {
			t.Errorf("status.parents = %q, want 3", got)
		}
		// Spec, labels and generation are not the status writer's.
		s.mustKubectl(t, "patch", "cc", name, "--subresource=status", "--type=merge", "-p",
			`{"metadata":{"labels":{"via":"status"}},"spec":{"resyncPeriodSeconds":99},"status":{"children":2}}`)
		if got := get("{.status.parents} {.status.children}"); got != "3 2" {
			t.Errorf("status parents and children = %q, want \"3 2\"", got)
		}
		if got := get("{.spec}"); got != specBefore {
			t.Errorf("spec changed through the status subresource:\nbefore %s\nafter  %s", specBefore, got)
		}
		if got := get("{.metadata.labels}"); got != "" {
			t.Errorf("labels changed through the status subresource: %s", got)
		}
		if g := get("{.metadata.generation}"); g != "1" {
			t.Errorf("generation = %s after status writes, want 1", g)
		}
	})

	t.Run("an invalid status is rejected", func(t *testing.T) {
		_, stderr, err := s.kubectl("patch", "cc", name, "--subresource=status", "--type=merge", "-p", `{"status":{"parents":-1}}`)
		if err == nil || !strings.Contains(stderr, "status.parents") {
			t.Errorf("a negative status.parents was not rejected naming status.parents (err %v):\n%s", err, stderr)
		}
	})

	t.Run("kubectl get shows the status", func(t *testing.T) {
		row := parseTable(t, s.mustKubectl(t, "get", "cc")).row(t, name)
		if row["PARENTS"] != "3" {
			t.Errorf("PARENTS = %q, want 3", row["PARENTS"])
		}
	})

	t.Run("a user's later apply keeps the status", func(t *testing.T) {
		s.mustKubectl(t, "apply", "-f", writeManifest(t, withStatus(7)))
		if got := get("{.status.parents}"); got != "3" {
			t.Errorf("status.parents after a user's apply = %q, want 3", got)
		}
	})
}
