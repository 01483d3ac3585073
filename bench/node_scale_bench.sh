#!/usr/bin/env bash
# One retwatch-agent against P podapp pods x F functions on its node (one
# FunctionProbe, maxOverhead 0), against the parts its tests use (a real
# kube-apiserver and etcd, runc pods, real uprobes): per case, apply -> first
# calls and -> all P pods in the node's report, the BPF links, open files,
# RSS and BPF memory the agent holds, the longest /healthz gap, probe delete
# -> its links closed, and SIGTERM -> the agent gone (D state noted). See
# bench/agent/node_scale.py.
#
# Usage: bash bench/node_scale_bench.sh     (as root, after make)
# Env:   RETWATCH_AGENT  the agent binary (default build/retwatch-agent)
#        PODS            pod counts (default "10 40 100")
#        FUNCS           function counts, 1 to 64 (default "8 64")
#        CASE_TIMEOUT    seconds a case may take from its apply to its SIGTERM
#                        (default 900)
#        REPORT_TIMEOUT  seconds all P pods are waited for in the report (300;
#                        a report too large to write never holds them)
#        TERM_TIMEOUT    seconds after SIGTERM before SIGKILL (default 600)
#        HOLD_S          seconds after all pods have calls before the figures (5)
#        POD_ARGS        podapp's arguments (default "-workers 1 -latency 0
#                        -lookup 0 -gap 250ms -report 5s")
#        AGENT_ARGS      more agent options
# Each case takes from under a minute (10 pods) to many (100 pods, 64
# functions); starting 100 pods takes a few minutes. Run it alone.
set -euo pipefail
cd "$(dirname "$0")/.."

if ((EUID != 0)); then
	echo "node_scale_bench: run as root (uprobes, runc, cgroups)" >&2
	exit 1
fi
PYTHONDONTWRITEBYTECODE=1 exec python3 bench/agent/node_scale.py
