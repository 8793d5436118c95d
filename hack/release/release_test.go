package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"debug/macho"
	"debug/pe"
	"encoding/json"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"golang.org/x/mod/module"
	modzip "golang.org/x/mod/zip"
	"sigs.k8s.io/yaml"
)

const tag = "v0.0.0-test.1"

// release is what one run of hack/release.sh --push left: its output
// directory and where it pushed.
type release struct {
	root, out string
	// registry is REGISTRY, a registry in this process.
	registry string
	// files serves the output directory: RELEASE_URL, where the plugin
	// archives and the krew manifest are downloaded from.
	files string
	helm  string
}

// hack/release.sh is run as a release manager runs it, with --push, and
// pushes to a registry served in this process (go-containerregistry's, in
// memory), so nothing leaves the machine; the plugin archives are served
// from its output directory at RELEASE_URL. Then each artifact is taken
// back as a user takes it: the image index and the chart pulled from the
// registry with crane and helm, the archives opened and the plugin run,
// the checksums checked with sha256sum, the krew manifest validated by
// krew's own validator (which installs every platform with
// `kubectl krew install`), and the plugin installed with krew and run.
//
// COMPOSITE_RELEASE_OUTPUT, if set, is OUTPUT, kept after the test:
// hack/test.sh has hack/image's test inspect the image layout there rather
// than cross-compile the server a second time.
func TestReleaseIsPulledAsAUserPullsIt(t *testing.T) {
	r := release{registry: startRegistry(t), out: os.Getenv("COMPOSITE_RELEASE_OUTPUT"), helm: os.Getenv("COMPOSITE_HELM")}
	if r.helm == "" {
		t.Fatal("COMPOSITE_HELM must name the helm to push and pull the chart with (hack/install-helm.sh builds it)")
	}
	if r.out == "" {
		r.out = t.TempDir()
	}
	var err error
	if r.root, err = filepath.Abs("../.."); err != nil {
		t.Fatal(err)
	}
	files := httptest.NewServer(http.FileServer(http.Dir(r.out)))
	t.Cleanup(files.Close)
	r.files = files.URL

	// Cross-compiling the server twice and the plugin five times on a
	// fresh machine takes many minutes on two cores; the bound only keeps
	// a hung build from hanging CI.
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(r.root, "hack/release.sh"), "--push", tag)
	cmd.Env = append(os.Environ(),
		"REGISTRY="+r.registry, "RELEASE_URL="+r.files, "OUTPUT="+r.out,
		"PLAIN_HTTP=true", "COMPOSITE_HELM="+r.helm)
	start := time.Now()
	output, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/release.sh --push %s: %v\n%s", tag, err, output)
	}
	t.Logf("hack/release.sh --push %s took %s", tag, time.Since(start).Round(time.Second))

	t.Run("image index has both platforms", r.checkImage)
	t.Run("chart pulls and names the pushed image", r.checkChart)
	t.Run("plugin archives hold a binary for their platform", r.checkArchives)
	t.Run("checksums cover every file", r.checkChecksums)
	t.Run("krew manifest validates and installs", r.checkKrew)
	t.Run("SBOMs list what each binary links", r.checkSBOMs)
	t.Run("go install of the tag", r.checkGoInstall)
}

// startRegistry serves an OCI registry in memory on loopback and returns
// its host:port followed by a namespace, as REGISTRY takes it.
func startRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://") + "/composite-apiserver"
}

// run runs a command and returns its standard output; it fails the test
// with both outputs if the command fails.
func run(t *testing.T, dir string, env []string, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, stdout.Bytes(), stderr.Bytes())
	}
	return stdout.Bytes()
}

// crane runs the pinned crane against the plain-HTTP registry.
func (r release) crane(t *testing.T, args ...string) []byte {
	t.Helper()
	return run(t, filepath.Join(r.root, "hack/tools/crane"), nil, "go", append([]string{"tool", "crane", "--insecure"}, args...)...)
}

func (r release) checkImage(t *testing.T) {
	ref := r.registry + "/composite-apiserver:" + tag
	var index struct {
		MediaType string
		Manifests []struct {
			Platform struct{ OS, Architecture string }
		}
	}
	if err := json.Unmarshal(r.crane(t, "manifest", ref), &index); err != nil {
		t.Fatal(err)
	}
	if index.MediaType != "application/vnd.oci.image.index.v1+json" {
		t.Errorf("%s is a %s, want an OCI image index", ref, index.MediaType)
	}
	var platforms []string
	for _, m := range index.Manifests {
		platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
	}
	sort.Strings(platforms)
	if got := strings.Join(platforms, ","); got != "linux/amd64,linux/arm64" {
		t.Errorf("%s has platforms %s, want linux/amd64,linux/arm64", ref, got)
	}
	for _, p := range []string{"linux/amd64", "linux/arm64"} {
		var config struct {
			Architecture string
			Config       struct{ Labels map[string]string }
		}
		if err := json.Unmarshal(r.crane(t, "config", "--platform", p, ref), &config); err != nil {
			t.Fatal(err)
		}
		if "linux/"+config.Architecture != p || config.Config.Labels["org.opencontainers.image.version"] != tag {
			t.Errorf("%s for %s: architecture %s, version label %q; want %s", ref, p, config.Architecture, config.Config.Labels["org.opencontainers.image.version"], tag)
		}
	}
}

func (r release) checkChart(t *testing.T) {
	chart := "oci://" + r.registry + "/charts/composite-apiserver"
	version := strings.TrimPrefix(tag, "v")
	var meta struct{ Name, Version, AppVersion string }
	if err := yaml.Unmarshal(run(t, "", nil, r.helm, "show", "chart", chart, "--version", version, "--plain-http"), &meta); err != nil {
		t.Fatal(err)
	}
	if meta.Name != "composite-apiserver" || meta.Version != version || meta.AppVersion != tag {
		t.Errorf("%s: name %q, version %q, appVersion %q; want composite-apiserver, %s, %s", chart, meta.Name, meta.Version, meta.AppVersion, version, tag)
	}
	dir := t.TempDir()
	run(t, "", nil, r.helm, "pull", chart, "--version", version, "--plain-http", "--destination", dir)
	pulled := filepath.Join(dir, "composite-apiserver-"+version+".tgz")
	// Installed with no --set, the chart runs the image this release
	// pushed, and that image is there to pull.
	rendered := string(run(t, "", nil, r.helm, "template", "composite-apiserver", pulled, "--namespace", "composite-system"))
	image := r.registry + "/composite-apiserver:" + tag
	if !strings.Contains(rendered, `image: "`+image+`"`) {
		t.Errorf("the pulled chart's Deployment does not run %s:\n%s", image, grepLines(rendered, "image:"))
	}
	r.crane(t, "digest", image)
}

// grepLines returns the lines of s that contain substr.
func grepLines(s, substr string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// platforms are the plugin's, with the machine each binary must be for.
var platforms = []struct {
	os, arch string
	check    func(t *testing.T, bin []byte)
}{
	{"linux", "amd64", elfFor(elf.EM_X86_64)},
	{"linux", "arm64", elfFor(elf.EM_AARCH64)},
	{"darwin", "amd64", machoFor(macho.CpuAmd64)},
	{"darwin", "arm64", machoFor(macho.CpuArm64)},
	{"windows", "amd64", peFor(pe.IMAGE_FILE_MACHINE_AMD64)},
}

func elfFor(m elf.Machine) func(*testing.T, []byte) {
	return func(t *testing.T, bin []byte) {
		f, err := elf.NewFile(bytes.NewReader(bin))
		if err != nil || f.Machine != m {
			t.Errorf("want an ELF binary for %s: %v", m, err)
		}
	}
}

func machoFor(c macho.Cpu) func(*testing.T, []byte) {
	return func(t *testing.T, bin []byte) {
		f, err := macho.NewFile(bytes.NewReader(bin))
		if err != nil || f.Cpu != c {
			t.Errorf("want a Mach-O binary for %s: %v", c, err)
		}
	}
}

func peFor(m uint16) func(*testing.T, []byte) {
	return func(t *testing.T, bin []byte) {
		f, err := pe.NewFile(bytes.NewReader(bin))
		if err != nil || f.Machine != m {
			t.Errorf("want a PE binary for machine %#x: %v", m, err)
		}
	}
}

func (r release) checkArchives(t *testing.T) {
	for _, p := range platforms {
		t.Run(p.os+"/"+p.arch, func(t *testing.T) {
			bin := "kubectl-composite"
			name := "kubectl-composite_" + p.os + "_" + p.arch + ".tar.gz"
			if p.os == "windows" {
				bin, name = bin+".exe", "kubectl-composite_"+p.os+"_"+p.arch+".zip"
			}
			files := unpack(t, filepath.Join(r.out, name))
			var names []string
			for n := range files {
				names = append(names, n)
			}
			sort.Strings(names)
			if want := strings.Join([]string{"LICENSE", "README.md", bin}, ","); strings.Join(names, ",") != want {
				t.Fatalf("%s holds %v, want %s", name, names, want)
			}
			p.check(t, files[bin])
			if p.os != runtime.GOOS || p.arch != runtime.GOARCH {
				return
			}
			path := filepath.Join(t.TempDir(), bin)
			if err := os.WriteFile(path, files[bin], 0o755); err != nil {
				t.Fatal(err)
			}
			help := string(run(t, "", nil, path, "--help"))
			for _, want := range []string{"kubectl composite", "preview", "sync", "rbac"} {
				if !strings.Contains(help, want) {
					t.Errorf("%s --help does not mention %q:\n%s", bin, want, help)
				}
			}
		})
	}
}

// unpack reads a .tar.gz or .zip into a map of file name to contents.
func unpack(t *testing.T, path string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{}
	if strings.HasSuffix(path, ".zip") {
		zr, err := zip.OpenReader(path)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		for _, f := range zr.File {
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			data, err := io.ReadAll(rc)
			rc.Close()
			if err != nil {
				t.Fatal(err)
			}
			files[f.Name] = data
		}
		return files
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if files[h.Name], err = io.ReadAll(tr); err != nil {
			t.Fatal(err)
		}
	}
}

func (r release) checkChecksums(t *testing.T) {
	run(t, r.out, nil, "sha256sum", "--check", "--strict", "checksums.txt")
	sums, err := os.ReadFile(filepath.Join(r.out, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(string(sums)), "\n") {
		if _, name, ok := strings.Cut(line, "  "); ok {
			listed[name] = true
		}
	}
	entries, err := os.ReadDir(r.out)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		// The image is checked by its digests, in the registry.
		if !e.IsDir() && e.Name() != "checksums.txt" && !listed[e.Name()] {
			t.Errorf("checksums.txt does not list %s", e.Name())
		}
	}
}

// checkKrew runs krew's validate-krew-manifest in full: besides the
// manifest's structure, it runs `kubectl krew install --manifest` for every
// platform (downloading each archive from RELEASE_URL, checking its sha256,
// finding the binary and a license file). Then the plugin is installed for
// this machine as a user installs it and run as `kubectl composite`.
func (r release) checkKrew(t *testing.T) {
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Fatal("kubectl must be on PATH: krew installs plugins through it")
	}
	bin := t.TempDir()
	krewMod := filepath.Join(r.root, "hack/tools/krew")
	run(t, krewMod, nil, "go", "build", "-o", filepath.Join(bin, "kubectl-krew"), "sigs.k8s.io/krew/cmd/krew")
	path := "PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")
	manifest := filepath.Join(r.out, "composite.yaml")
	run(t, krewMod, []string{path}, "go", "tool", "validate-krew-manifest", "-manifest", manifest)

	krewRoot := t.TempDir()
	env := []string{"KREW_ROOT=" + krewRoot, path}
	// --manifest, not the README's --manifest-url: krew 0.4 clones its
	// default index from GitHub before a --manifest-url install, and
	// nothing here reaches GitHub. The archives still come from
	// RELEASE_URL, as the manifest's URIs say.
	run(t, "", env, "kubectl", "krew", "install", "--manifest", manifest)
	env = []string{"PATH=" + filepath.Join(krewRoot, "bin") + string(os.PathListSeparator) + os.Getenv("PATH")}
	if help := string(run(t, "", env, "kubectl", "composite", "--help")); !strings.Contains(help, "kubectl composite") {
		t.Errorf("kubectl composite --help, installed by krew, printed:\n%s", help)
	}
}

// checkSBOMs reads every SBOM as a scanner does and compares the linux/amd64
// plugin's with the build information of the binary in its archive: the
// SBOM lists exactly the modules that binary links.
func (r release) checkSBOMs(t *testing.T) {
	names := []string{"composite-apiserver_linux_amd64", "composite-apiserver_linux_arm64"}
	for _, p := range platforms {
		names = append(names, "kubectl-composite_"+p.os+"_"+p.arch)
	}
	for _, name := range names {
		bom := readSBOM(t, filepath.Join(r.out, name+".sbom.cdx.json"))
		if bom.BOMFormat != "CycloneDX" || bom.Metadata.Component.Version != tag {
			t.Errorf("%s: format %q, main component version %q; want CycloneDX, %s", name, bom.BOMFormat, bom.Metadata.Component.Version, tag)
		}
		if !strings.HasPrefix(bom.Metadata.Component.PURL, "pkg:golang/github.com/composite-apiserver/composite-apiserver@"+tag) {
			t.Errorf("%s: main component %s, want composite-apiserver at %s", name, bom.Metadata.Component.PURL, tag)
		}
		if name != "kubectl-composite_linux_amd64" {
			continue
		}
		dir := t.TempDir()
		bin := filepath.Join(dir, "kubectl-composite")
		if err := os.WriteFile(bin, unpack(t, filepath.Join(r.out, name+".tar.gz"))["kubectl-composite"], 0o755); err != nil {
			t.Fatal(err)
		}
		info, err := buildinfo.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		var linked, listed []string
		for _, d := range info.Deps {
			linked = append(linked, d.Path+"@"+d.Version)
		}
		for _, c := range bom.Components {
			if c.Name != "std" {
				listed = append(listed, c.Name+"@"+c.Version)
			}
		}
		sort.Strings(linked)
		sort.Strings(listed)
		if strings.Join(linked, "\n") != strings.Join(listed, "\n") {
			t.Errorf("%s lists modules\n%s\nthe binary links\n%s", name, strings.Join(listed, "\n"), strings.Join(linked, "\n"))
		}
	}
}

// sbom is the part of a CycloneDX document that scanners match on.
type sbom struct {
	BOMFormat string `json:"bomFormat"`
	Metadata  struct {
		Component component `json:"component"`
	} `json:"metadata"`
	Components []component `json:"components"`
}

type component struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	PURL    string `json:"purl"`
}

func readSBOM(t *testing.T, path string) sbom {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var bom sbom
	if err := json.Unmarshal(data, &bom); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return bom
}

// checkGoInstall runs the README's `go install .../cmd/kubectl-composite@TAG`
// from outside any module, as a user does, with the module at TAG served
// by a module proxy in a directory (GOPROXY=file://, the committed tree as
// `git archive` gives it) ahead of the usual one for the dependencies: it
// proves the module can be installed by version (no replace directives, a
// go.sum that covers the plugin) and that what it installs runs.
func (r release) checkGoInstall(t *testing.T) {
	const mod = "github.com/composite-apiserver/composite-apiserver"
	proxy := t.TempDir()
	dir := filepath.Join(proxy, mod, "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	zf, err := os.Create(filepath.Join(dir, tag+".zip"))
	if err != nil {
		t.Fatal(err)
	}
	// The committed tree, as git archive gives it (x/mod's CreateFromVCS
	// does the same but does not recognize a git worktree's checkout).
	tree := t.TempDir()
	run(t, "", nil, "bash", "-c", `set -o pipefail; git -C "$0" archive HEAD | tar -x -C "$1"`, r.root, tree)
	if err := modzip.CreateFromDir(zf, module.Version{Path: mod, Version: tag}, tree); err != nil {
		t.Fatalf("can't zip the module at HEAD: %v", err)
	}
	if err := zf.Close(); err != nil {
		t.Fatal(err)
	}
	goMod, err := os.ReadFile(filepath.Join(r.root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	info := `{"Version":"` + tag + `","Time":"2026-01-01T00:00:00Z"}`
	for name, data := range map[string][]byte{tag + ".mod": goMod, tag + ".info": []byte(info), "list": []byte(tag + "\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	upstream := strings.TrimSpace(string(run(t, "", nil, "go", "env", "GOPROXY")))
	gobin := t.TempDir()
	env := []string{"GOPROXY=file://" + proxy + "," + upstream, "GONOSUMDB=" + mod, "GOBIN=" + gobin, "GOFLAGS="}
	run(t, t.TempDir(), env, "go", "install", mod+"/cmd/kubectl-composite@"+tag)
	if help := string(run(t, "", nil, filepath.Join(gobin, "kubectl-composite"), "--help")); !strings.Contains(help, "kubectl composite") {
		t.Errorf("kubectl-composite --help, installed with go install, printed:\n%s", help)
	}
}
