package walkthrough

import (
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// docRun is how the walkthrough's stack runs one marked block of docs/.
// The blocks run in docRuns' order, each on the state the ones before left
// (the plugin installed, the hello example converged, its hook running), as
// a user reading on would have it.
type docRun struct {
	doc, name string // the block marked <!-- run:NAME --> in doc
	// inTemp runs the block in a directory of its own, not the checkout:
	// the block writes files where it runs.
	inTemp bool
	// before makes state a user would have that no doc block makes.
	before func(t *testing.T, sh func(string) string)
	// want are what the block prints, each within one line of its output.
	want []string
	// after checks what the block did, as a user would next.
	after func(t *testing.T, sh func(string) string, gobin string)
}

// key names the block as docsBlocks does.
func (r docRun) key() string { return blockKey(r.doc, r.name) }

var docRuns = []docRun{{
	// Installs the plugin that the blocks after it run.
	doc: "docs/install.md", name: "plugin-install",
	want: []string{"kubectl composite works with the CompositeControllers and DecoratorControllers that"},
	after: func(t *testing.T, sh func(string) string, gobin string) {
		// The block's go install is the kubectl-composite kubectl finds,
		// not one from an earlier install.
		if got, want := strings.TrimSpace(sh("command -v kubectl-composite")), filepath.Join(gobin, "kubectl-composite"); got != want {
			t.Errorf("kubectl-composite on PATH is %s, want the block's install %s", got, want)
		}
	},
}, {
	doc: "docs/preview.md", name: "sync-dry-run",
	inTemp: true,
	// The JSON answer is one line: the plan creates the hook's ConfigMap,
	// and says it was a dry run.
	want: []string{
		`"plan":[{"action":"Create","apiVersion":"v1","kind":"ConfigMap","namespace":"default","name":"p1-greeting"`,
		`"dryRun":true`,
	},
	after: func(t *testing.T, sh func(string) string, _ string) {
		if got := sh("kubectl get configmap p1-greeting --ignore-not-found -o name"); got != "" {
			t.Errorf("a dry run created %s", got)
		}
	},
}, {
	doc: "docs/rollouts.md", name: "rollout-commands",
	// The doc's rollout is a fragment of a spec, not a block to run: give
	// hello a one-step rollout and a change (a hook timeout), so that there
	// is a rollout to wait for, pause and resume, and a revision to undo.
	before: func(t *testing.T, sh func(string) string) {
		sh(`kubectl patch compositecontroller hello --type=merge -p '{"spec":{"rollout":{"steps":[{"percent":100}]},"hooks":{"sync":{"webhook":{"timeout":"10s"}}}}}'`)
	},
	want: []string{
		`compositecontroller "hello" successfully rolled out`,
		"REVISION  AUTHOR  STATE",
		"compositecontroller.metacontroller.k8s.io/hello paused",
		"compositecontroller.metacontroller.k8s.io/hello resumed",
		"compositecontroller.metacontroller.k8s.io/hello rolled back",
	},
	after: func(t *testing.T, sh func(string) string, _ string) {
		// undo wrote revision 1's spec, without the timeout, back as a
		// third revision, and left the rollout resumed (paused: false,
		// which the server may store as no field at all).
		got := sh(`kubectl get compositecontroller hello -o jsonpath='{.status.revision} timeout={.spec.hooks.sync.webhook.timeout} paused={.spec.rollout.paused}'`)
		if want := "3 timeout= paused="; strings.TrimSuffix(got, "false") != want {
			t.Errorf("after the block hello is %q, want %q", got, want)
		}
	},
}, {
	doc: "docs/install.md", name: "install-dry-run",
	// The stack registers its own composite-apiserver through a Service of
	// that name in composite-system, which an install's Service would merge
	// into (two ports named https). A cluster before its install has none:
	// take it away for the block and put the same one back.
	before: func(t *testing.T, sh func(string) string) {
		port := sh(`kubectl -n composite-system get service composite-apiserver -o jsonpath='{.spec.ports[0].port}'`)
		sh("kubectl -n composite-system delete service composite-apiserver")
		t.Cleanup(func() {
			sh("kubectl -n composite-system create service externalname composite-apiserver --external-name localhost --tcp=" + port + ":" + port)
			sh("kubectl wait --for=condition=Available apiservice/v1alpha1.metacontroller.k8s.io --timeout=2m")
		})
	},
	want: []string{
		"service/composite-apiserver created (server dry run)",
		"deployment.apps/composite-apiserver created (server dry run)",
		"statefulset.apps/composite-apiserver-etcd created (server dry run)",
	},
	after: func(t *testing.T, sh func(string) string, _ string) {
		if got := sh("kubectl -n composite-system get deployments,statefulsets -o name"); got != "" {
			t.Errorf("a dry run created %s", got)
		}
	},
}}

// runDocsBlocks runs every marked block of docs/ by docRuns, in the shell
// a user has after the walkthrough (its exports), with the plugin's GOBIN
// and the pinned helm on PATH.
func runDocsBlocks(t *testing.T, root string, exports []string) {
	all, err := docsBlocks(root)
	if err != nil {
		t.Fatal(err)
	}
	if missing, unknown := unmatched(all); len(missing)+len(unknown) > 0 {
		t.Fatalf("docRuns runs %v, which docs/ does not mark; docs/ marks %v, which docRuns does not run", missing, unknown)
	}
	helm, err := framework.FindHelm()
	if err != nil {
		t.Fatal(err)
	}
	gobin := filepath.Join(t.TempDir(), "bin")
	env := append(append([]string{}, exports...),
		"export GOBIN="+gobin,
		"export PATH="+gobin+":"+filepath.Dir(helm)+":$PATH")
	sh := func(command string) string {
		t.Helper()
		out, errOut, stop, err := runScript(root, "set -eo pipefail\n"+strings.Join(env, "\n")+"\n"+command, 2*time.Minute)
		stop()
		if err != nil {
			t.Fatalf("%s: %v\nstdout:\n%s\nstderr:\n%s", command, err, out, tail(errOut, 4000))
		}
		return strings.TrimSpace(out)
	}
	for _, r := range docRuns {
		if !t.Run(r.key(), func(t *testing.T) {
			b := all[r.key()]
			if r.before != nil {
				r.before(t, sh)
			}
			dir := root
			if r.inTemp {
				dir = t.TempDir()
			}
			out, err := runBlock(dir, env, b, 6*time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range r.want {
				if !hasLine(out, want) {
					t.Errorf("%s printed no line %q:\n%s", b, want, tail(out, 4000))
				}
			}
			if r.after != nil {
				r.after(t, sh, gobin)
			}
		}) {
			// The blocks after it take the state it was to leave.
			return
		}
	}
}

// hasLine says whether a line of out holds want: what the user sees on
// one line (a JSON answer is one line), not words spread over several.
func hasLine(out, want string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, want) {
			return true
		}
	}
	return false
}

// unmatched returns the blocks docRuns runs that no doc marks, and those
// marked that docRuns does not run.
func unmatched(all map[string]docBlock) (missing, unknown []string) {
	run := map[string]bool{}
	for _, r := range docRuns {
		run[r.key()] = true
		if _, ok := all[r.key()]; !ok {
			missing = append(missing, r.key())
		}
	}
	for k := range all {
		if !run[k] {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	return missing, unknown
}
