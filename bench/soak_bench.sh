#!/usr/bin/env bash
# The agent under a soak of pod and probe churn in the single-node cluster of
# tests/cluster (bench/soak_bench.py says what it samples). Prints figures;
# asserts nothing. Not part of make test.
#
# Usage: bash bench/soak_bench.sh      (as root, after make)
# Env:   MINUTES (60), PODS (20), PROBES (5)
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ $(id -u) != 0 ]]; then
	echo "soak_bench: needs root (a cluster of real parts, BPF)" >&2
	exit 1
fi
exec python3 bench/soak_bench.py "$@"
