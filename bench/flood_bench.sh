#!/usr/bin/env bash
# retwatch-agent under a slow-call flood (spec.slowThreshold 1ns on a function
# podapp calls as fast as it can), against the parts its tests use: the main
# loop's stall (gaps between /healthz and /metrics answers), the slow calls
# logged and dropped, CPU and memory. See bench/agent/flood.py.
#
# Usage: bash bench/flood_bench.sh     (as root, after make)
# Env:   RETWATCH_AGENT  the agent binary (default build/retwatch-agent)
#        FLOOD_SECONDS   how long the flood is measured (default 20)
#        WORKERS         podapp goroutines calling the function (default 2)
#        AGENT_ARGS      more agent options ("--slow-calls-per-second 0": no limit)
set -euo pipefail
cd "$(dirname "$0")/.."

if ((EUID != 0)); then
	echo "flood_bench: run as root (uprobes, runc, cgroups)" >&2
	exit 1
fi
PYTHONDONTWRITEBYTECODE=1 exec python3 bench/agent/flood.py
