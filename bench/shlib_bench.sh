#!/usr/bin/env bash
# Attach time for functions of shared libraries in one running process
# (bench/shlib_bench.c): NFUNCS functions of libc.so.6 in a `sleep`, and of
# libcrypto.so.3 in Debian's python3 with its ssl module loaded, with
# uprobe_multi links and with one perf-event uprobe per offset. Cold: the
# library's analysis included; warm: from the analysis cache. Prints
# figures; asserts nothing.
#
# Usage: bash bench/shlib_bench.sh     (as root, after make)
# Env:   NFUNCS       functions per library (default 100)
#        ROUNDS       rounds with uprobe_multi, medians printed (default 3)
#        PERF_ROUNDS  rounds with perf_event uprobes, whose detach takes
#                     many seconds (default 1)
set -euo pipefail
cd "$(dirname "$0")/.."

nfuncs=${NFUNCS:-100}
rounds=${ROUNDS:-3}
perf_rounds=${PERF_ROUNDS:-1}
if [[ ! -f build/libretwatch-agent.a ]]; then
	echo "shlib_bench: build/libretwatch-agent.a not found (run make first)" >&2
	exit 1
fi
work=$(mktemp -d)
pids=()
cleanup() {
	for p in "${pids[@]}"; do
		kill "$p" 2>/dev/null || true
		wait "$p" 2>/dev/null || true
	done
	rm -rf "$work"
}
trap cleanup EXIT
link=$(make -s --no-print-directory link-flags)
# shellcheck disable=SC2086
gcc -O2 -g -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -Isrc -Ibuild/bpf \
	-o "$work/shlib_bench" bench/shlib_bench.c $link -lm -lpthread

sleep 1000 &
pids+=($!)
targets=("$! libc.so.6")
if [[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c 'import ssl' 2>/dev/null; then
	/usr/bin/python3 -c 'import ssl, time; time.sleep(1000)' &
	pids+=($!)
	targets+=("$! libcrypto.so.3")
fi
sleep 0.5
echo "kernel $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for t in "${targets[@]}"; do
	read -r pid lib <<<"$t"
	for mode in uprobe_multi perf_event; do
		echo "== $lib in process $pid ($(tr '\0' ' ' </proc/"$pid"/cmdline | cut -c1-40)), $mode"
		n=$rounds
		[[ $mode == perf_event ]] && n=$perf_rounds
		"$work/shlib_bench" "$pid" "$lib" "$nfuncs" "$n" "$mode" || echo "(failed)"
	done
done
