package walkthrough

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// A runnable block of a doc is a ```sh block whose fence is on the line
// right after a marker:
//
//	<!-- run:NAME -->
//	```sh
//	kubectl composite rollout pause hello
//	```
//
// The marker is an HTML comment, so a reader sees the block as any other;
// NAME is unique in its doc and names the block in a failure. The
// walkthrough's begin/end markers say where one story is; a run marker
// says which single block a test runs, so that the blocks a test cannot
// run (an image to pull, a release to download) stay beside them unmarked.
var (
	runMarker = regexp.MustCompile(`^\s*<!-- run:([a-z0-9][a-z0-9-]*) -->\s*$`)
	shFence   = regexp.MustCompile("^(\\s*)```sh\\s*$")
)

// docBlock is one marked block of a doc.
type docBlock struct {
	Doc    string // slash-separated, from the repository's root
	Name   string
	Line   int    // the fence's line, counting from 1
	Script string // the block's lines, its fence's indentation removed
}

func (b docBlock) String() string { return fmt.Sprintf("%s:%d (run:%s)", b.Doc, b.Line, b.Name) }

// parseBlocks returns the marked blocks of text, the doc named doc, in
// their order. A marker not followed by an sh block, a marker misspelt
// (anything with "<!-- run:" the pattern does not take), a block never
// closed and a name used twice are errors: each would leave a block the
// doc means to be tested untested.
func parseBlocks(doc, text string) ([]docBlock, error) {
	lines := strings.Split(text, "\n")
	var out []docBlock
	seen := map[string]int{}
	for i := 0; i < len(lines); i++ {
		if !strings.Contains(lines[i], "<!-- run:") {
			continue
		}
		m := runMarker.FindStringSubmatch(lines[i])
		if m == nil {
			return nil, fmt.Errorf("%s:%d: malformed run marker %q, want <!-- run:NAME --> alone on its line", doc, i+1, strings.TrimSpace(lines[i]))
		}
		name := m[1]
		if first, ok := seen[name]; ok {
			return nil, fmt.Errorf("%s:%d: block run:%s is marked twice (first at line %d)", doc, i+1, name, first)
		}
		seen[name] = i + 1
		if i+1 >= len(lines) || !shFence.MatchString(lines[i+1]) {
			return nil, fmt.Errorf("%s:%d: marker run:%s is not followed by a ```sh block on the next line", doc, i+1, name)
		}
		indent := shFence.FindStringSubmatch(lines[i+1])[1]
		b := docBlock{Doc: doc, Name: name, Line: i + 2}
		var body []string
		closed := false
		for j := i + 2; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == "```" {
				closed, i = true, j
				break
			}
			body = append(body, strings.TrimPrefix(lines[j], indent))
		}
		if !closed {
			return nil, fmt.Errorf("%s:%d: block run:%s is never closed", doc, b.Line, name)
		}
		b.Script = strings.Join(body, "\n") + "\n"
		out = append(out, b)
	}
	return out, nil
}

// docsBlocks returns the marked blocks of every docs/*.md, by doc and name.
func docsBlocks(root string) (map[string]docBlock, error) {
	files, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	all := map[string]docBlock{}
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		blocks, err := parseBlocks("docs/"+filepath.Base(f), string(text))
		if err != nil {
			return nil, err
		}
		for _, b := range blocks {
			all[blockKey(b.Doc, b.Name)] = b
		}
	}
	return all, nil
}

// blockKey names a block across docs: "docs/FILE.md run:NAME".
func blockKey(doc, name string) string { return doc + " run:" + name }

// runBlock runs b's commands as they are written, in bash in dir after the
// env lines (the exports a user has run in that shell), failing on the
// first command that fails, a pipe's included. It returns what they
// printed; on a failure, an error naming the doc, the block and what the
// commands printed, which is what a reader of a CI log needs to fix the doc
// or the code. What a block leaves in the background is stopped with it.
func runBlock(dir string, env []string, b docBlock, timeout time.Duration) (string, error) {
	script := "set -eo pipefail\n" + strings.Join(env, "\n") + "\n" + b.Script
	stdout, stderr, stop, err := runScript(dir, script, timeout)
	stop()
	if err != nil {
		return stdout, fmt.Errorf("%s failed: %v\n%s\nstdout:\n%s\nstderr:\n%s", b, err, numbered(b.Script), tail(stdout, 4000), tail(stderr, 4000))
	}
	return stdout, nil
}

// numbered is a block's commands, for the failure message: which command
// failed is the last one its output speaks of.
func numbered(script string) string {
	var s strings.Builder
	sc := bufio.NewScanner(strings.NewReader(script))
	for n := 1; sc.Scan(); n++ {
		fmt.Fprintf(&s, "  %2d  %s\n", n, sc.Text())
	}
	return s.String()
}
