// Module release builds the plugin's release archives and krew manifest
// (hack/release.sh) and tests the whole release, pushed to a registry in
// memory. It is its own module, outside the main module's ./..., so that
// the main module's dependency graph never sees go-containerregistry's, and
// its test (minutes of cross-builds) runs on its own in hack/test.sh.
module github.com/composite-apiserver/composite-apiserver/hack/release

go 1.26.0

require (
	github.com/google/go-containerregistry v0.22.1
	golang.org/x/mod v0.39.0
	sigs.k8s.io/yaml v1.6.0
)

require go.yaml.in/yaml/v2 v2.4.2 // indirect
