#!/usr/bin/env bash
# Runs each libFuzzer target for a bounded time over a corpus seeded with real
# binaries. usage: run.sh SECONDS FUZZER...
set -euo pipefail
seconds=$1
shift
fixtures=${RETWATCH_FIXTURES:-build/fixtures}
status=0
for fuzzer in "$@"; do
	name=$(basename "$fuzzer")
	corpus=build/fuzz/corpus/$name
	mkdir -p "$corpus"
	# seeds: small real binaries (the C fixtures) and small made-up Go files
	find "$fixtures/c" -type f -size -64k 2>/dev/null | while read -r f; do
		cp "$f" "$corpus/seed-$(echo "${f#"$fixtures"/}" | tr / -)"
	done
	python3 tests/fuzz/seeds/go_seeds.py "$corpus"
	# seeds of a target's own kind of input (such as /proc/PID/maps text)
	if [ -d "tests/fuzz/seeds/$name" ]; then
		cp tests/fuzz/seeds/"$name"/* "$corpus"/
	fi
	log=build/fuzz/$name.log
	# inputs that once crashed a target run first, once each
	if [ -d "tests/fuzz/regressions/$name" ]; then
		if ! "$fuzzer" tests/fuzz/regressions/"$name"/* >"$log" 2>&1; then
			echo "fuzz: $name FAILED on a regression input, see $log:"
			tail -40 "$log"
			status=1
			continue
		fi
	fi
	if "$fuzzer" -max_total_time="$seconds" -max_len=262144 -rss_limit_mb=2048 \
		-print_final_stats=1 "$corpus" >"$log" 2>&1; then
		runs=$(grep -m1 -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo '?')
		echo "fuzz: $name ran ${seconds}s, $runs inputs, no crash"
	else
		echo "fuzz: $name FAILED, see $log:"
		tail -40 "$log"
		status=1
	fi
done
exit $status
