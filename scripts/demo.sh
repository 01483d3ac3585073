#!/usr/bin/env bash
# The main job on a local default: start the Go demo service (a payment flow
# with known latencies: ProcessPayment sleeps 20 ms and calls chargeCard,
# which sleeps 5 ms, when ValidateCard accepts the card), trace it with
# `retwatch trace` for a few seconds, and show the table and histograms.
# Usage: demo.sh RETWATCH DEMO-BINARY [SECONDS]
set -euo pipefail

retwatch=${1:?usage: demo.sh RETWATCH DEMO-BINARY [SECONDS]}
demo=${2:?usage: demo.sh RETWATCH DEMO-BINARY [SECONDS]}
seconds=${3:-5}

if [[ $(id -u) != 0 ]]; then
	echo "demo.sh: tracing needs root (BPF and uprobes): run it as root" >&2
	exit 1
fi
"$demo" >/dev/null &
pid=$!
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true' EXIT
echo "demo service running as PID $pid; tracing it for $seconds seconds"
"$retwatch" trace --pid "$pid" --duration "$seconds" --threshold 26ms \
	main.ProcessPayment main.ValidateCard main.CalculateTotal main.chargeCard
