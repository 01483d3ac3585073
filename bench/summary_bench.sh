#!/usr/bin/env bash
# Builds bench/summary_bench.c against the layers' archives in build/ and runs it at
# 10, 1,000 and 5,000 nodes (or the counts given). Prints figures; asserts
# nothing.
#
# Usage: bash bench/summary_bench.sh [NODES...]     (after make)
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ! -f build/libretwatch-agent.a ]]; then
	echo "summary_bench: build/libretwatch-agent.a not found (run make first)" >&2
	exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
link=$(make -s --no-print-directory link-flags)
# shellcheck disable=SC2086
gcc -O2 -Isrc -o "$work/summary_bench" bench/summary_bench.c $link -lm -lpthread
for n in "${@:-10 1000 5000}"; do
	for k in $n; do
		"$work/summary_bench" "$k"
	done
done
