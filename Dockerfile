# composite-apiserver's image: a static binary on distroless, run as the
# non-root user 65532. Multi-platform with BuildKit:
#   docker buildx build --platform linux/amd64,linux/arm64 \
#     --build-arg VERSION=$(git describe --tags --always) -t REGISTRY/composite-apiserver:TAG .
# Without Docker, hack/build-image.sh builds the same image (an OCI layout
# and per-platform tarballs) from Go alone; its test checks what this file
# promises: entrypoint, user, platforms, a binary that answers --version.

# The build runs on the builder's own platform and cross-compiles: no
# emulation, and CGO off makes a static binary for an empty base.
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
ARG TARGETOS
ARG TARGETARCH
ARG VERSION=dev
WORKDIR /src
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY apis apis
COPY cmd cmd
COPY pkg pkg
COPY internal internal
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath \
      -ldflags "-s -w -X github.com/composite-apiserver/composite-apiserver/internal/cmd/server.version=${VERSION}" \
      -o /out/composite-apiserver ./cmd/composite-apiserver

# distroless static: CA roots, tzdata, /etc/passwd naming nonroot (65532),
# and nothing to run but the server.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
LABEL org.opencontainers.image.title="composite-apiserver" \
      org.opencontainers.image.description="Metacontroller's CompositeController as an aggregated Kubernetes API" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
COPY --from=build /out/composite-apiserver /composite-apiserver
# Numeric, so that the kubelet can check runAsNonRoot.
USER 65532:65532
EXPOSE 8443
ENTRYPOINT ["/composite-apiserver"]
