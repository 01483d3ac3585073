#!/usr/bin/env bash
# retwatch-agent probing big executables (kubectl, kube-apiserver): time to
# attach or to the error, the main loop's longest stall, the agent's peak
# RSS. See bench/agent/bigbinary.py.
#
# Usage: bash bench/analysis_bench.sh     (as root, after make)
# Env:   RETWATCH_AGENT  the agent binary (default build/retwatch-agent)
#        AGENT_ARGS      more agent options ("--analysis-timeout 200ms")
set -euo pipefail
cd "$(dirname "$0")/.."

if ((EUID != 0)); then
	echo "analysis_bench: run as root (uprobes, runc, cgroups)" >&2
	exit 1
fi
PYTHONDONTWRITEBYTECODE=1 exec python3 bench/agent/bigbinary.py
