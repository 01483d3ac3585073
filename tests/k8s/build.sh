#!/usr/bin/env bash
# Builds the real Kubernetes control plane used by the agent's tests:
# kube-apiserver, kubectl, etcd and etcdctl, from the Go modules pinned in this
# directory's go.mod/go.sum (k8s.io/kubernetes plus its staging modules at
# their published v0.X.Y, and etcd's server and etcdctl).
#
# The binaries go to ${RETWATCH_CACHE:-$HOME/.cache/retwatch}/k8s/<key>/bin,
# where <key> is a hash of this directory's module files and this script, so a
# change to any of them builds afresh while an unchanged tree reuses the cache.
# A cold build takes several minutes; a warm one returns at once.
# Prints the bin directory as the last line of stdout; progress goes to stderr.
#
# Another release: set k8s.io/kubernetes's version in go.mod, every staging
# module's replace line to the matching v0.X.Y, etcd to the release that
# Kubernetes' own go.mod requires, then run `go mod tidy`.
# Usage: build.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"
# This module stands alone; pure Go binaries run on any Linux of the arch.
export GOWORK=off CGO_ENABLED=0

key=$(cat go.mod go.sum build.sh | sha256sum | cut -c1-12)
root=${RETWATCH_CACHE:-$HOME/.cache/retwatch}/k8s/$key
bin=$root/bin
binaries=(kube-apiserver kubectl etcd etcdctl)

have_all() {
    local b
    for b in "${binaries[@]}"; do [[ -x $bin/$b ]] || return 1; done
}

if have_all; then
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
if have_all; then
    echo "$bin"
    exit 0
fi

# Kubernetes reads its own version from variables its release scripts set with
# -X; without them the server reports v0.0.0-master and kubectl warns of skew.
# kubectl reads component-base's copy, client-go's user agent its own. The
# module proxy does not know the release's git commit: leave it empty rather
# than the source's "$Format:%H$" placeholder.
k8s_version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
k8s_date=$(go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}
ldflags="-s -w"  # no symbol tables, as in release builds: smaller binaries
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ldflags+=" -X $pkg.gitVersion=$k8s_version -X $pkg.gitMajor=$major"
    ldflags+=" -X $pkg.gitMinor=$minor -X $pkg.gitCommit= -X $pkg.gitTreeState=clean"
    ldflags+=" -X $pkg.buildDate=$k8s_date"
done

# Build into a scratch directory and rename it, so an interrupted build never
# leaves a bin directory that looks complete.
tmp=$root/bin.tmp
rm -rf "$tmp" "$bin"
mkdir -p "$tmp"
# -p 2: this is sized for 2-core machines; more only adds memory pressure.
build() {
    local out=$1 pkg=$2
    echo "build.sh: building $out ($pkg)" >&2
    go build -p 2 -trimpath -ldflags "$ldflags" -o "$tmp/$out" "$pkg"
}
start=$SECONDS
build kube-apiserver k8s.io/kubernetes/cmd/kube-apiserver
build kubectl k8s.io/kubernetes/cmd/kubectl
build etcd go.etcd.io/etcd/server/v3
build etcdctl go.etcd.io/etcd/etcdctl/v3
mv "$tmp" "$bin"
echo "build.sh: Kubernetes $k8s_version built in $((SECONDS - start)) s into $bin" >&2
echo "$bin"
