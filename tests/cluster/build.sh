#!/usr/bin/env bash
# Builds the binaries of the single-node cluster that tests/cluster runs:
# kubelet, kube-controller-manager and kube-scheduler from this directory's
# go.mod/go.sum (k8s.io/kubernetes at the release of tests/k8s, with its
# staging modules at their published v0.X.Y), next to links to the
# kube-apiserver, kubectl, etcd and etcdctl that tests/k8s/build.sh builds.
#
# The binaries go to ${RETWATCH_CACHE:-$HOME/.cache/retwatch}/cluster/<key>/bin,
# where <key> is a hash of this directory's module files, this script and
# tests/k8s's key, so a change to any of them builds afresh while an unchanged
# tree reuses the cache. A cold build takes several minutes (tests/k8s's own
# build not counted); a warm one returns at once.
# Prints the bin directory as the last line of stdout; progress goes to stderr.
#
# Another release: keep k8s.io/kubernetes and the replace lines equal to
# tests/k8s/go.mod's, then run `go mod tidy`.
# Usage: build.sh
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cd "$here"
# This module stands alone; pure Go binaries run on any Linux of the arch.
export GOWORK=off CGO_ENABLED=0

k8s_bin=$(bash "$here/../k8s/build.sh" | tail -n 1)
key=$(cat go.mod go.sum build.sh | cat - <(echo "$k8s_bin") | sha256sum | cut -c1-12)
root=${RETWATCH_CACHE:-$HOME/.cache/retwatch}/cluster/$key
bin=$root/bin
binaries=(kubelet kube-controller-manager kube-scheduler)
linked=(kube-apiserver kubectl etcd etcdctl)

have_all() {
    local b
    for b in "${binaries[@]}" "${linked[@]}"; do [[ -x $bin/$b ]] || return 1; done
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

# The version variables Kubernetes' release scripts set with -X (see
# tests/k8s/build.sh): the kubelet reports its version in its Node object, and
# the API server refuses nothing on it, but kubectl's skew warning reads it.
k8s_version=$(go list -m -f '{{.Version}}' k8s.io/kubernetes)
k8s_date=$(go list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' k8s.io/kubernetes)
major=${k8s_version#v}; major=${major%%.*}
minor=${k8s_version#v*.}; minor=${minor%%.*}
ldflags="-s -w"
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
build() {
    local out=$1 pkg=$2
    echo "build.sh: building $out ($pkg)" >&2
    # -p 2: sized for 2-core machines; more only adds memory pressure.
    go build -p 2 -trimpath -ldflags "$ldflags" -o "$tmp/$out" "$pkg"
}
start=$SECONDS
build kubelet k8s.io/kubernetes/cmd/kubelet
build kube-controller-manager k8s.io/kubernetes/cmd/kube-controller-manager
build kube-scheduler k8s.io/kubernetes/cmd/kube-scheduler
for b in "${linked[@]}"; do ln -s "$k8s_bin/$b" "$tmp/$b"; done
mv "$tmp" "$bin"
echo "build.sh: Kubernetes $k8s_version node binaries built in $((SECONDS - start)) s into $bin" >&2
echo "$bin"
