#!/usr/bin/env bash
# What the check before attaching costs (bench/vouch_bench.c): every function
# of a file held against its own code as the tracer attaches it, and a debug
# file's functions as when it is found. Prints figures; asserts nothing.
#
# Files: the harm fixture with its forged debug file, the machine's libc (and
# its debug file under /usr/lib/debug, if libc6-dbg is installed), and
# kube-apiserver from the tests' Kubernetes build when it is cached (else
# the Go demo fixture).
#
# Usage: bash bench/vouch_bench.sh     (after make and make fixtures)
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ! -f build/libretwatch-agent.a ]]; then
	echo "vouch_bench: build/libretwatch-agent.a not found (run make first)" >&2
	exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
link=$(make -s --no-print-directory link-flags)
# shellcheck disable=SC2086
gcc -O2 -Isrc -Ibuild/bpf -o "$work/vouch_bench" bench/vouch_bench.c $link -lpthread

fixtures=${RETWATCH_FIXTURES:-build/fixtures}
echo "== the harm fixture, and its forged debug file"
"$work/vouch_bench" "$fixtures/c/harm/harmfix" "$fixtures/c/harm/harmfix.forged.debug"

libc=$(ldconfig -p | awk '/libc\.so\.6 .*x86-64/ {print $NF; exit}')
id=$(readelf -n "$libc" | awk '/Build ID/ {print $3}')
dbg=/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
echo "== $libc"
"$work/vouch_bench" "$libc" "$([[ -f $dbg ]] && echo "$dbg" || echo -)"

apiserver=$(find "${RETWATCH_CACHE:-$HOME/.cache/retwatch}" -name kube-apiserver -type f 2>/dev/null | head -1)
go=${apiserver:-$(ls "$fixtures"/go/go1.26*/default/demo | head -1)}
echo "== $go"
"$work/vouch_bench" "$go" -
