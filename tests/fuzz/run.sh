#!/usr/bin/env bash
# Runs each libFuzzer target for a bounded time over a corpus seeded with real
# binaries, as many at once as there are CPUs (each target is one process on
# one CPU: its time is its own either way). usage: run.sh SECONDS FUZZER...
set -euo pipefail
seconds=$1
shift
fixtures=${RETWATCH_FIXTURES:-build/fixtures}
jobs=$(nproc)

# One target: its corpus, its regression inputs, its run. Prints one line,
# or the failure with the end of its log; exits non-zero on a failure.
run_one() {
	local fuzzer=$1 name corpus log runs options
	name=$(basename "$fuzzer")
	corpus=build/fuzz/corpus/$name
	mkdir -p "$corpus"
	# seeds: small real binaries (the C fixtures) and small made-up Go files
	find "$fixtures/c" -type f -size -64k 2>/dev/null | while read -r f; do
		cp "$f" "$corpus/seed-$(echo "${f#"$fixtures"/}" | tr / -)"
	done
	python3 tests/fuzz/seeds/go_seeds.py "$corpus"
	# a stripped binary and its debug file in one input (fuzz_debugfile.c)
	if [ "$name" = fuzz_debugfile ] && [ -f "$fixtures/c/debug/debugfix.debug" ]; then
		python3 -c 'import struct, sys
b, d = (open(p, "rb").read() for p in sys.argv[1:3])
open(sys.argv[3], "wb").write(struct.pack("<I", len(b)) + b + d)' \
			"$fixtures/c/debug/debugfix" "$fixtures/c/debug/debugfix.debug" "$corpus/seed-debug-pair"
	fi
	# seeds of a target's own kind of input (such as /proc/PID/maps text)
	if [ -d "tests/fuzz/seeds/$name" ]; then
		cp tests/fuzz/seeds/"$name"/* "$corpus"/
	fi
	log=build/fuzz/$name.log
	# inputs that once crashed a target run first, once each
	if [ -d "tests/fuzz/regressions/$name" ]; then
		if ! "$fuzzer" -timeout=10 tests/fuzz/regressions/"$name"/* >"$log" 2>&1; then
			echo "fuzz: $name FAILED on a regression input, see $log:"
			tail -40 "$log"
			return 1
		fi
	fi
	# a target's own options (such as a time limit per input) come last, and win;
	# an input that runs 10 s is a hang found (libFuzzer's own bound is 20 min)
	read -r -a options <<<"$(cat "tests/fuzz/$name.options" 2>/dev/null || true)"
	if "$fuzzer" -max_total_time="$seconds" -max_len=262144 -rss_limit_mb=2048 -timeout=10 \
		-print_final_stats=1 "${options[@]}" "$corpus" >"$log" 2>&1; then
		runs=$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
		echo "fuzz: $name ran ${seconds}s, $runs inputs, no crash"
	else
		echo "fuzz: $name FAILED, see $log:"
		tail -40 "$log"
		return 1
	fi
}

mkdir -p build/fuzz
pids=()
for fuzzer in "$@"; do
	while (($(jobs -rp | wc -l) >= jobs)); do
		wait -n || true
	done
	name=$(basename "$fuzzer")
	run_one "$fuzzer" >"build/fuzz/$name.out" 2>&1 &
	pids+=("$!:$name")
done
status=0
for p in "${pids[@]}"; do
	if ! wait "${p%%:*}"; then
		status=1
	fi
	cat "build/fuzz/${p#*:}.out"
done
exit $status
