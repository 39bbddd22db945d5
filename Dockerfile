# junban's services and the CLI: static, non-root, small, for linux/amd64 and linux/arm64.
#   docker buildx build --platform linux/amd64,linux/arm64 --build-arg BIN=order-worker \
#     --build-arg VERSION=$(git describe --tags --always --dirty) --build-arg REVISION=$(git rev-parse HEAD) \
#     -t REGISTRY/junban/order-worker:VERSION --push .
# The Go toolchain runs on the build machine's platform and cross-compiles for each
# target (no emulation); scripts/release.sh builds the same binaries without Docker.
FROM --platform=$BUILDPLATFORM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG TARGETOS=linux
ARG TARGETARCH=amd64
ARG BIN=order-worker
ARG VERSION=devel
ARG REVISION=
RUN CGO_ENABLED=0 GOOS=${TARGETOS} GOARCH=${TARGETARCH} go build -trimpath \
      -ldflags="-s -w -X github.com/junban/junban/internal/platform/buildinfo.version=${VERSION} -X github.com/junban/junban/internal/platform/buildinfo.revision=${REVISION}" \
      -o /out/app ./cmd/${BIN}

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/app /app
USER nonroot:nonroot
# ECS and Docker run `/app healthcheck` (the task definition's health check); Kubernetes
# probes /healthz and /readyz over HTTP instead.
ENTRYPOINT ["/app"]
