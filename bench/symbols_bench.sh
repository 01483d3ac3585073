#!/usr/bin/env bash
# Times `retwatch inspect` on the crafted symbol tables of issue 16 item 4
# (tests/fixtures/build.sh makes them under crafted/): cold-part pairing
# (40,000 "hot" + 40,000 "hot.cold"), Go ABI-wrapper dropping (4,000
# "main.dup"), and suggestions for 64 unmatched 250-character patterns
# against 8,000 250-character names. Prints wall time and max RSS per case
# for each binary given; asserts nothing.
#
# Usage: bench/symbols_bench.sh [RETWATCH...]   (default build/retwatch)
#   e.g. bench/symbols_bench.sh /tmp/main/build/retwatch build/retwatch
# Env:   RETWATCH_FIXTURES  fixture directory (default build/fixtures)
#        TIMEOUT            seconds before a case is cut off (default 300)
set -euo pipefail

fixtures=${RETWATCH_FIXTURES:-build/fixtures}
timeout=${TIMEOUT:-300}
bins=("$@")
((${#bins[@]})) || bins=(build/retwatch)
for k in cold abi suggest; do
	if [[ ! -f $fixtures/crafted/$k ]]; then
		echo "symbols_bench: $fixtures/crafted/$k missing (run tests/fixtures/build.sh)" >&2
		exit 1
	fi
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# 64 patterns shaped like the names: a letter and a dot, 125 times.
mapfile -t long_pats < <(python3 -c '
import random
r = random.Random(1)
for _ in range(64):
    print("".join(r.choice("abcdefghij") + "." for _ in range(125))[:250])')

# run BIN LABEL ARGS...: one timed inspect.
run() {
	local bin=$1 label=$2 status=0
	shift 2
	timeout "$timeout" /usr/bin/time -f '%e %M' -o "$work/time" "$bin" inspect "$@" \
		>/dev/null 2>"$work/err" || status=$?
	if ((status == 124)); then
		printf '  %-26s cut off after %s s\n' "$label" "$timeout"
		return
	fi
	read -r wall rss < <(tail -n 1 "$work/time")
	printf '  %-26s exit %-2s wall %7.2f s   max RSS %4d MiB\n' "$label" "$status" "$wall" \
		"$((rss / 1024))"
}

for bin in "${bins[@]}"; do
	echo "retwatch: $bin"
	run "$bin" "cold: index only" "$fixtures/crafted/cold" lone
	run "$bin" "cold: list 40,000" --limit 100000 "$fixtures/crafted/cold" hot
	run "$bin" "abi: 4,000 same name" --limit 100000 "$fixtures/crafted/abi" main.dup
	run "$bin" "suggest: 64 patterns" "$fixtures/crafted/suggest" "${long_pats[@]}"
done
