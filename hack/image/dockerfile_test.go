package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The Dockerfile and this builder make one image two ways; nothing here
// can run Docker, so this test holds the Dockerfile to what the builder
// (and TestImageLayoutRunsTheServerAsNonRoot) promises: the final stage's
// user and entrypoint, a static build with the version stamped where
// --version reads it, and a build context holding every package the
// server is built from.
func TestDockerfileBuildsTheSameImage(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	// Join continuation lines; the last FROM starts the final stage.
	var lines []string
	var cur strings.Builder
	sc := bufio.NewScanner(strings.NewReader(string(data)))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if strings.HasSuffix(line, "\\") {
			cur.WriteString(strings.TrimSuffix(line, "\\") + " ")
			continue
		}
		cur.WriteString(line)
		lines = append(lines, cur.String())
		cur.Reset()
	}
	final := 0
	for i, l := range lines {
		if strings.HasPrefix(strings.ToUpper(l), "FROM ") {
			final = i
		}
	}
	var user, entrypoint, build string
	var copies []string
	for i, l := range lines {
		instr, rest, _ := strings.Cut(l, " ")
		switch strings.ToUpper(instr) {
		case "USER":
			if i > final {
				user = rest
			}
		case "ENTRYPOINT":
			if i > final {
				entrypoint = rest
			}
		case "RUN":
			if strings.Contains(rest, "go build") {
				build = rest
			}
		case "COPY":
			if i < final {
				copies = append(copies, strings.Fields(rest)[0])
			}
		}
	}
	if want := fmt.Sprintf("%d:%d", nonRoot, nonRoot); user != want {
		t.Errorf("the final stage runs as %q, the builder's image as %q", user, want)
	}
	var ep []string
	if err := json.Unmarshal([]byte(entrypoint), &ep); err != nil || len(ep) != 1 || ep[0] != "/"+binaryPath {
		t.Errorf("the final stage's ENTRYPOINT is %s, want [\"/%s\"] (exec form)", entrypoint, binaryPath)
	}
	for _, want := range []string{"CGO_ENABLED=0", "-X " + versionVar + "=", "./cmd/composite-apiserver"} {
		if !strings.Contains(build, want) {
			t.Errorf("the Dockerfile's go build lacks %q: %s", want, build)
		}
	}

	// Every package of this module that the server imports must be in the
	// build context the Dockerfile copies.
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", "./cmd/composite-apiserver")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, dir := range strings.Fields(string(out)) {
		rel, err := filepath.Rel(root, dir)
		if err != nil {
			t.Fatal(err)
		}
		top := strings.Split(rel, string(filepath.Separator))[0]
		found := false
		for _, c := range copies {
			if strings.TrimSuffix(c, "/") == top {
				found = true
			}
		}
		if !found {
			t.Errorf("the server is built from %s, which the Dockerfile does not COPY into its build stage (it copies %v)", rel, copies)
		}
	}
}
