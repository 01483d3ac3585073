#!/usr/bin/env bash
# Slow-call stacks of native code. Prints figures; asserts nothing.
#
# 1. Userspace: the time to unwind and symbolize one event
#    (bench/unwind_bench.c against the layers' archives in build/), cold and warm.
# 2. BPF: rw_ret's run time per hit on a C program built with
#    -fomit-frame-pointer (tests/fixtures/c/deepstack.c, 2 ms calls), with
#    no threshold (no slow calls) and with every call a slow call (the stack
#    copy and the event), kernel.bpf_stats_enabled=1 for the runs (restored).
#
# Usage: bash bench/unwind_bench.sh     (as root, after make)
# Env:   CALLS     calls of the C program per run of part 2 (default 300)
#        RETWATCH  the retwatch binary (default build/retwatch)
set -euo pipefail
cd "$(dirname "$0")/.."

calls=${CALLS:-300}
retwatch=${RETWATCH:-build/retwatch}
if [[ ! -x $retwatch || ! -f build/libretwatch-agent.a ]]; then
	echo "unwind_bench: $retwatch or build/libretwatch-agent.a not found (run make first)" >&2
	exit 1
fi
work=$(mktemp -d)
stats_old=$(cat /proc/sys/kernel/bpf_stats_enabled)
target_pid='' rw_pid=''
cleanup() {
	set +e
	for p in $rw_pid $target_pid; do
		kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	echo "$stats_old" >/proc/sys/kernel/bpf_stats_enabled
	rm -rf "$work"
}
trap cleanup EXIT

link=$(make -s --no-print-directory link-flags)
echo "== 1. unwind and symbolize one event (userspace)"
# shellcheck disable=SC2086
gcc -O2 -fomit-frame-pointer -Isrc -Ibuild/bpf -o "$work/unwind_bench" bench/unwind_bench.c \
	$link -lpthread
"$work/unwind_bench"

echo "== 2. rw_ret per hit on native code, without and with slow calls"
gcc -O2 -fomit-frame-pointer -g -o "$work/deepstack" tests/fixtures/c/deepstack.c
# "run_time_ns run_cnt" of the rw_ret program process $1 holds (its fdinfo's prog ids)
ret_stats() {
	local ids
	ids=$(grep -h '^prog_id:' /proc/"$1"/fdinfo/* 2>/dev/null | awk '{ print $2 }' | sort -u | paste -sd,)
	bpftool -j prog show | python3 -c '
import json, sys
ids = {int(i) for i in sys.argv[1].split(",") if i}
ps = [p for p in json.load(sys.stdin) if p["id"] in ids and p.get("name") == "rw_ret"]
print(*((ps[0].get("run_time_ns", 0), ps[0].get("run_cnt", 0)) if ps else (0, 0)))' "$ids"
}
echo 1 >/proc/sys/kernel/bpf_stats_enabled
for mode in none slow; do
	opts=()
	[[ $mode == slow ]] && opts=(--threshold 1ns --slow-calls-per-second 0)
	mkfifo "$work/in.$mode"
	"$work/deepstack" "$calls" <"$work/in.$mode" >"$work/out.$mode" &
	target_pid=$!
	exec 3>"$work/in.$mode"
	sleep 0.2
	"$retwatch" trace --pid "$target_pid" "${opts[@]}" slow_leaf >"$work/rw.$mode" 2>&1 3>&- &
	rw_pid=$!
	for _ in $(seq 100); do
		grep -q "retwatch: tracing" "$work/rw.$mode" && break
		sleep 0.1
	done
	# retwatch's own calibration hits rw_ret too: count from here
	read -r ns0 cnt0 < <(ret_stats "$rw_pid")
	echo go >&3
	# it waits for the end of its stdin after its calls: read the stats first
	while kill -0 "$target_pid" 2>/dev/null && [[ $(wc -l <"$work/out.$mode") -lt 2 ]]; do
		sleep 0.1
	done
	read -r ns cnt < <(ret_stats "$rw_pid")
	exec 3>&-
	wait "$target_pid" || true
	target_pid=''
	wait "$rw_pid" || true
	rw_pid=''
	slow=$(grep -c "^slow call" "$work/rw.$mode" || true)
	awk -v m="$mode" -v ns="$((ns - ns0))" -v c="$((cnt - cnt0))" -v s="$slow" 'BEGIN {
		printf "    %-5s rw_ret run_cnt %6d  %8.1f ns per hit  (slow calls printed: %d)\n",
		       m, c, c ? ns / c : 0, s }'
done
