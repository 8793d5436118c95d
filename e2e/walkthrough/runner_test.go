package walkthrough

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/composite-apiserver/composite-apiserver/e2e/framework"
)

// brokenDoc has a block that works and two that do not: a kubectl verb
// that does not exist, and a plain false. The broken ones are indented, as
// a block in a list item is.
const brokenDoc = "# A doc\n\n" +
	"<!-- run:works -->\n```sh\necho fine\n```\n\n" +
	"1. Then:\n" +
	"   <!-- run:no-such-verb -->\n   ```sh\n   echo applying\n   kubectl nosuchverb hello\n   echo never\n   ```\n\n" +
	"<!-- run:false -->\n```sh\nfalse\necho never\n```\n"

// TestABrokenBlockFailsNamingTheDocTheBlockAndTheOutput feeds the runner a
// doc whose commands fail, with a kubectl on a fake PATH that answers an
// unknown verb as kubectl does, and needs each failure to name the doc, the
// block and what the command printed, and to stop at the failing command.
func TestABrokenBlockFailsNamingTheDocTheBlockAndTheOutput(t *testing.T) {
	fake := t.TempDir()
	kubectl := "#!/bin/sh\necho \"error: unknown command \\\"$1\\\" for \\\"kubectl\\\"\" >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(fake, "kubectl"), []byte(kubectl), 0o755); err != nil {
		t.Fatal(err)
	}
	env := []string{"export PATH=" + fake + ":$PATH"}
	blocks, err := parseBlocks("fixture/broken.md", brokenDoc)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 3 {
		t.Fatalf("parsed %d blocks, want 3: %v", len(blocks), blocks)
	}

	out, err := runBlock(t.TempDir(), env, blocks[0], time.Minute)
	if err != nil || strings.TrimSpace(out) != "fine" {
		t.Errorf("the working block: %q, %v; want fine and no error", out, err)
	}

	for _, c := range []struct {
		block int
		want  []string
	}{
		{1, []string{"fixture/broken.md:10 (run:no-such-verb) failed: exit status 1", "kubectl nosuchverb hello", "applying", `error: unknown command "nosuchverb" for "kubectl"`}},
		{2, []string{"fixture/broken.md:17 (run:false) failed: exit status 1", "false"}},
	} {
		out, err := runBlock(t.TempDir(), env, blocks[c.block], time.Minute)
		if err == nil {
			t.Errorf("%s passed, printing %q; want it to fail", blocks[c.block], out)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s's error does not say %q:\n%v", blocks[c.block], w, err)
			}
		}
		if strings.Contains(out, "never") {
			t.Errorf("%s ran on past its failing command: %q", blocks[c.block], out)
		}
	}
}

// TestParseBlocksRefusesWhatWouldGoUntested: each of these would leave a
// block the doc means to be run unrun, silently.
func TestParseBlocksRefusesWhatWouldGoUntested(t *testing.T) {
	for name, c := range map[string]struct{ doc, want string }{
		"misspelt marker":   {"<!-- run: spaced -->\n```sh\ntrue\n```\n", "d.md:1: malformed run marker"},
		"no block after":    {"<!-- run:a -->\n\n```sh\ntrue\n```\n", "d.md:1: marker run:a is not followed by a ```sh block"},
		"a console block":   {"<!-- run:a -->\n```console\n$ true\n```\n", "d.md:1: marker run:a is not followed by a ```sh block"},
		"never closed":      {"<!-- run:a -->\n```sh\ntrue\n", "d.md:2: block run:a is never closed"},
		"a name used twice": {"<!-- run:a -->\n```sh\ntrue\n```\n<!-- run:a -->\n```sh\ntrue\n```\n", "d.md:5: block run:a is marked twice (first at line 1)"},
	} {
		if _, err := parseBlocks("d.md", c.doc); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: got %v, want an error with %q", name, err, c.want)
		}
	}
}

// TestEveryMarkedBlockOfTheDocsIsRun holds docs/'s markers and docRuns
// together without a cluster: a marker added with no run, or a run whose
// marker went, fails here before the stack is started.
func TestEveryMarkedBlockOfTheDocsIsRun(t *testing.T) {
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	all, err := docsBlocks(root)
	if err != nil {
		t.Fatal(err)
	}
	if missing, unknown := unmatched(all); len(missing)+len(unknown) > 0 {
		t.Errorf("docRuns runs %v, which docs/ does not mark; docs/ marks %v, which docRuns does not run", missing, unknown)
	}
}
