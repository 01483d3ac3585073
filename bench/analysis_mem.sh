#!/usr/bin/env bash
# What an executable's analysis holds, as the agent's analysis cache counts it
# (--analysis-cache-bytes), beside the heap it takes (bench/analysis_mem.c):
# kube-apiserver and kubectl from the tests' Kubernetes build when cached, the
# machine's libc (with its debug file when libc6-dbg is installed), PostgreSQL
# when scripts/deps.sh fetched it, and retwatch itself. Prints figures;
# asserts nothing.
#
# Usage: bash bench/analysis_mem.sh     (after make)
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ! -f build/libretwatch-agent.a ]]; then
	echo "analysis_mem: build/libretwatch-agent.a not found (run make first)" >&2
	exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
link=$(make -s --no-print-directory link-flags)
# shellcheck disable=SC2086
gcc -O2 -Isrc -Ibuild/bpf -o "$work/analysis_mem" bench/analysis_mem.c $link -lpthread

cache=${RETWATCH_CACHE:-$HOME/.cache/retwatch}
files=()
for f in "$cache"/k8s/*/bin/kube-apiserver "$cache"/k8s/*/bin/kubectl \
	"$(ldconfig -p | awk '/libc\.so\.6 .*x86-64/ {print $NF; exit}')" \
	"$cache/debs/postgresql/usr/lib/postgresql/15/bin/postgres" build/retwatch; do
	[[ -f $f ]] && files+=("$f")
done
"$work/analysis_mem" "${files[@]}"
