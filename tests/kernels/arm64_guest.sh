#!/bin/sh
# Runs inside the arm64 VM (tests/kernels/test_arm64.py boots it), with
# busybox alone: no Python there. Each run starts tracees (tests/fixtures/
# tracee, inline, c/tracee.c and c/deepstack.c, built for arm64) held at
# their "ready" line, traces them with `retwatch trace --json` until they
# exit, and leaves everything in OUT/NAME for the host to check:
#   tracee-N.out/.err   each tracee's output (tests/fixtures/tracee's last
#                       line: its counts)
#   retwatch.json/.err  retwatch's document and log
#   rc                  retwatch's exit status, "attach-timeout", or
#                       "exited before tracing"
#   seconds             how long the run took
#
#   arm64_guest.sh RETWATCH TRACEES OUT
set -u
RW=$1 T=$2 OUT=$3

alive() { # PID: running, not a zombie waiting for the shell's wait
	kill -0 "$1" 2>/dev/null && ! grep -q '^State:[[:space:]]*Z' "/proc/$1/status" 2>/dev/null
}

wait_for() { # FILE PATTERN SECONDS [PID]: whether a line of FILE matched in time (while PID lives)
	i=0
	while [ $i -lt $(($3 * 5)) ]; do
		grep -q "$2" "$1" 2>/dev/null && return 0
		[ -n "${4:-}" ] && ! alive "$4" && return 1
		sleep 0.2
		i=$((i + 1))
	done
	return 1
}

# starts tracee NAME with ARG; tests/fixtures/inline says no "ready PID"
# of its own: a shell says it and becomes the program
start() {
	case $1 in
	inlinefix) sh -c 'echo "ready $$"; exec "$0" "$1" 0 wait' "$T/inlinefix" "$2" ;;
	*) "$T/$1" "$2" ;;
	esac
}

# trace NAME "RETWATCH OPTIONS" "FUNCTIONS" TRACEE:ARG...
trace() {
	d=$OUT/$1 opts=$2 funcs=$3
	shift 3
	fifos=/tmp/fifos/$1 # not on the share: 9p has no FIFOs
	mkdir -p "$d" "$fifos"
	t0=$(date +%s) n=0 pids="" pidargs=""
	for ts in "$@"; do
		n=$((n + 1))
		mkfifo "$fifos/$n"
		# without the other tracees' "go" ends: deepstack waits for its stdin's end
		start "${ts%%:*}" "${ts#*:}" <"$fifos/$n" >"$d/tracee-$n.out" 2>"$d/tracee-$n.err" \
			3>&- 4>&- 5>&- 6>&- 7>&- &
		pids="$pids $!"
		eval "exec $((n + 2))>$fifos/$n" # fds 3, 4...: the tracees' "go"
		if ! wait_for "$d/tracee-$n.out" '^ready ' 60; then
			echo "tracee $n of $1 never ready" >"$d/rc"
			kill $pids 2>/dev/null
			return
		fi
		pidargs="$pidargs --pid $(sed -n 's/^ready //p' "$d/tracee-$n.out")"
	done
	# shellcheck disable=SC2086 # word splitting wanted
	"$RW" trace --json $opts $pidargs $funcs >"$d/retwatch.json" 2>"$d/retwatch.err" \
		3>&- 4>&- 5>&- 6>&- 7>&- &
	rw=$!
	if ! wait_for "$d/retwatch.err" '^retwatch: tracing ' 300 $rw; then
		if alive $rw; then
			echo attach-timeout
		else
			echo "exited before tracing"
		fi >"$d/rc"
		kill $pids $rw 2>/dev/null
		wait
		return
	fi
	i=0
	while [ $i -lt $n ]; do
		i=$((i + 1))
		eval "echo go >&$((i + 2))"
		eval "exec $((i + 2))>&-" # deepstack waits for the end of its stdin
	done
	for p in $pids; do
		wait "$p"
	done
	wait $rw
	echo $? >"$d/rc"
	echo $(($(date +%s) - t0)) >"$d/seconds"
}

uname -r >"$OUT/kernel"
"$RW-agent" --version >"$OUT/agent-version" 2>&1
"$RW-agent" --help >"$OUT/agent-help" 2>&1
# two runs side by side: each calibrates, for tens of seconds under TCG, and
# loads the BPF programs (about 165 s on 6.1 under TCG); each process of a
# run traces the run's functions it has. Go with a threshold; the native
# programs without: each slow native call carries 16 KiB of its stack, and
# deep's 120 calls overfill the ring buffer while userspace is slow (TCG);
# the slowest kept are sent all the same
trace go "--threshold 20ms --args --slowest 10 --max-overhead 0" "main.deep main.validate main.charge" \
	go-tracee:recursive go-tracee:paths go-tracee-dwarf:charge &
trace native "--args --slowest 5 --max-overhead 0" \
	"validate deep main.clamp main.nap main.risky main.grade slow_leaf" \
	c-tracee:paths c-tracee:recursive inlinefix:5 deepstack:60 &
wait
echo done >"$OUT/done"
