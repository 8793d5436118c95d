package main

import (
	"archive/tar"
	"context"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// The image is built as hack/build-image.sh builds it, for both platforms,
// and read back from the layout it wrote, as a registry or a runtime
// would read it: each platform's config says who runs what, and the
// binary in the layer is the one for that platform and answers --version
// with the stamped version (on the host's platform, where it can run).
func TestImageLayoutRunsTheServerAsNonRoot(t *testing.T) {
	if testing.Short() {
		t.Skip("cross-compiles the server twice")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out, o := buildOrReuse(t, root)
	idx, err := layout.ImageIndexFromPath(out)
	if err != nil {
		t.Fatal(err)
	}
	top, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(top.Manifests) != 1 || top.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != o.Version {
		t.Fatalf("the layout's index.json should name one multi-platform index tagged %q: %+v", o.Version, top.Manifests)
	}
	multi, err := idx.ImageIndex(top.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	manifest, err := multi.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	seen := map[string]bool{}
	for _, desc := range manifest.Manifests {
		if desc.Platform == nil {
			t.Fatalf("manifest %s has no platform", desc.Digest)
		}
		arch := desc.Platform.Architecture
		seen[arch] = true
		t.Run(desc.Platform.OS+"/"+arch, func(t *testing.T) {
			img, err := multi.Image(desc.Digest)
			if err != nil {
				t.Fatal(err)
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if cf.OS != "linux" || cf.Architecture != arch {
				t.Errorf("config says %s/%s, the index %s/%s", cf.OS, cf.Architecture, desc.Platform.OS, arch)
			}
			if got := strings.Join(cf.Config.Entrypoint, " "); got != "/composite-apiserver" {
				t.Errorf("entrypoint %q, want /composite-apiserver", got)
			}
			if cf.Config.User != "65532:65532" {
				t.Errorf("user %q, want 65532:65532 (non-root, numeric so runAsNonRoot can check it)", cf.Config.User)
			}
			if got := cf.Config.Labels["org.opencontainers.image.version"]; got != o.Version {
				t.Errorf("version label %q, want %q", got, o.Version)
			}
			if got := cf.Config.Labels["org.opencontainers.image.revision"]; got != o.Revision {
				t.Errorf("revision label %q, want %q", got, o.Revision)
			}

			bin := extract(t, img, "composite-apiserver")
			f, err := elf.Open(bin)
			if err != nil {
				t.Fatalf("the server in the image is no ELF binary: %v", err)
			}
			defer f.Close()
			if f.Machine != machines[arch] {
				t.Errorf("the %s image holds a binary for %s", arch, f.Machine)
			}
			// Static: no interpreter to find on an empty base.
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					t.Errorf("the %s binary is dynamically linked: it needs a loader the image does not have", arch)
				}
			}
			if arch != runtime.GOARCH {
				return
			}
			got, err := exec.Command(bin, "--version").CombinedOutput()
			if err != nil {
				t.Fatalf("%s --version: %v: %s", bin, err, got)
			}
			if want := "composite-apiserver " + o.Version + "\n"; string(got) != want {
				t.Errorf("--version printed %q, want %q", got, want)
			}
		})
	}
	for arch := range machines {
		if !seen[arch] {
			t.Errorf("the index has no linux/%s image", arch)
		}
	}

	if !o.Tarballs {
		return
	}
	// The docker-loadable tarball holds the same image as the layout.
	tarPath := out + "-linux-" + runtime.GOARCH + ".tar"
	fromTar, err := tarball.ImageFromPath(tarPath, nil)
	if err != nil {
		t.Fatalf("can't read %s: %v", tarPath, err)
	}
	tarDigest, err := fromTar.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	for _, desc := range manifest.Manifests {
		if desc.Platform.Architecture != runtime.GOARCH {
			continue
		}
		img, err := multi.Image(desc.Digest)
		if err != nil {
			t.Fatal(err)
		}
		if cfgDigest, err := img.ConfigName(); err != nil || cfgDigest != tarDigest {
			t.Errorf("the tarball's config %s differs from the layout's %s (%v)", tarDigest, cfgDigest, err)
		}
	}
}

// buildOrReuse builds the image as hack/build-image.sh does, for both
// platforms, with tarballs; or, when COMPOSITE_IMAGE_LAYOUT names a layout
// hack/build-image.sh has already written with VERSION
// COMPOSITE_IMAGE_VERSION (hack/test.sh passes the one hack/release's test
// built through hack/release.sh, which writes no tarballs), takes that one,
// so that CI cross-compiles the server once. It returns the layout's
// directory and what it was built with.
func buildOrReuse(t *testing.T, root string) (string, Options) {
	t.Helper()
	if out := os.Getenv("COMPOSITE_IMAGE_LAYOUT"); out != "" {
		version := os.Getenv("COMPOSITE_IMAGE_VERSION")
		if version == "" {
			t.Fatal("COMPOSITE_IMAGE_LAYOUT needs COMPOSITE_IMAGE_VERSION, the VERSION that layout was built with")
		}
		revision, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
		if err != nil {
			t.Fatalf("git rev-parse HEAD, the revision hack/build-image.sh labels the image with: %v", err)
		}
		return out, Options{Version: version, Revision: strings.TrimSpace(string(revision))}
	}
	out := filepath.Join(t.TempDir(), "oci")
	o := Options{
		Source:    root,
		Platforms: []string{"linux/amd64", "linux/arm64"},
		Version:   "v0.0.0-test.1",
		Revision:  "0123456789abcdef",
		Output:    out,
		Tarballs:  true,
		Created:   time.Unix(0, 0).UTC(),
	}
	// Cross-compiling the server for a second architecture on a fresh
	// machine (no build cache for it) takes minutes on two cores; the
	// bound only keeps a hung build from hanging CI.
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	start := time.Now()
	if _, err := Build(ctx, o); err != nil {
		t.Fatal(err)
	}
	t.Logf("built %v in %s", o.Platforms, time.Since(start).Round(time.Millisecond))
	return out, o
}

// extract writes the file at path in img's filesystem to a temporary file
// and returns its name.
func extract(t *testing.T, img v1.Image, path string) string {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("the image has no /%s", path)
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimPrefix(h.Name, "/") != path {
			continue
		}
		if h.Mode&0o111 == 0 {
			t.Errorf("/%s is not executable (mode %o)", path, h.Mode)
		}
		out := filepath.Join(t.TempDir(), path)
		f, err := os.OpenFile(out, os.O_CREATE|os.O_WRONLY, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		return out
	}
}
