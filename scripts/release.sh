#!/usr/bin/env bash
# Builds a release of junban into dist/<version>/ (make release):
#   <binary>_linux_<arch>   every service and junbanctl, static, for linux/amd64 and linux/arm64
#   sbom.cdx.json           CycloneDX SBOM of the Go module graph (cyclonedx-gomod, pinned)
#   VERSION                 version, revision, Go toolchain
#   SHA256SUMS              the SHA-256 of every file above (sha256sum -c SHA256SUMS)
# The version is `git describe --tags --always --dirty` (VERSION= to override), set in
# the binaries with -ldflags -X, as the Dockerfile does.
#
#   scripts/release.sh [--dry-run] [--out DIR]
# --dry-run prints every command it would run and builds nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

BINARIES=(order-worker persist-worker webhook-gateway junban-api junbanctl)
PLATFORMS=(linux/amd64 linux/arm64)
CYCLONEDX=github.com/CycloneDX/cyclonedx-gomod/cmd/cyclonedx-gomod@v1.10.0
PKG=github.com/junban/junban/internal/platform/buildinfo

dry=0
out=dist
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) dry=1; shift ;;
    --out) out="${2:?--out DIR}"; shift 2 ;;
    *) echo "release.sh: unknown argument $1 (usage: scripts/release.sh [--dry-run] [--out DIR])" >&2; exit 2 ;;
  esac
done

version=${VERSION:-$(git describe --tags --always --dirty)}
revision=$(git rev-parse HEAD)
case "$version" in
  *[!A-Za-z0-9._+-]*|'') echo "release.sh: version \"$version\" is not a plain word" >&2; exit 1 ;;
esac
dir="$out/$version"
ldflags="-s -w -X $PKG.version=$version -X $PKG.revision=$revision"

run() {
  if [ "$dry" = 1 ]; then
    printf '%q ' "$@"; echo
  else
    "$@"
  fi
}

echo "release $version ($revision) into $dir" >&2
run mkdir -p "$dir"
for p in "${PLATFORMS[@]}"; do
  os=${p%/*} arch=${p#*/}
  for b in "${BINARIES[@]}"; do
    run env CGO_ENABLED=0 GOOS="$os" GOARCH="$arch" GOWORK=off go build -trimpath -ldflags "$ldflags" -o "$dir/${b}_${os}_${arch}" "./cmd/$b"
  done
done
run env GOWORK=off go run "$CYCLONEDX" mod -json -licenses=false -output "$dir/sbom.cdx.json" .
if [ "$dry" = 1 ]; then
  echo "write $dir/VERSION"
else
  printf 'version %s\nrevision %s\ngo %s\n' "$version" "$revision" "$(go env GOVERSION)" > "$dir/VERSION"
fi
run sh -c "cd '$dir' && sha256sum -- *_linux_* sbom.cdx.json VERSION > SHA256SUMS"
echo "done: $dir" >&2
