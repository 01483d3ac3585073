#!/usr/bin/env bash
# One probe's results at cluster scale against the real kube-apiserver and
# etcd (tests/k8s): bench/scale_bench.py in the layout before
# FunctionProbeReports (every node's entry in the probe's status) at a few
# dozen nodes, where it breaks, then in today's layout at 10, 1,000 and
# 5,000 nodes (or the counts given). Prints figures; asserts nothing. Takes
# several minutes and most of the machine: run it alone.
#
# Usage: bash bench/scale_bench.sh [NODES...]     (after make)
set -euo pipefail
cd "$(dirname "$0")/.."

if [[ ! -f build/libretwatch-agent.a || ! -x build/retwatch-agent ]]; then
	echo "scale_bench: build/libretwatch-agent.a or build/retwatch-agent not found (run make first)" >&2
	exit 1
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
link=$(make -s --no-print-directory link-flags)
# shellcheck disable=SC2086
gcc -O2 -D_GNU_SOURCE -Isrc -Ibench -o "$work/scale_writer" bench/scale_writer.c \
	$link -lm -lpthread
python3 bench/scale_bench.py "$work/scale_writer" build/retwatch-agent legacy 10 36 40
python3 bench/scale_bench.py "$work/scale_writer" build/retwatch-agent report ${@:-10 1000 5000}
