// Command release builds the `kubectl composite` plugin's release archives
// and the krew manifest that installs them (hack/release.sh runs it).
//
// For each platform it cross-compiles cmd/kubectl-composite (CGO_ENABLED=0,
// static), packs it with LICENSE and README.md as
// kubectl-composite_<os>_<arch>.tar.gz (.zip for Windows, where tar.gz is
// not what users open), and writes composite.yaml, the krew manifest whose
// every platform names its archive's URL and sha256. The archives are
// written byte for byte the same from the same source and
// SOURCE_DATE_EPOCH, so that their checksums can be reproduced.
package main

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/template"
	"time"
)

const pluginName = "kubectl-composite"

// krewManifest is the krew plugin manifest's template; Plugin fills it.
//
//go:embed krew-manifest.yaml.tmpl
var krewManifest string

// Options say what to build and where.
type Options struct {
	// Source is the repository root holding ./cmd/kubectl-composite,
	// LICENSE and README.md.
	Source string
	// Version is the release's tag (vMAJOR.MINOR.PATCH), krew's
	// spec.version.
	Version string
	// Platforms are os/arch pairs.
	Platforms []string
	// Output receives the archives and composite.yaml.
	Output string
	// Binaries receives each compiled plugin as <os>-<arch>/<binary>, for
	// its SBOM.
	Binaries string
	// URL is where the archives are downloaded from once released: the
	// krew manifest's URIs are URL/<archive>.
	URL string
	// Created is every archive entry's time.
	Created time.Time
}

// Archive is one platform's release archive.
type Archive struct {
	OS, Arch string
	// Name is the archive's file name in Output.
	Name string
	// Bin is the plugin's file name inside it.
	Bin string
	// SHA256 is the archive's checksum, hex.
	SHA256 string
	// URI is where krew downloads it from.
	URI string
}

func main() {
	var o Options
	var platforms string
	var epoch int64
	flag.StringVar(&o.Source, "source", ".", "repository root")
	flag.StringVar(&o.Version, "version", "", "the release's tag, vMAJOR.MINOR.PATCH[-PRERELEASE] (krew's spec.version)")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64,darwin/amd64,darwin/arm64,windows/amd64", "comma-separated os/arch list")
	flag.StringVar(&o.Output, "output", "_output/release", "directory to write the archives and composite.yaml (the krew manifest) into")
	flag.StringVar(&o.Binaries, "binaries", "_output/release/bin", "directory to keep each compiled plugin in, as <os>-<arch>/"+pluginName+"[.exe]")
	flag.StringVar(&o.URL, "url", "", "where the archives are downloaded from once released (the krew manifest's URIs are URL/ARCHIVE)")
	flag.Int64Var(&epoch, "source-date-epoch", 0, "every archive entry's time, in seconds since 1970 (the commit's, so that one commit packs the same bytes)")
	flag.Parse()
	o.Platforms = strings.Split(platforms, ",")
	o.Created = time.Unix(epoch, 0).UTC()
	if o.Version == "" || o.URL == "" {
		fmt.Fprintln(os.Stderr, "--version and --url are required")
		os.Exit(2)
	}
	archives, err := Plugin(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for _, a := range archives {
		fmt.Printf("wrote %s (%s/%s, sha256 %s)\n", filepath.Join(o.Output, a.Name), a.OS, a.Arch, a.SHA256)
	}
	fmt.Printf("wrote %s\n", filepath.Join(o.Output, "composite.yaml"))
}

// Plugin builds every platform's archive and the krew manifest naming them.
func Plugin(ctx context.Context, o Options) ([]Archive, error) {
	var extras []file
	for _, name := range []string{"LICENSE", "README.md"} {
		data, err := os.ReadFile(filepath.Join(o.Source, name))
		if err != nil {
			// krew's own validation refuses a plugin whose archive has
			// no license file.
			return nil, fmt.Errorf("can't read %s for the plugin archives: %w", name, err)
		}
		extras = append(extras, file{name: name, mode: 0o644, data: data})
	}
	var archives []Archive
	for _, p := range o.Platforms {
		goos, goarch, ok := strings.Cut(p, "/")
		if !ok {
			return nil, fmt.Errorf("can't parse platform %q: want os/arch", p)
		}
		a := Archive{OS: goos, Arch: goarch, Bin: pluginName}
		if goos == "windows" {
			a.Bin += ".exe"
		}
		bin := filepath.Join(o.Binaries, goos+"-"+goarch, a.Bin)
		if err := compile(ctx, o.Source, goos, goarch, bin); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			return nil, err
		}
		files := append([]file{{name: a.Bin, mode: 0o755, data: data}}, extras...)
		var archive []byte
		if goos == "windows" {
			a.Name = fmt.Sprintf("%s_%s_%s.zip", pluginName, goos, goarch)
			archive, err = zipOf(files, o.Created)
		} else {
			a.Name = fmt.Sprintf("%s_%s_%s.tar.gz", pluginName, goos, goarch)
			archive, err = tarGzOf(files, o.Created)
		}
		if err != nil {
			return nil, fmt.Errorf("can't pack %s: %w", a.Name, err)
		}
		if err := os.WriteFile(filepath.Join(o.Output, a.Name), archive, 0o644); err != nil {
			return nil, err
		}
		sum := sha256.Sum256(archive)
		a.SHA256 = hex.EncodeToString(sum[:])
		a.URI = strings.TrimRight(o.URL, "/") + "/" + a.Name
		archives = append(archives, a)
	}
	return archives, writeKrewManifest(filepath.Join(o.Output, "composite.yaml"), o.Version, archives)
}

// compile builds a static plugin for goos/goarch.
func compile(ctx context.Context, source, goos, goarch, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", "-s -w", "-o", out, "./cmd/kubectl-composite")
	cmd.Dir = source
	// CGO off: one static binary per platform, cross-compiled from any
	// machine, that needs no libc of a particular version.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+goarch)
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("can't build %s for %s/%s: %w\n%s", pluginName, goos, goarch, err, output)
	}
	return nil
}

// writeKrewManifest writes the krew manifest. krew takes the plugin's name
// from the file's name: it must be composite.yaml for `kubectl composite`.
func writeKrewManifest(path, version string, archives []Archive) error {
	tmpl, err := template.New("krew").Parse(krewManifest)
	if err != nil {
		return fmt.Errorf("can't parse the krew manifest's template: %w", err)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, struct {
		Version   string
		Platforms []Archive
	}{version, archives}); err != nil {
		return fmt.Errorf("can't write the krew manifest: %w", err)
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// file is one archive entry.
type file struct {
	name string
	mode int64
	data []byte
}

// tarGzOf packs files with a fixed time and owner, and a gzip header
// without name or time, so that one source packs to one checksum.
func tarGzOf(files []file, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(gz)
	for _, f := range files {
		h := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: created, Format: tar.FormatPAX}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// zipOf packs files, deflated, with a fixed time.
func zipOf(files []file, created time.Time) ([]byte, error) {
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, f := range files {
		h := &zip.FileHeader{Name: f.name, Method: zip.Deflate, Modified: created}
		h.SetMode(os.FileMode(f.mode))
		w, err := zw.CreateHeader(h)
		if err != nil {
			return nil, err
		}
		if _, err := io.Copy(w, bytes.NewReader(f.data)); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
