package doccheck

import (
	"fmt"
	"io/fs"
	"path"
	"regexp"
	"strings"
)

// Each check returns the problems it found, one line each, so that the
// tests on the repository and the tests on broken fixtures share it.

// checkLinks finds relative links whose file, or #anchor in a markdown
// file, does not exist.
func checkLinks(fsys fs.FS, files []string) []string {
	var problems []string
	for _, file := range files {
		text, err := fs.ReadFile(fsys, file)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", file, err))
			continue
		}
		lines, nums := prose(string(text))
		for i, line := range lines {
			// Code spans may show link syntax without being links.
			line = inlineCodeRE.ReplaceAllString(line, "")
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				if p := checkLink(fsys, file, m[2]); p != "" {
					problems = append(problems, fmt.Sprintf("%s:%d: %s", file, nums[i], p))
				}
			}
		}
	}
	return problems
}

func checkLink(fsys fs.FS, from, target string) string {
	if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
		return ""
	}
	file, anchor, _ := strings.Cut(target, "#")
	resolved := from
	if file != "" {
		resolved = path.Join(path.Dir(from), file)
		if strings.HasPrefix(resolved, "../") || !exists(fsys, resolved) {
			return fmt.Sprintf("link to %s: no such file in the repository", target)
		}
	}
	if anchor == "" || !strings.HasSuffix(resolved, ".md") {
		return ""
	}
	text, err := fs.ReadFile(fsys, resolved)
	if err != nil {
		return fmt.Sprintf("link to %s: %v", target, err)
	}
	if _, anchors := headings(string(text)); !anchors[anchor] {
		return fmt.Sprintf("link to %s: %s has no heading with the anchor #%s", target, resolved, anchor)
	}
	return ""
}

// repoPathRE is a code span that names a repository path: one of the
// module's top directories, then a path.
var repoPathRE = regexp.MustCompile(`^(internal|pkg|apis|cmd|hack|e2e|artifacts|docs)/[^\s]*$`)

// checkPaths finds repository paths in code spans that do not exist. A
// span that is a command is judged by its first word; patterns (…, *, <x>,
// NAME) are not paths; {a,b} is expanded as the shell does; a Go
// identifier after the path (internal/definition.Definition) is allowed.
func checkPaths(fsys fs.FS, files []string) []string {
	var problems []string
	for _, file := range files {
		text, err := fs.ReadFile(fsys, file)
		if err != nil {
			continue
		}
		spans, nums := inlineCode(string(text))
		for i, span := range spans {
			fields := strings.Fields(span)
			if len(fields) == 0 || !repoPathRE.MatchString(fields[0]) {
				continue
			}
			p := strings.TrimRight(fields[0], ".,;:")
			if strings.ContainsAny(p, "*<…$") || strings.Contains(p, "NAME") || strings.Contains(p, "...") {
				continue
			}
			for _, candidate := range expandBraces(p) {
				if !pathExists(fsys, candidate) {
					problems = append(problems, fmt.Sprintf("%s:%d: `%s`: no such path in the repository", file, nums[i], candidate))
				}
			}
		}
	}
	return problems
}

func pathExists(fsys fs.FS, p string) bool {
	if exists(fsys, p) {
		return true
	}
	// internal/definition.Definition, internal/engine/compare.go's names
	// are not at issue: a path then a Go identifier.
	if i := strings.LastIndex(p, "."); i > 0 && i+1 < len(p) && p[i+1] >= 'A' && p[i+1] <= 'Z' {
		return exists(fsys, p[:i])
	}
	return false
}

var braceRE = regexp.MustCompile(`\{([^{}]*)\}`)

func expandBraces(p string) []string {
	m := braceRE.FindStringSubmatchIndex(p)
	if m == nil {
		return []string{p}
	}
	var out []string
	for _, alt := range strings.Split(p[m[2]:m[3]], ",") {
		out = append(out, expandBraces(p[:m[0]]+alt+p[m[1]:])...)
	}
	return out
}

// testNameRE is a code span that is a Go test, fuzz target or benchmark
// (a subtest after the slash is not checked).
var testNameRE = regexp.MustCompile(`^((?:Test|Fuzz|Benchmark)[A-Z0-9]\w*)(/\S*)?$`)

var testFuncRE = regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)\w*)\(`)

// testNames returns every test, fuzz target and benchmark function of the
// repository's *_test.go files (every module: hack/release and hack/image
// are modules of their own).
func testNames(fsys fs.FS) map[string]bool {
	names := map[string]bool{}
	_ = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if p != "." && (strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return fs.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		text, err := fs.ReadFile(fsys, p)
		if err != nil {
			return nil
		}
		for _, m := range testFuncRE.FindAllStringSubmatch(string(text), -1) {
			names[m[1]] = true
		}
		return nil
	})
	return names
}

// checkTestNames finds tests cited in code spans that no *_test.go defines.
func checkTestNames(fsys fs.FS, files []string, names map[string]bool) []string {
	var problems []string
	for _, file := range files {
		text, err := fs.ReadFile(fsys, file)
		if err != nil {
			continue
		}
		spans, nums := inlineCode(string(text))
		for i, span := range spans {
			m := testNameRE.FindStringSubmatch(span)
			if m != nil && !names[m[1]] {
				problems = append(problems, fmt.Sprintf("%s:%d: `%s`: no such test in the repository's *_test.go files", file, nums[i], m[1]))
			}
		}
	}
	return problems
}

// The ways code, manifests and docs cite a section: (README, "Section"),
// the README's "Section", (docs/install.md, "Section"),
// artifacts/deploy/README.md, "Section"; and docs/x.md#anchor or
// README.md#anchor. A bare docs/x.md must exist.
var (
	sectionCiteRE = regexp.MustCompile("((?:[a-z0-9_-]+/)*(?:README(?:\\.md)?|[a-z0-9-]+\\.md))`?(?:'s|,) \"([^\"]{1,100})\"")
	anchorCiteRE  = regexp.MustCompile(`((?:[a-z0-9_.-]+/)*(?:README|[a-z0-9-]+)\.md)#([A-Za-z0-9_-]+)`)
	docCiteRE     = regexp.MustCompile(`\bdocs/[a-z0-9-]+\.md\b`)
	// A comment or a wrapped line goes on after its marker.
	continuationRE = regexp.MustCompile(`\n[ \t]*(?://|#+)?[ \t]*`)
)

// citedFile is the repository file a citation names; the bare README is
// the top one.
func citedFile(name string) string {
	for strings.HasPrefix(name, "../") {
		name = strings.TrimPrefix(name, "../")
	}
	if name == "README" {
		return "README.md"
	}
	return name
}

// checkCitations finds sections and anchors cited in the given files
// that the cited file does not have. Only citations of the README, docs/
// and artifacts' READMEs are judged: other files are not this test's.
func checkCitations(fsys fs.FS, sources []string) []string {
	var problems []string
	for _, src := range sources {
		raw, err := fs.ReadFile(fsys, src)
		if err != nil {
			continue
		}
		text := strings.ReplaceAll(string(raw), `\"`, `"`)
		text = continuationRE.ReplaceAllString(text, " ")
		judged := func(file string) bool {
			return file == "README.md" || strings.HasPrefix(file, "docs/") || (strings.HasPrefix(file, "artifacts/") && strings.HasSuffix(file, "/README.md"))
		}
		for _, m := range sectionCiteRE.FindAllStringSubmatch(text, -1) {
			file := citedFile(m[1])
			if !judged(file) {
				continue
			}
			content, err := fs.ReadFile(fsys, file)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: cites %s, %q: no such file", src, file, m[2]))
				continue
			}
			texts, _ := headings(string(content))
			if !contains(texts, headingText(m[2])) {
				problems = append(problems, fmt.Sprintf("%s: cites %s, %q: no such heading there", src, file, m[2]))
			}
		}
		for _, m := range anchorCiteRE.FindAllStringSubmatch(text, -1) {
			file := citedFile(m[1])
			if !judged(file) {
				continue
			}
			content, err := fs.ReadFile(fsys, file)
			if err != nil {
				problems = append(problems, fmt.Sprintf("%s: cites %s#%s: no such file", src, file, m[2]))
				continue
			}
			if _, anchors := headings(string(content)); !anchors[m[2]] {
				problems = append(problems, fmt.Sprintf("%s: cites %s#%s: no such anchor there", src, file, m[2]))
			}
		}
		for _, m := range docCiteRE.FindAllString(text, -1) {
			if !exists(fsys, m) {
				problems = append(problems, fmt.Sprintf("%s: cites %s: no such file", src, m))
			}
		}
	}
	return problems
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// citationSources returns the files whose citations are checked: code,
// scripts, manifests and charts, and every markdown file, but not vendored
// test data (Metacontroller's examples cite their own READMEs) nor this
// package's fixtures of broken citations.
func citationSources(fsys fs.FS) []string {
	var out []string
	_ = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() {
			if p != "." && (strings.HasPrefix(d.Name(), "_") || d.Name() == ".git" || d.Name() == "testdata" || d.Name() == "node_modules" || p == "internal/doccheck") {
				return fs.SkipDir
			}
			return nil
		}
		switch path.Ext(p) {
		case ".go", ".yaml", ".yml", ".sh", ".tpl", ".md", ".txt", ".py", ".js":
			out = append(out, p)
		default:
			if d.Name() == "Dockerfile" || p == ".ci/run" {
				out = append(out, p)
			}
		}
		return nil
	})
	return out
}
