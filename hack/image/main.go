// Command image builds composite-apiserver's container image without
// Docker: it cross-compiles the server for each platform (CGO_ENABLED=0, a
// static binary), lays it on an empty base with the few files a static Go
// server needs, and writes a multi-platform OCI image layout, plus a
// docker-loadable tarball per platform. The result is the image the
// Dockerfile builds: entrypoint /composite-apiserver, user 65532:65532.
//
// hack/build-image.sh runs it; push the layout with any OCI tool, e.g.
// `crane push _output/image/oci REGISTRY/composite-apiserver:VERSION` or
// `skopeo copy --all oci:_output/image/oci:VERSION docker://...`.
package main

import (
	"archive/tar"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// nonRoot is distroless's "nonroot" user and group: the server needs
	// no privilege, and a numeric user lets runAsNonRoot be checked.
	nonRoot = 65532
	// binaryPath is where the server lives in the image: the entrypoint.
	binaryPath = "composite-apiserver"
	// versionVar is the variable that --version prints.
	versionVar = "github.com/composite-apiserver/composite-apiserver/internal/cmd/server.version"
	imageName  = "composite-apiserver"
)

// Options say what to build and where.
type Options struct {
	// Source is the repository root holding ./cmd/composite-apiserver.
	Source string
	// Platforms are os/arch pairs, e.g. linux/amd64.
	Platforms []string
	// Version is stamped into the binary and labels the image.
	Version string
	// Revision is the source's commit, for the revision label.
	Revision string
	// Output is the directory of the OCI image layout; it is replaced.
	Output string
	// Tarballs also writes <Output>-<os>-<arch>.tar, for `docker load`
	// or `kind load image-archive`.
	Tarballs bool
	// CACertificates is a PEM bundle copied to /etc/ssl/certs: hooks
	// served over HTTPS with a public certificate need the usual roots.
	// Empty leaves them out.
	CACertificates string
	// Created is the images' creation time; fixed so that the same source
	// builds the same digests.
	Created time.Time
	// Binaries, when set, keeps the compiled servers as
	// <Binaries>/<os>-<arch>/composite-apiserver: hack/release.sh writes
	// each one's SBOM from the binary the image holds. Empty: they are
	// built in a temporary directory and removed.
	Binaries string
}

func main() {
	o := Options{Created: time.Unix(0, 0).UTC()}
	var platforms string
	flag.StringVar(&o.Source, "source", ".", "repository root")
	flag.StringVar(&platforms, "platforms", "linux/amd64,linux/arm64", "comma-separated os/arch list")
	flag.StringVar(&o.Version, "version", "dev", "version stamped into the binary (--version) and the image's labels")
	flag.StringVar(&o.Revision, "revision", "", "source revision for the org.opencontainers.image.revision label")
	flag.StringVar(&o.Output, "output", "_output/image/oci", "OCI image layout directory to write (replaced)")
	flag.BoolVar(&o.Tarballs, "tarballs", true, "also write a docker-loadable tarball per platform beside the layout")
	flag.StringVar(&o.Binaries, "binaries", "", "keep the compiled servers in this directory as <os>-<arch>/composite-apiserver (default: built in a temporary directory and removed)")
	flag.StringVar(&o.CACertificates, "ca-certificates", "/etc/ssl/certs/ca-certificates.crt", "PEM bundle to install as the image's root CAs (empty: none)")
	flag.Parse()
	o.Platforms = strings.Split(platforms, ",")
	if epoch := os.Getenv("SOURCE_DATE_EPOCH"); epoch != "" {
		var secs int64
		if _, err := fmt.Sscan(epoch, &secs); err != nil {
			fmt.Fprintf(os.Stderr, "bad SOURCE_DATE_EPOCH %q: %v\n", epoch, err)
			os.Exit(2)
		}
		o.Created = time.Unix(secs, 0).UTC()
	}
	idx, err := Build(context.Background(), o)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	digest, err := idx.Digest()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s (index %s, %s)\n", o.Output, digest, strings.Join(o.Platforms, ", "))
}

// Build compiles the server for every platform and writes the image layout
// (and tarballs); it returns the multi-platform index it wrote.
func Build(ctx context.Context, o Options) (v1.ImageIndex, error) {
	var ca []byte
	if o.CACertificates != "" {
		var err error
		if ca, err = os.ReadFile(o.CACertificates); err != nil {
			return nil, fmt.Errorf("can't read the CA certificates: %w", err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(filepath.Clean(o.Output)), 0o755); err != nil {
		return nil, err
	}
	binDir := o.Binaries
	if binDir == "" {
		tmp, err := os.MkdirTemp("", "composite-image-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		binDir = tmp
	}

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range o.Platforms {
		platform, err := v1.ParsePlatform(p)
		if err != nil {
			return nil, fmt.Errorf("can't parse platform %q: %w", p, err)
		}
		bin := filepath.Join(binDir, platform.OS+"-"+platform.Architecture, binaryPath)
		if err := compile(ctx, o, *platform, bin); err != nil {
			return nil, err
		}
		img, err := Image(o, *platform, bin, ca)
		if err != nil {
			return nil, err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: platform},
		})
		if o.Tarballs {
			ref, err := name.NewTag(imageName + ":" + o.Version)
			if err != nil {
				return nil, fmt.Errorf("can't tag the image with version %q: %w", o.Version, err)
			}
			tar := fmt.Sprintf("%s-%s-%s.tar", strings.TrimRight(o.Output, "/"), platform.OS, platform.Architecture)
			if err := tarball.WriteToFile(tar, ref, img); err != nil {
				return nil, fmt.Errorf("can't write %s: %w", tar, err)
			}
		}
	}

	if err := os.RemoveAll(o.Output); err != nil {
		return nil, err
	}
	lp, err := layout.Write(o.Output, empty.Index)
	if err != nil {
		return nil, fmt.Errorf("can't write the image layout: %w", err)
	}
	// The ref name annotation is the tag that `skopeo copy oci:DIR:TAG`
	// and other OCI tools find the index by.
	if err := lp.AppendIndex(idx, layout.WithAnnotations(map[string]string{
		"org.opencontainers.image.ref.name": o.Version,
	})); err != nil {
		return nil, fmt.Errorf("can't write the image index: %w", err)
	}
	return idx, nil
}

// compile builds a static server for platform, with the version stamped.
func compile(ctx context.Context, o Options, platform v1.Platform, out string) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", "-s -w -X "+versionVar+"="+o.Version,
		"-o", out, "./cmd/composite-apiserver")
	cmd.Dir = o.Source
	// CGO off: a static binary that runs on an empty base, whatever libc
	// the build machine has; cross-compiling needs nothing else.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+platform.OS, "GOARCH="+platform.Architecture)
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("can't build composite-apiserver for %s/%s: %w\n%s", platform.OS, platform.Architecture, err, output)
	}
	return nil
}

// Image is one platform's image: an empty base, one layer with the
// server, the user database naming 65532, and the CA roots.
func Image(o Options, platform v1.Platform, bin string, caCertificates []byte) (v1.Image, error) {
	layer, err := rootLayer(o.Created, bin, caCertificates)
	if err != nil {
		return nil, err
	}
	base := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.Append(base, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: v1.Time{Time: o.Created}, CreatedBy: "hack/image: composite-apiserver " + o.Version, Comment: "static binary, CGO_ENABLED=0"},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Variant = platform.OS, platform.Architecture, platform.Variant
	cf.Created = v1.Time{Time: o.Created}
	cf.Config.Entrypoint = []string{"/" + binaryPath}
	cf.Config.Cmd = nil
	cf.Config.User = fmt.Sprintf("%d:%d", nonRoot, nonRoot)
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
	cf.Config.ExposedPorts = map[string]struct{}{"8443/tcp": {}}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":       imageName,
		"org.opencontainers.image.description": "Metacontroller's CompositeController as an aggregated Kubernetes API",
		"org.opencontainers.image.version":     o.Version,
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
	if o.Revision != "" {
		cf.Config.Labels["org.opencontainers.image.revision"] = o.Revision
	}
	return mutate.ConfigFile(img, cf)
}

// rootLayer is the image's only layer. Entries are written in a fixed order
// with a fixed time, so that one source builds one digest.
func rootLayer(created time.Time, bin string, caCertificates []byte) (v1.Layer, error) {
	server, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, ModTime: created, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: created, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	// Whoever the container runs as can read and run everything here and
	// change none of it.
	steps := []func() error{
		func() error { return file(binaryPath, 0o755, server) },
		func() error { return dir("etc", 0o755) },
		// The user database, as distroless's: some libraries (and `id`
		// in a debug container) look the user up.
		func() error {
			return file("etc/group", 0o644, []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonRoot)))
		},
		func() error {
			return file("etc/passwd", 0o644, []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonRoot, nonRoot)))
		},
		// A writable /tmp for a server that is given a read-only root: the
		// chart mounts an emptyDir there.
		func() error { return dir("tmp", 0o1777) },
	}
	if len(caCertificates) > 0 {
		steps = append(steps,
			func() error { return dir("etc/ssl", 0o755) },
			func() error { return dir("etc/ssl/certs", 0o755) },
			func() error { return file("etc/ssl/certs/ca-certificates.crt", 0o644, caCertificates) },
		)
	}
	for _, step := range steps {
		if err := step(); err != nil {
			return nil, fmt.Errorf("can't write the image's layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
