package doccheck

import (
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// The markdown the checks read: a small reader of what GitHub renders that
// matters here (headings, links, inline code), not a full CommonMark parser.

var (
	headingRE    = regexp.MustCompile(`^(#{1,6})\s+(.*?)\s*#*\s*$`)
	linkRE       = regexp.MustCompile(`\[([^\]]*)\]\(([^)\s]+)\)`)
	inlineCodeRE = regexp.MustCompile("`([^`]+)`")
	fenceRE      = regexp.MustCompile("^\\s*(```|~~~)")
)

// prose returns the lines of a markdown file outside fenced code blocks,
// with their 1-based numbers, so that a shell comment (`# ...`) is no
// heading and a link in a code sample is no link.
func prose(text string) (lines []string, numbers []int) {
	in := false
	for i, line := range strings.Split(text, "\n") {
		if fenceRE.MatchString(line) {
			in = !in
			continue
		}
		if !in {
			lines = append(lines, line)
			numbers = append(numbers, i+1)
		}
	}
	return lines, numbers
}

// headingText is a heading as GitHub renders it to text: code spans keep
// their content, links their text, emphasis goes.
func headingText(h string) string {
	h = linkRE.ReplaceAllString(h, "$1")
	h = strings.NewReplacer("`", "", "**", "", "__", "").Replace(h)
	return strings.Join(strings.Fields(h), " ")
}

// slug is GitHub's anchor for a heading's text: lower case, every
// character but letters, digits, spaces, hyphens and underscores dropped,
// spaces made hyphens.
func slug(text string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(text) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		}
	}
	return b.String()
}

// headings returns a markdown file's headings' texts and their anchors;
// a repeated anchor gets -1, -2, ... as on GitHub.
func headings(text string) (texts []string, anchors map[string]bool) {
	anchors = map[string]bool{}
	seen := map[string]int{}
	lines, _ := prose(text)
	for _, line := range lines {
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		t := headingText(m[2])
		texts = append(texts, t)
		a := slug(t)
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return texts, anchors
}

// inlineCode returns the code spans of a file's prose, with their lines.
func inlineCode(text string) (spans []string, numbers []int) {
	lines, nums := prose(text)
	for i, line := range lines {
		for _, m := range inlineCodeRE.FindAllStringSubmatch(line, -1) {
			spans = append(spans, m[1])
			numbers = append(numbers, nums[i])
		}
	}
	return spans, numbers
}

// exists says whether a slash-separated repository path is a file or a
// directory of fsys.
func exists(fsys fs.FS, p string) bool {
	p = path.Clean(strings.TrimSuffix(p, "/"))
	if p == "." {
		return true
	}
	_, err := fs.Stat(fsys, p)
	return err == nil
}

// docFiles returns the files the link checks read: README.md,
// CONTRIBUTING.md and every docs/*.md.
func docFiles(fsys fs.FS) []string {
	files := []string{"README.md", "CONTRIBUTING.md"}
	more, _ := fs.Glob(fsys, "docs/*.md")
	sort.Strings(more)
	return append(files, more...)
}
