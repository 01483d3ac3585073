#!/usr/bin/env bash
# Benchmarks of the tracing engine. Prints figures; asserts nothing.
#
# 1. Cost of a traced call against the floor: a Go workload calls a small
#    function (two RETs) CALLS times a round, with no probes (bare), with an
#    empty BPF program at its first byte and its RETs (floor), under
#    `retwatch trace` (ours: the entry probe at the site the analysis chose)
#    and under `retwatch trace --entry-at-start` (first: at the first byte),
#    ROUNDS rounds of each, interleaved. Prints median ns per call, the
#    overheads and their ratios, and checks retwatch's JSON call counts
#    against the calls made. FUNC=main.theFramed times a function with Go's
#    stack check, whose entry probe goes past it to its PUSH; FUNC=the_framed
#    a C function built for CET (bench/workload.c: endbr64, then a PUSH where
#    its probe goes), FUNC=the_subframe one that makes its frame with SUB RSP
#    (endbr64, sub, stores, then the branch where its probe goes); the
#    default, main.theFunc, is a Go leaf whose probe goes on its first branch.
# 2. BPF run time per hit (kernel.bpf_stats_enabled=1 for ROUNDS more
#    rounds, so stats do not slow part 1): run_time_ns / run_cnt of the
#    empty program, the clock program (cookie, pid and clock only) and
#    rw_entry and rw_ret, each attached alone to a fresh workload for a
#    round, the three interleaved. Alone, because programs attached together
#    run one after another on each hit, and those after the first find the
#    clock's and the uprobe's paths warm: the clock program after retwatch's
#    measured 2.0-2.6x the empty program (also warm), alone 2.0-2.4x the
#    empty program alone, and retwatch's programs pay that first, cold run
#    in either case. Counted over the round alone (retwatch's start-up
#    calibration runs its programs on a C function of its own first).
# 3. Attach time at NFUNCS functions of the Go compiler with all their RETs:
#    uprobe_multi against one perf-event uprobe per offset.
# After each part, checks that no uprobe link or program of ours is left.
#
# Usage: bash bench/trace_bench.sh     (as root, after make)
# Env:   CALLS        calls per round (default 200000)
#        ROUNDS       rounds of each kind in part 1, and of part 2 (default 3)
#        NFUNCS       functions in part 3 (default 1000)
#        FUNC         the workload's function in parts 1 and 2: main.theFunc
#                     (default), main.theFramed, or the_framed or the_subframe
#                     (the C workload)
#        PERF_BUDGET  seconds the per-offset attach+detach in part 3 may take
#                     before a subset is timed and extrapolated (default 100)
#        RETWATCH     the retwatch binary (default build/retwatch)
#        PARTS        which parts to run (default 123; e.g. 2 for the BPF
#                     cost alone)
#        TRACE_OPTS   more options of retwatch trace in parts 1 and 2, e.g.
#                     "--threshold 1ns" (every call a slow call) with
#                     "--slow-calls-per-second 0" (every one sent) or N
set -euo pipefail
cd "$(dirname "$0")/.."

calls=${CALLS:-200000}
rounds=${ROUNDS:-3}
nfuncs=${NFUNCS:-1000}
perf_budget=${PERF_BUDGET:-100}
parts=${PARTS:-123}
read -r -a trace_opts <<<"${TRACE_OPTS:-}"
retwatch=${RETWATCH:-build/retwatch}
out=build/bench
func=${FUNC:-main.theFunc}
bench_start=$(date +%s)

if [[ ! -x $retwatch || ! -f build/libretwatch-agent.a ]]; then
	echo "trace_bench: $retwatch or build/libretwatch-agent.a not found (run make first)" >&2
	exit 1
fi
if ((EUID != 0)); then
	echo "trace_bench: needs root (BPF, uprobes, kernel.bpf_stats_enabled)" >&2
	exit 1
fi

work=$(mktemp -d)
: >"$work/ours"
stats_old=$(cat /proc/sys/kernel/bpf_stats_enabled)
wl_pid='' floor_pid='' clock_pid='' rw_pid='' attach_pid='' last_ids=''

# Ends what this script started (by PID only) and restores the stats sysctl.
cleanup() {
	local p
	set +e
	for p in "$rw_pid" "$floor_pid" "$clock_pid" "$attach_pid"; do
		[[ -n $p ]] && kill -INT "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	[[ -n $wl_pid ]] && kill "$wl_pid" 2>/dev/null && wait "$wl_pid" 2>/dev/null
	echo "$stats_old" >/proc/sys/kernel/bpf_stats_enabled
	rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# ---- build ----------------------------------------------------------------

mkdir -p "$out"
cflags=(-O2 -g -std=gnu11 -Wall -Wextra -Werror -D_GNU_SOURCE -Isrc -Ibuild/bpf -Ibench)
read -ra link <<<"$(make -s --no-print-directory link-flags)"
gcc "${cflags[@]}" bench/floor.c bench/emptyprog.c "${link[@]}" -o "$out/floor"
gcc "${cflags[@]}" bench/attach_time.c bench/emptyprog.c "${link[@]}" \
	-o "$out/attach_time"
(cd bench/workload && GOFLAGS=-buildvcs=false go build -o ../../"$out"/workload .)
gcc -O2 -fcf-protection=full -Wall -Wextra -Werror bench/workload.c -o "$out/workload_c"
workload=$out/workload
[[ $func == main.* ]] || workload=$out/workload_c
go build -o "$out/compile" cmd/compile

echo "kernel $(uname -r), $(nproc) CPUs, $(go version | cut -d' ' -f3), retwatch: $retwatch" \
	"${trace_opts[*]}"

# ---- helpers --------------------------------------------------------------

# waitfor FILE REGEX PID: until FILE has a line matching REGEX; fails if PID exits first.
waitfor() {
	local i
	for ((i = 0; i < 600; i++)); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		kill -0 "$3" 2>/dev/null || break
		sleep 0.1
	done
	echo "trace_bench: gave up waiting for '$2'; $1 says:" >&2
	sed 's/^/    /' "$1" >&2
	return 1
}

# One measured round of the workload; sets round_ns.
round() {
	local word n
	echo go >&"${WL[1]}"
	read -r -t 900 word n round_ns <&"${WL[0]}"
	[[ $word == round && $n == "$calls" ]] || {
		echo "trace_bench: workload said '$word $n $round_ns'" >&2
		return 1
	}
}

start_floor() {
	: >"$work/floor.err" # waitfor must not find the previous round's line
	"$out/floor" "$wl_pid" "$func" 2>"$work/floor.err" &
	floor_pid=$!
	waitfor "$work/floor.err" '^floor: attached' "$floor_pid"
	remember "$floor_pid"
}

stop_floor() {
	kill -INT "$floor_pid"
	wait "$floor_pid" || {
		echo "trace_bench: floor exited with status $?:" >&2
		cat "$work/floor.err" >&2
		return 1
	}
	floor_pid=''
	released
}

# start_ours [OPTION...]: retwatch trace on the workload, with more options.
start_ours() {
	: >"$work/rw.err" # waitfor must not find the previous round's line
	# --max-overhead 0: the guard would detach theFunc (every call traced, by design)
	RETWATCH_DEBUG=1 "$retwatch" trace --pid "$wl_pid" --json --max-overhead 0 \
		"${trace_opts[@]}" "$@" "$func" \
		>"$work/rw.json" 2>"$work/rw.err" &
	rw_pid=$!
	waitfor "$work/rw.err" '^retwatch: tracing' "$rw_pid"
	remember "$rw_pid"
}

# Stops retwatch; sets rw_calls from its JSON and prints its counters if the count is off.
stop_ours() {
	kill -INT "$rw_pid"
	wait "$rw_pid" || {
		echo "trace_bench: retwatch exited with status $?:" >&2
		cat "$work/rw.err" >&2
		return 1
	}
	rw_pid=''
	released
	rw_calls=$(python3 -c '
import json, sys
fs = [f for f in json.load(open(sys.argv[1]))["functions"] if f["name"] == sys.argv[2]]
print(fs[0]["calls"] if fs else "missing")' "$work/rw.json" "$func")
	if [[ $rw_calls != "$calls" ]]; then
		echo "    retwatch counted $rw_calls calls, $calls were made; its counters:"
		grep -E 'stat .* [1-9]' "$work/rw.err" | sed 's/^retwatch: stat /      /' || true
		grep -o '"orphans":[0-9]*' "$work/rw.json" | sed 's/^/      /' || true
	fi
}

# BPF program ids a process holds (its program and link descriptors).
prog_ids() {
	grep -h '^prog_id:' /proc/"$1"/fdinfo/* 2>/dev/null | awk '{ print $2 }' | sort -u | paste -sd,
}

# prog_stats PID NAME...: "name run_cnt run_time_ns" for each program NAME that PID holds.
prog_stats() {
	local pid=$1
	shift
	bpftool -j prog show | python3 -c '
import json, sys
ids = {int(i) for i in sys.argv[1].split(",") if i}
for p in json.load(sys.stdin):
    if p["id"] in ids and p.get("name") in sys.argv[2:]:
        print(p["name"], p.get("run_cnt", 0), p.get("run_time_ns", 0))' "$(prog_ids "$pid")" "$@"
}

# Records the BPF programs PID holds as ours, for check_clean, and as the
# last started's, for released.
remember() {
	last_ids=$(prog_ids "$1")
	tr , '\n' <<<"$last_ids" >>"$work/ours"
}

# Waits (up to 10 s) until the programs of the last process started are
# unloaded: a closed uprobe link is released after an RCU grace period, and
# until then its breakpoints stay in the workload, slowing the next round.
released() {
	local i
	for ((i = 0; i < 100; i++)); do
		bpftool -j prog show | python3 -c '
import json, sys
ids = {int(i) for i in sys.argv[1].split(",") if i}
sys.exit(any(p["id"] in ids for p in json.load(sys.stdin)))' "$last_ids" && return 0
		sleep 0.1
	done
	echo "trace_bench: programs $last_ids still loaded 10 s after their process ended" >&2
}

# Prints whether anything of ours is still loaded or attached: our programs
# (recorded by remember), links and perf-event uprobes using them. Other
# processes (tests running beside us) may hold uprobe links and rw_*
# programs of their own: those are counted apart, with their owners.
check_clean() {
	local label=$1 i state
	for ((i = 0; i < 30; i++)); do
		state=$({
			echo "---progs"
			bpftool -j prog show
			echo
			echo "---links"
			bpftool -j link show
			echo
			echo "---perf"
			bpftool perf show 2>/dev/null || true
		} | python3 -c '
import json, re, sys
ours = {int(l) for l in open(sys.argv[1]) if l.strip()}
parts = dict(re.findall(r"---(\w+)\n(.*?)(?=\n---|\Z)", sys.stdin.read(), re.S))
progs = json.loads(parts["progs"] or "[]")
links = json.loads(parts["links"] or "[]")
uprobe_links = [l for l in links if l.get("type") in ("uprobe_multi", 12, "perf_event", 7)]
perf = [l for l in parts["perf"].splitlines() if " uprobe " in l]
left = ["prog %d %s" % (p["id"], p.get("name")) for p in progs if p["id"] in ours]
left += ["link %d -> prog %s" % (l["id"], l.get("prog_id")) for l in links if l.get("prog_id") in ours]
left += [l.strip() for l in perf if int(re.search(r"prog_id (\d+)", l).group(1)) in ours]
others = [p for p in progs if p["id"] not in ours
          and p.get("name") in ("rw_entry", "rw_ret", "rwbench_empty")]
nother_links = sum(l.get("prog_id") not in ours for l in uprobe_links)
nother_perf = sum(int(re.search(r"prog_id (\d+)", l).group(1)) not in ours for l in perf)
print("LEFT " + "; ".join(left) if left else "CLEAN")
if others or nother_links or nother_perf:
    ids = {p["id"] for p in others} | {l.get("prog_id") for l in uprobe_links if l.get("prog_id") not in ours}
    print("%d uprobe links, %d perf-event uprobes and %d rw_entry/rw_ret/rwbench_empty programs\t%s"
          % (nother_links, nother_perf, len(others), ",".join(str(i) for i in sorted(ids))))
' "$work/ours")
		[[ $state == CLEAN* ]] && break
		sleep 0.2 # a closed program can outlive its process by an RCU grace period
	done
	if [[ $state == CLEAN* ]]; then
		echo "after $label: nothing of ours left (none of the $(sort -u "$work/ours" | wc -l)" \
			"programs this run loaded remains, no link or perf-event uprobe uses them)"
	else
		echo "after $label: LEFT ATTACHED: ${state#LEFT }" | head -n 1
	fi
	if [[ $state == *$'\n'* ]]; then
		local other
		other=$(tail -n 1 <<<"$state")
		echo "    not ours, present at the same time: ${other%%$'\t'*}$(owners "${other#*$'\t'}")"
	fi
}

# owners ID,...: ", held by PID (comm)" for each process holding one of these program ids.
owners() {
	local f p id seen=' '
	for f in /proc/[0-9]*/fdinfo/*; do
		id=$(awk '$1 == "prog_id:" { print $2 }' "$f" 2>/dev/null) || continue
		[[ -n $id && ,$1, == *",$id,"* ]] || continue
		p=${f#/proc/}
		p=${p%%/*}
		[[ $seen == *" $p "* ]] && continue
		seen+="$p "
		printf ', held by %s (%s)' "$p" "$(cat /proc/"$p"/comm 2>/dev/null)"
	done
}

median() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# ---- the workload of parts 1 and 2 ---------------------------------------

# A fresh workload process, warmed up: each measurement of part 1 has its
# own, because a process can keep another's breakpoints after its probes are
# gone (on 6.18 here, the floor's file-wide links left their int3s in the
# workload after they were closed and their programs unloaded: every later
# round paid the floor's traps, "bare" 14 us a call).
start_workload() {
	if [[ -n $wl_pid ]]; then
		kill "$wl_pid" 2>/dev/null
		wait "$wl_pid" 2>/dev/null || true
	fi
	coproc WL { exec "$workload" -n "$calls" -f "${func#main.}"; }
	read -r -t 60 word wl_pid <&"${WL[0]}"
	[[ $word == pid ]] || {
		echo "trace_bench: workload did not start" >&2
		exit 1
	}
	round # warm-up, not counted
}

if [[ $parts == *[12]* ]]; then
	"$retwatch" inspect "$workload" "$func" | awk '/returns|entry probe/ { print "   ", $0 }'
fi

# ---- part 1: overhead per traced call ------------------------------------

if [[ $parts == *1* ]]; then
	echo
	echo "== 1. overhead per traced call: $func, $calls calls a round, $rounds rounds each"
	bare=() floor=() ours=() first=()
	ours_total=0 first_total=0
	for ((r = 1; r <= rounds; r++)); do
		start_workload
		round
		bare+=("$round_ns")
		start_workload
		start_floor
		round
		floor+=("$round_ns")
		stop_floor
		start_workload
		start_ours
		round
		ours+=("$round_ns")
		stop_ours
		ours_total=$((ours_total + ${rw_calls/missing/0}))
		start_workload
		start_ours --entry-at-start
		round
		first+=("$round_ns")
		stop_ours
		first_total=$((first_total + ${rw_calls/missing/0}))
		printf '    round %d: bare %8s   floor %8s   ours %8s   first %8s ns/call   retwatch calls %s of %s\n' \
			"$r" "${bare[-1]}" "${floor[-1]}" "${ours[-1]}" "${first[-1]}" "$rw_calls" "$calls"
	done
	mb=$(median "${bare[@]}")
	mf=$(median "${floor[@]}")
	mo=$(median "${ours[@]}")
	ma=$(median "${first[@]}")
	min() {
		printf '%s\n' "$@" | sort -g | head -n 1
	}

	awk -v b="$mb" -v f="$mf" -v o="$mo" -v a="$ma" -v nb="$(min "${bare[@]}")" \
		-v nf="$(min "${floor[@]}")" -v no="$(min "${ours[@]}")" -v na="$(min "${first[@]}")" 'BEGIN {
		printf "    median ns/call:  bare %.1f   floor %.1f   ours %.1f   first %.1f   (min: %.1f, %.1f, %.1f, %.1f)\n", b, f, o, a, nb, nf, no, na
		printf "    overhead per call (probe - bare):  floor %.1f ns   ours %.1f ns   first %.1f ns\n", f - b, o - b, a - b
		printf "    against the floor'"'"'s overhead:  ours %.3f   first %.3f\n", (o - b) / (f - b), (a - b) / (f - b)
	}'
	echo "    retwatch JSON calls over its $rounds rounds: ours $ours_total, first $first_total" \
		"(calls made: $((calls * rounds)) each)"
	check_clean "part 1"
fi

# ---- part 2: BPF run time per hit ----------------------------------------

# Three programs on the same hits of the same rounds, so that what the
# machine's load does to one it does to the others (the ratios are paired):
# the empty program; the clock program (emptyprog.h: cookie, pid and clock,
# the least any program that times calls does); retwatch's.
start_clock() {
	: >"$work/clock.err"
	"$out/floor" --clock "$wl_pid" "$func" 2>"$work/clock.err" &
	clock_pid=$!
	waitfor "$work/clock.err" '^floor: attached' "$clock_pid"
	remember "$clock_pid"
}

stop_clock() {
	kill -INT "$clock_pid"
	wait "$clock_pid" || {
		echo "trace_bench: floor --clock exited with status $?:" >&2
		cat "$work/clock.err" >&2
		return 1
	}
	clock_pid=''
}

# "name run_cnt run_time_ns" of the programs of part 2 that are running.
all_stats() {
	[[ -z $floor_pid ]] || prog_stats "$floor_pid" rwbench_empty
	[[ -z $clock_pid ]] || prog_stats "$clock_pid" rwbench_clock
	[[ -z $rw_pid ]] || prog_stats "$rw_pid" rw_entry rw_ret
}

# measure_alone KIND: one round of a fresh workload with only KIND's
# programs attached (floor, clock or ours); appends its programs'
# "name run_cnt run_time_ns" over the round to $work/round.stats.
measure_alone() {
	start_workload
	"start_$1"
	# before the round: retwatch's start-up calibration ran its programs
	# on a function of its own; only the round's hits are counted
	all_stats >"$work/before.stats"
	round
	all_stats >"$work/after.stats"
	awk 'NR == FNR { cnt[$1] = $2; ns[$1] = $3; next }
		{ print $1, $2 - cnt[$1], $3 - ns[$1] }' "$work/before.stats" "$work/after.stats" \
		>>"$work/round.stats"
	"stop_$1"
}

if [[ $parts == *2* ]]; then
	echo
	echo "== 2. BPF run time per hit: the empty program, the clock program and retwatch's," \
		"each alone on a fresh workload, interleaved, $rounds rounds" \
		"(kernel.bpf_stats_enabled=1 meanwhile; was $stats_old)"
	echo 1 >/proc/sys/kernel/bpf_stats_enabled
	r_entry=() r_ret=() r_clock=() c_entry=() c_ret=()
	for ((r = 1; r <= rounds; r++)); do
		: >"$work/round.stats"
		measure_alone floor
		measure_alone clock
		measure_alone ours
		echo "    round $r: retwatch's round $round_ns ns/call; retwatch calls $rw_calls of $calls"
		awk -v calls="$calls" '
			{ cnt[$1] = $2; ns[$1] = $3 }
			END {
				split("rw_entry rw_ret rwbench_clock rwbench_empty", names, " ")
				for (i = 1; i <= 4; i++)
					per[names[i]] = cnt[names[i]] ? ns[names[i]] / cnt[names[i]] : 0
				e = per["rwbench_empty"]
				k = per["rwbench_clock"]
				for (i = 1; i <= 4; i++) {
					n = names[i]
					hits = (n == "rw_entry") ? "entries" : (n == "rw_ret") ? "RETs" : "entry + RET hits"
					printf "      %-14s run_cnt %8d  run_time_ns %11d  %7.1f ns per hit  %5.2fx empty  %5.2fx clock  (expected %s: %d)\n", \
						n, cnt[n], ns[n], per[n], (e > 0) ? per[n] / e : 0, (k > 0) ? per[n] / k : 0, hits, \
						(n ~ /^rw_/) ? calls : 2 * calls
				}
				printf "ratios %.3f %.3f %.3f %.3f %.3f\n", (e > 0) ? per["rw_entry"] / e : 0, (e > 0) ? per["rw_ret"] / e : 0, \
					(e > 0) ? k / e : 0, (k > 0) ? per["rw_entry"] / k : 0, (k > 0) ? per["rw_ret"] / k : 0
			}' "$work/round.stats" >"$work/part2"
		grep -v '^ratios ' "$work/part2"
		read -r _ x1 x2 x3 x4 x5 < <(grep '^ratios ' "$work/part2")
		r_entry+=("$x1") r_ret+=("$x2") r_clock+=("$x3") c_entry+=("$x4") c_ret+=("$x5")
	done
	echo "$stats_old" >/proc/sys/kernel/bpf_stats_enabled
	echo "    median over $rounds rounds, against the empty program: rw_entry $(median "${r_entry[@]}")x," \
		"rw_ret $(median "${r_ret[@]}")x, the clock program $(median "${r_clock[@]}")x"
	echo "    against the clock program: rw_entry $(median "${c_entry[@]}")x, rw_ret $(median "${c_ret[@]}")x"
	echo "    goal: rw_entry and rw_ret each at most 2.5x the empty program's ns per hit, or 1.1x" \
		"the clock program's, whichever is larger"
	check_clean "part 2"
fi
if [[ -n $wl_pid ]]; then
	wl_in=${WL[1]}
	exec {wl_in}>&- # end of input: the workload exits
	wait "$wl_pid" || true
	wl_pid=''
fi

# ---- part 3: attach time -------------------------------------------------

if [[ $parts == *3* ]]; then
	echo
	echo "== 3. attach time: $nfuncs entry+ret functions of $out/compile with all their RETs"
	"$out/attach_time" "$out/compile" "$nfuncs" "$perf_budget" 3 >"$work/attach.out" &
	attach_pid=$!
	wait "$attach_pid"
	attach_pid=''
	awk '$1 == "prog_id" { print $2 }' "$work/attach.out" >>"$work/ours"
	python3 - "$work/attach.out" "$out/compile" "$perf_budget" <<-'EOF'
	import sys
	kv = {}
	for line in open(sys.argv[1]):
	    k, v = line.split()
	    if k == "prog_id":
	        continue
	    kv.setdefault(k, []).append(float(v))
	one = lambda k: kv[k][0]
	med = lambda k: sorted(kv[k])[len(kv[k]) // 2]
	n = int(one("entries") + one("rets"))
	print("    %s: %d functions (%d entry+ret, binary analysis %.2f s); picked %d spread over them by name"
	      % (sys.argv[2], one("functions"), one("candidates"), one("analysis_s"), one("picked")))
	print("    offsets: %d entries + %d RETs = %d" % (one("entries"), one("rets"), n))
	if "multi_attach_s" in kv:
	    print("    uprobe_multi, 2 links (entries, RETs): attach %.3f s (median of %s), detach %.3f s (median of %s)"
	          % (med("multi_attach_s"), ", ".join("%.3f" % v for v in kv["multi_attach_s"]),
	             med("multi_detach_s"), ", ".join("%.3f" % v for v in kv["multi_detach_s"])))
	    print("      goal: under 1 s to attach with uprobe_multi")
	else:
	    print("    uprobe_multi: not supported by this kernel")
	m = int(one("perf_offsets_measured"))
	print("    perf events, one per offset, on %d of the %d offsets: attach %.3f s, detach %.3f s"
	      " (%.3f ms and %.1f ms per offset)"
	      % (m, n, one("perf_attach_s"), one("perf_detach_s"),
	         1e3 * one("perf_attach_s") / m, 1e3 * one("perf_detach_s") / m))
	if m < n:
	    per = (one("perf_calibration_attach_s") + one("perf_calibration_detach_s")) \
	        / one("perf_calibration_offsets")
	    print("      attaching and detaching all %d would take about %.0f s (%.1f ms per offset on a first"
	          " %d), over the %s s budget: an evenly spread subset was timed"
	          % (n, per * n, 1e3 * per, one("perf_calibration_offsets"), sys.argv[3]))
	    print("      EXTRAPOLATED linearly to %d offsets: attach %.3f s, detach %.1f s"
	          % (n, one("perf_attach_extrapolated_s"), one("perf_detach_extrapolated_s")))
	    print("      (attach may be a lower bound: per offset, it grew with the number attached in runs by hand)")
	EOF
	check_clean "part 3"
fi

echo
echo "trace_bench: done in $(($(date +%s) - bench_start)) s"
