#!/usr/bin/env bash
# Times `retwatch inspect --json --limit 100000` on the largest Go binary at
# hand (the Go toolchain's own compile or go command) with 1,000 function
# names, then on a stripped copy of it (names come from pclntab there).
# Prints wall time and max RSS; asserts nothing.
#
# Usage: bench/inspect_bench.sh [NFUNCS]       (default 1000)
# Env:   RETWATCH   binary to time (default build/retwatch; `make` builds it)
#        BINARY     the Go binary to inspect (default: the largest of the Go
#                   toolchain's compile and go commands)
set -euo pipefail

nfuncs=${1:-1000}
retwatch=${RETWATCH:-build/retwatch}
if [[ ! -x $retwatch ]]; then
	echo "inspect_bench: $retwatch not found (run make, or set RETWATCH)" >&2
	exit 1
fi

goroot=$(go env GOROOT)
target=${BINARY:-}
for candidate in "$goroot/pkg/tool/$(go env GOOS)_$(go env GOARCH)/compile" "$goroot/bin/go"; do
	if [[ -z ${BINARY:-} && -f $candidate && (-z $target || $(stat -c %s "$candidate") -gt $(stat -c %s "$target")) ]]; then
		target=$candidate
	fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
strip -o "$work/stripped" "$target"

# nfuncs text symbols spread evenly over the sorted list: every package, not
# just the first ones. Skipped: names with spaces (none expected in text),
# zero-size markers (runtime.etext) and names with go tool nm's ".abi0"
# decoration, which is not part of the symbol's name.
go tool nm -size "$target" |
	awk '($3 == "T" || $3 == "t") && NF == 4 && $2 > 0 && $4 !~ /\.abi0$/ { print $4 }' |
	sort -u >"$work/all"
total=$(wc -l <"$work/all")
awk -v n="$nfuncs" -v total="$total" 'BEGIN { step = total / n } NR > step * picked { print; picked++ }' \
	"$work/all" | head -n "$nfuncs" >"$work/names"
mapfile -t names <"$work/names"

echo "retwatch: $retwatch"
echo "binary:   $target ($(stat -c %s "$target") bytes, $total text symbols)"
echo "patterns: ${#names[@]} exact names"

# run LABEL FILE: one timed inspect; prints wall time, max RSS, functions found.
run() {
	local label=$1 file=$2 status=0
	/usr/bin/time -v -o "$work/time" "$retwatch" inspect --json --limit 100000 "$file" "${names[@]}" \
		>"$work/out.json" 2>"$work/err" || status=$?
	local wall rss found
	wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { print $2 }' "$work/time")
	rss=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$work/time")
	found=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["functions"]))' \
		"$work/out.json" 2>/dev/null || echo "?")
	printf '%-10s exit %-3s wall %-10s max RSS %6d MiB   functions %s\n' \
		"$label" "$status" "$wall" "$((rss / 1024))" "$found"
	if ((status != 0)); then
		head -n 3 "$work/err" | cut -c1-160 | sed 's/^/           stderr: /'
	fi
}

run symtab "$target"
run pclntab "$work/stripped"
