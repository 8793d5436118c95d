package doccheck

import (
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
)

const (
	readmeMaxLines     = 400
	benchmarksMaxLines = 250
)

// readmeTop is what the README's first screen must start with: the title,
// a blank line, one sentence on one line, then the two commands, byte for
// byte (a newcomer copies them; the line is compared whole).
var readmeTop = []string{
	"# composite-apiserver",
	"",
	"", // the sentence: checked by sentenceRE
	"",
	"```sh",
	"go run ./cmd/composite-apiserver --standalone   # serve the API: embedded etcd, no cluster needed",
	"hack/test.sh                                    # run the whole test suite",
	"```",
}

// sentenceRE is one sentence: a capital first, one full stop, at the end.
var sentenceRE = regexp.MustCompile(`^[A-Z][^.]*(\.[^ .][^.]*)*\.$`)

func checkReadmeTop(text string) []string {
	var problems []string
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) > readmeMaxLines {
		problems = append(problems, fmt.Sprintf("README.md has %d lines, more than %d", len(lines), readmeMaxLines))
	}
	for i, want := range readmeTop {
		got := ""
		if i < len(lines) {
			got = lines[i]
		}
		if i == 2 {
			if !sentenceRE.MatchString(got) {
				problems = append(problems, fmt.Sprintf("README.md:3: want one sentence of what it is, got %q", got))
			}
			continue
		}
		if got != want {
			problems = append(problems, fmt.Sprintf("README.md:%d: want %q, got %q", i+1, want, got))
		}
	}
	return problems
}

// benchmarkHeader is the one header of every table of docs/benchmarks.md.
const benchmarkHeader = "| figure | result | baseline (same run) | ratio | target | met | date | commit |"

// benchmarkRows returns the rows of docs/benchmarks.md's tables, each
// row's cells.
func benchmarkRows(text string) (rows [][]string, problems []string) {
	lines, nums := prose(text)
	inTable := false
	seen := map[string]bool{}
	for i, line := range lines {
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		if !inTable {
			inTable = true
			seen = map[string]bool{} // one row per figure, in each table
			if line != benchmarkHeader {
				problems = append(problems, fmt.Sprintf("docs/benchmarks.md:%d: a table whose header is not %q", nums[i], benchmarkHeader))
			}
			continue
		}
		if strings.HasPrefix(line, "|---") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), "|")
		for j := range cells {
			cells[j] = strings.TrimSpace(cells[j])
		}
		if len(cells) != 8 {
			problems = append(problems, fmt.Sprintf("docs/benchmarks.md:%d: %d cells, want 8", nums[i], len(cells)))
			continue
		}
		if seen[cells[0]] {
			problems = append(problems, fmt.Sprintf("docs/benchmarks.md:%d: a second row for %q: a new measurement replaces its row", nums[i], cells[0]))
		}
		seen[cells[0]] = true
		rows = append(rows, cells)
	}
	return rows, problems
}

// commitDate answers a commit's date (YYYY-MM-DD) if the commit is in
// HEAD's history.
type commitDate func(commit string) (date string, ok bool)

func checkBenchmarks(text string, dateOf commitDate) []string {
	var problems []string
	if n := strings.Count(strings.TrimSuffix(text, "\n"), "\n") + 1; n > benchmarksMaxLines {
		problems = append(problems, fmt.Sprintf("docs/benchmarks.md has %d lines, more than %d", n, benchmarksMaxLines))
	}
	rows, p := benchmarkRows(text)
	problems = append(problems, p...)
	if len(rows) == 0 {
		problems = append(problems, "docs/benchmarks.md has no rows")
	}
	for _, cells := range rows {
		date, commit := cells[6], cells[7]
		got, ok := dateOf(commit)
		switch {
		case !ok:
			problems = append(problems, fmt.Sprintf("docs/benchmarks.md: %q: commit %q is not in the history", cells[0], commit))
		case got != date:
			problems = append(problems, fmt.Sprintf("docs/benchmarks.md: %q: dated %s, but commit %s is of %s", cells[0], date, commit, got))
		}
	}
	return problems
}

// figureRE is a figure the README quotes: a ratio or a size.
var figureRE = regexp.MustCompile(`\d[\d,]*(?:\.\d+)?(?:×| MiB| ms)`)

// checkReadmeFigures finds figures of the README's "What it costs" table
// that no row of docs/benchmarks.md holds.
func checkReadmeFigures(readme, benchmarks string) []string {
	rows, _ := benchmarkRows(benchmarks)
	var all strings.Builder
	for _, cells := range rows {
		all.WriteString(strings.Join(cells, " | ") + "\n")
	}
	section := sectionText(readme, "What it costs")
	var problems []string
	var figures int
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "|") || strings.HasPrefix(line, "|---") {
			continue
		}
		for _, f := range figureRE.FindAllString(line, -1) {
			figures++
			if !strings.Contains(all.String(), f) {
				problems = append(problems, fmt.Sprintf("README.md, \"What it costs\": %s is in no row of docs/benchmarks.md", f))
			}
		}
	}
	if figures == 0 {
		problems = append(problems, "README.md has no figures under \"## What it costs\"")
	}
	return problems
}

// sectionText returns the text under a "## heading", up to the next
// heading of that level.
func sectionText(text, heading string) string {
	_, after, ok := strings.Cut(text, "\n## "+heading+"\n")
	if !ok {
		return ""
	}
	if i := strings.Index(after, "\n## "); i >= 0 {
		after = after[:i]
	}
	return after
}

var (
	newestRE = regexp.MustCompile(`(?m)^k8s_version=v1\.(\d+)\.\d+$`)
	oldestRE = regexp.MustCompile(`hack/install-test-binaries\.sh 1\.(\d+)`)
	rangeRE  = regexp.MustCompile(`1\.(\d+) to 1\.(\d+)`)
	kubeRE   = regexp.MustCompile(`(?m)^kubeVersion: ">=1\.(\d+)\.0-0"`)
)

// supportedMinors reads the minors hack/test.sh runs: the newest, whose
// binaries hack/install-test-binaries.sh pins, and the oldest, which
// hack/test.sh builds by minor for the cluster suite's second run.
func supportedMinors(fsys fs.FS) (oldest, newest int, err error) {
	install, err := fs.ReadFile(fsys, "hack/install-test-binaries.sh")
	if err != nil {
		return 0, 0, err
	}
	test, err := fs.ReadFile(fsys, "hack/test.sh")
	if err != nil {
		return 0, 0, err
	}
	n := newestRE.FindSubmatch(install)
	o := oldestRE.FindSubmatch(test)
	if n == nil || o == nil {
		return 0, 0, fmt.Errorf("can't read the newest minor from hack/install-test-binaries.sh (%v) or the oldest from hack/test.sh (%v)", n != nil, o != nil)
	}
	newest, _ = strconv.Atoi(string(n[1]))
	oldest, _ = strconv.Atoi(string(o[1]))
	return oldest, newest, nil
}

var minorsInWords = map[int]string{2: "two", 3: "three", 4: "four", 5: "five"}

// checkVersions finds a statement of the supported versions, in the
// README's and docs/install.md's "Supported Kubernetes versions" and the
// chart's kubeVersion, other than the minors hack/test.sh runs.
func checkVersions(fsys fs.FS) []string {
	oldest, newest, err := supportedMinors(fsys)
	if err != nil {
		return []string{err.Error()}
	}
	var problems []string
	for _, file := range []string{"README.md", "docs/install.md"} {
		text, err := fs.ReadFile(fsys, file)
		if err != nil {
			problems = append(problems, err.Error())
			continue
		}
		section := strings.ReplaceAll(subsection(string(text), "Supported Kubernetes versions"), "*", "")
		m := rangeRE.FindStringSubmatch(section)
		if m == nil {
			problems = append(problems, fmt.Sprintf("%s: no \"1.N to 1.M\" under \"Supported Kubernetes versions\"", file))
			continue
		}
		if got := m[0]; got != fmt.Sprintf("1.%d to 1.%d", oldest, newest) {
			problems = append(problems, fmt.Sprintf("%s says %s, hack/test.sh runs 1.%d to 1.%d", file, got, oldest, newest))
		}
		if w, ok := minorsInWords[newest-oldest+1]; ok && strings.Contains(section, "newest minors") && !strings.Contains(section, w+" newest minors") {
			problems = append(problems, fmt.Sprintf("%s: the count of minors is not %s", file, w))
		}
	}
	chart, err := fs.ReadFile(fsys, "artifacts/chart/composite-apiserver/Chart.yaml")
	if err != nil {
		return append(problems, err.Error())
	}
	if m := kubeRE.FindSubmatch(chart); m == nil || string(m[1]) != strconv.Itoa(oldest) {
		problems = append(problems, fmt.Sprintf("the chart's kubeVersion does not start at 1.%d", oldest))
	}
	return problems
}

// subsection returns the text under a heading of any level with that
// text, up to the next heading.
func subsection(text, heading string) string {
	lines, _ := prose(text)
	var out []string
	in := false
	for _, line := range lines {
		if m := headingRE.FindStringSubmatch(line); m != nil {
			in = headingText(m[2]) == heading
			continue
		}
		if in {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
