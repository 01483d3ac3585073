#!/usr/bin/env bash
# retwatch-agent against issue 16's hostile cases (a FIFO as the executable,
# crafted ELF files, greedy and deep podapp pods, a slow-call flood), one
# agent for all: per case, the time to the attach and to the status error,
# the main loop's longest stall (gaps between /healthz and /metrics answers),
# the agent's peak and final RSS, and whether a probe of another namespace
# kept reporting. See bench/agent/hostile.py.
#
# Usage: bash bench/hostile_bench.sh     (as root, after make)
# Env:   RETWATCH_AGENT    the agent binary (default build/retwatch-agent)
#        HOSTILE_CASES     which cases ("1 2a 5b", default all)
#        HOSTILE_INFLIGHT  the agent's --max-inflight-per-namespace (default 1024)
#        HOLD_S            seconds a running case is watched after its attach (10)
#        AGENT_ARGS        more agent options
# Takes about 4 minutes with the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."

if ((EUID != 0)); then
	echo "hostile_bench: run as root (uprobes, runc, cgroups)" >&2
	exit 1
fi
PYTHONDONTWRITEBYTECODE=1 exec python3 bench/agent/hostile.py
