#!/usr/bin/env bash
# Benchmarks of retwatch-agent end to end, against the parts its tests use
# (tests/agent): a real kube-apiserver and etcd, runc pods running podapp,
# real uprobes. Prints the figures and each goal's outcome (see
# bench/agent/bench.py); exits 0 once it ran, whatever the figures.
#
# Usage: bash bench/agent_bench.sh     (as root, after make)
# Env:   RETWATCH_AGENT  the agent binary (default build/retwatch-agent)
#        RUNS            kubectl apply -> status runs (default 20)
#        STARTS          container starts under a live probe (default 10)
#        STEADY_S        seconds between the two stats lines of a steady-state
#                        measure (default 60)
# Takes about 4 minutes with the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."

if ((EUID != 0)); then
	echo "agent_bench: run as root (uprobes, runc, cgroups)" >&2
	exit 1
fi
# no __pycache__ in bench/agent or tests/agent
PYTHONDONTWRITEBYTECODE=1 exec python3 bench/agent/bench.py
