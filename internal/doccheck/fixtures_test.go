package doccheck

import (
	"strings"
	"testing"
	"testing/fstest"
)

// The checks on broken fixtures: each must fail where the docs would be
// wrong, so that a pass on the repository means something.

func fixture() fstest.MapFS {
	return fstest.MapFS{
		"README.md": {Data: []byte("# t\n\nSee [install](docs/install.md#supported-kubernetes-versions), [gone](docs/gone.md),\n" +
			"[no anchor](docs/install.md#nowhere), [self](#t), [web](https://example.com/x.md#y).\n" +
			"```sh\n[not a link](docs/none.md)\n```\n")},
		"CONTRIBUTING.md": {Data: []byte("# c\n\n`internal/here` and `internal/{here,there}`, `internal/here.Type`, `hack/run.sh --flag`, `internal/…`.\n" +
			"`TestThere` and `TestMissing`, `TestThere/sub`, `FuzzGone`.\n")},
		"docs/install.md":         {Data: []byte("# Install\n\n## Supported Kubernetes versions\n\nKubernetes **1.34 to 1.37**, the four newest minors.\n\n## Steps: `one`, two\n")},
		"internal/here/x.go":      {Data: []byte("package here\n\n// See (docs/install.md, \"Steps: one, two\") and (README, \"Gone\"),\n// docs/install.md#steps-one-two, docs/install.md#gone and (docs/install.md,\n// \"Supported Kubernetes versions\"); docs/missing.md.\n")},
		"internal/here/x_test.go": {Data: []byte("package here\n\nfunc TestThere(t *testing.T) {}\n")},
		"hack/run.sh":             {Data: []byte("#!/bin/sh\n")},
	}
}

// expect fails unless the problems are exactly those containing each of
// want, one each.
func expect(t *testing.T, problems []string, want ...string) {
	t.Helper()
	if len(problems) != len(want) {
		t.Errorf("got %d problems, want %d:\n%s", len(problems), len(want), strings.Join(problems, "\n"))
	}
	for _, w := range want {
		found := false
		for _, p := range problems {
			found = found || strings.Contains(p, w)
		}
		if !found {
			t.Errorf("no problem says %q:\n%s", w, strings.Join(problems, "\n"))
		}
	}
}

func TestLinkCheckFailsOnADeadFileOrAnchor(t *testing.T) {
	fsys := fixture()
	expect(t, checkLinks(fsys, []string{"README.md"}), "docs/gone.md: no such file", "anchor #nowhere")
}

func TestPathCheckFailsOnAPathThatDoesNotExist(t *testing.T) {
	fsys := fixture()
	expect(t, checkPaths(fsys, []string{"CONTRIBUTING.md"}), "`internal/there`")
}

func TestTestNameCheckFailsOnATestThatDoesNotExist(t *testing.T) {
	fsys := fixture()
	expect(t, checkTestNames(fsys, []string{"CONTRIBUTING.md"}, testNames(fsys)), "`TestMissing`", "`FuzzGone`")
}

func TestCitationCheckFailsOnASectionThatDoesNotExist(t *testing.T) {
	fsys := fixture()
	expect(t, checkCitations(fsys, []string{"internal/here/x.go"}),
		`README.md, "Gone"`, "docs/install.md#gone", "docs/missing.md")
}

func TestReadmeTopCheckFailsOnAMovedCommandOrALongReadme(t *testing.T) {
	good := strings.Join(readmeTop[:2], "\n") + "\nAn aggregated API server that serves things.\n" + strings.Join(readmeTop[3:], "\n") + "\n"
	expect(t, checkReadmeTop(good))
	expect(t, checkReadmeTop(strings.Replace(good, "hack/test.sh ", "hack/test.sh -v", 1)), "README.md:7")
	expect(t, checkReadmeTop(strings.Replace(good, "things.", "things. And more.", 1)), "one sentence")
	expect(t, checkReadmeTop(good+strings.Repeat("more\n", readmeMaxLines)), "more than 400")
}

func TestBenchmarksCheckFailsOnAnUnknownCommitAWrongDateOrASecondRow(t *testing.T) {
	row := func(figure, date, commit string) string {
		return "| " + figure + " | 1 | 2 | 0.5× | ≥ 0.4× | yes | " + date + " | " + commit + " |\n"
	}
	doc := "# B\n\n## B1\n\n" + benchmarkHeader + "\n|---|---|---|---|---|---|---|---|\n" +
		row("a", "2026-12-01", "aaaaaaa") + row("b", "2026-12-02", "aaaaaaa") + row("c", "2026-12-01", "fffffff") + row("a", "2026-12-01", "aaaaaaa")
	dateOf := func(c string) (string, bool) { return "2026-12-01", c == "aaaaaaa" }
	expect(t, checkBenchmarks(doc, dateOf), `"b": dated 2026-12-02`, `commit "fffffff" is not in the history`, `a second row for "a"`)
	expect(t, checkReadmeFigures("# t\n\n## What it costs\n\n| x |\n|---|\n| 0.5× and 0.7× |\n", doc), "0.7× is in no row")
}

func TestVersionCheckFailsOnVersionsHackTestShDoesNotRun(t *testing.T) {
	fsys := fixture()
	fsys["hack/install-test-binaries.sh"] = &fstest.MapFile{Data: []byte("k8s_version=v1.38.0\n")}
	fsys["hack/test.sh"] = &fstest.MapFile{Data: []byte("oldest=$(hack/install-test-binaries.sh 1.34 | tail -n 1)\n")}
	fsys["README.md"] = &fstest.MapFile{Data: []byte("# t\n\n### Supported Kubernetes versions\n\n1.34 to 1.38, the five newest minors.\n")}
	fsys["artifacts/chart/composite-apiserver/Chart.yaml"] = &fstest.MapFile{Data: []byte("kubeVersion: \">=1.34.0-0\"\n")}
	expect(t, checkVersions(fsys), "docs/install.md says 1.34 to 1.37", "count of minors is not five")
}
