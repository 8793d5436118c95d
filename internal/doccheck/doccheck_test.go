package doccheck

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// repo is the repository this package sits in, two directories up.
func repo(t *testing.T) fs.FS {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	return os.DirFS(root)
}

func read(t *testing.T, fsys fs.FS, name string) string {
	t.Helper()
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func report(t *testing.T, problems []string) {
	t.Helper()
	for _, p := range problems {
		t.Error(p)
	}
}

func TestReadmeStartsWithTheTitleTheSentenceAndTheTwoCommands(t *testing.T) {
	report(t, checkReadmeTop(read(t, repo(t), "README.md")))
}

func TestNoDeadRelativeLinkInTheDocs(t *testing.T) {
	fsys := repo(t)
	report(t, checkLinks(fsys, docFiles(fsys)))
}

func TestEveryRepositoryPathTheDocsCiteExists(t *testing.T) {
	fsys := repo(t)
	report(t, checkPaths(fsys, docFiles(fsys)))
}

func TestEveryTestTheDocsCiteExists(t *testing.T) {
	fsys := repo(t)
	names := testNames(fsys)
	if !names["TestEveryTestTheDocsCiteExists"] {
		t.Fatal("testNames did not find this very test: it reads no *_test.go")
	}
	report(t, checkTestNames(fsys, docFiles(fsys), names))
}

func TestEverySectionCitedFromCodeAndManifestsExists(t *testing.T) {
	fsys := repo(t)
	sources := citationSources(fsys)
	if len(sources) < 100 {
		t.Fatalf("only %d files to read citations from", len(sources))
	}
	report(t, checkCitations(fsys, sources))
}

func TestBenchmarksKeepOneCurrentRowPerFigure(t *testing.T) {
	fsys := repo(t)
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	if err := exec.Command("git", "-C", root, "rev-parse", "--verify", "--quiet", "HEAD").Run(); err != nil {
		t.Skipf("no git history to find the rows' commits in: %v", err)
	}
	if out, _ := exec.Command("git", "-C", root, "rev-parse", "--is-shallow-repository").Output(); strings.TrimSpace(string(out)) == "true" {
		t.Skip("a shallow clone: the rows' commits may be outside its history")
	}
	dateOf := func(commit string) (string, bool) {
		if strings.HasPrefix(commit, "-") {
			return "", false
		}
		// In HEAD's history, not merely an object of the repository.
		if exec.Command("git", "-C", root, "merge-base", "--is-ancestor", commit, "HEAD").Run() != nil {
			return "", false
		}
		out, err := exec.Command("git", "-C", root, "log", "-1", "--format=%ad", "--date=short", commit).Output()
		if err != nil {
			return "", false
		}
		return strings.TrimSpace(string(out)), true
	}
	report(t, checkBenchmarks(read(t, fsys, "docs/benchmarks.md"), dateOf))
}

func TestTheReadmesFiguresAreTheBenchmarksRows(t *testing.T) {
	fsys := repo(t)
	report(t, checkReadmeFigures(read(t, fsys, "README.md"), read(t, fsys, "docs/benchmarks.md")))
}

func TestTheSupportedVersionsAreTheOnesHackTestShRuns(t *testing.T) {
	report(t, checkVersions(repo(t)))
}
