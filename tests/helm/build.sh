#!/usr/bin/env bash
# Builds the helm command that renders manifests/install.yaml from the chart
# (`make manifests`) and that the chart's tests run (tests/agent/test_install.py),
# from the Go module pinned in this directory's go.mod/go.sum (helm.sh/helm/v3).
#
# The binary goes to ${RETWATCH_CACHE:-$HOME/.cache/retwatch}/helm/<key>/bin/helm,
# where <key> is a hash of this directory's module files and this script, so a
# change to any of them builds afresh while an unchanged tree reuses the cache.
# A cold build takes about a minute and a half; a warm one returns at once.
# Prints the bin directory as the last line of stdout; progress goes to stderr.
#
# Another release: `go get helm.sh/helm/v3@vX.Y.Z && go mod tidy` here.
# Usage: build.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"
# This module stands alone; a pure Go binary runs on any Linux of the arch.
export GOWORK=off CGO_ENABLED=0

key=$(cat go.mod go.sum build.sh | sha256sum | cut -c1-12)
root=${RETWATCH_CACHE:-$HOME/.cache/retwatch}/helm/$key
bin=$root/bin

if [[ -x $bin/helm ]]; then
    echo "$bin"
    exit 0
fi

mkdir -p "$root"
# Two test runs may start at once: one builds, the other waits for it.
exec 9>"$root/lock"
if ! flock -n 9; then
    echo "build.sh: waiting for another build into $root" >&2
    flock 9
fi
if [[ -x $bin/helm ]]; then
    echo "$bin"
    exit 0
fi

# Helm reads its version from variables its Makefile sets with -X; without
# them `helm version` says "v3.22" and nothing more. The module proxy does not
# know the release's git commit: leave it empty. The Kubernetes version that
# `helm template` and `helm lint` assume (.Capabilities.KubeVersion, without a
# cluster) is, as in Helm's Makefile, the one of the client-go it links
# (v0.X.Y is Kubernetes 1.X.Y); without it Helm assumes 1.20.
helm_version=$(go list -m -f '{{.Version}}' helm.sh/helm/v3)
client_go=$(go list -m -f '{{.Version}}' k8s.io/client-go)
k8s_minor=${client_go#v0.}; k8s_minor=${k8s_minor%%.*}
ldflags="-s -w"  # no symbol tables, as in release builds: a smaller binary
ldflags+=" -X helm.sh/helm/v3/internal/version.version=$helm_version"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitCommit="
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in helm.sh/helm/v3/pkg/lint/rules helm.sh/helm/v3/pkg/chartutil; do
    ldflags+=" -X $pkg.k8sVersionMajor=1 -X $pkg.k8sVersionMinor=$k8s_minor"
done

# Build into a scratch directory and rename it, so an interrupted build never
# leaves a bin directory that looks complete.
tmp=$root/bin.tmp
rm -rf "$tmp" "$bin"
mkdir -p "$tmp"
start=$SECONDS
echo "build.sh: building helm $helm_version" >&2
# -p 2: this is sized for 2-core machines; more only adds memory pressure.
go build -p 2 -trimpath -ldflags "$ldflags" -o "$tmp/helm" helm.sh/helm/v3/cmd/helm
mv "$tmp" "$bin"
echo "build.sh: helm $helm_version built in $((SECONDS - start)) s into $bin" >&2
echo "$bin"
