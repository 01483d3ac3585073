#!/usr/bin/env bash
# Times `retwatch inspect --json --limit 100000` on the largest Go binary at
# hand (the Go toolchain's own compile or go command) with 1,000 function
# names, then on a stripped copy of it (names come from pclntab there).
# Then every function of a big Go binary (kube-apiserver, 119 MB, 164,686
# functions, cached by the agent tests): `inspect --limit 1000000 BIG '*'`,
# text and --json, and one function of it; with BASELINE set, each run of
# RETWATCH alternates with one of BASELINE (the same arguments) and the
# medians of both are printed with their ratio. Prints wall time and max
# RSS; asserts nothing.
#
# Usage: bench/inspect_bench.sh [NFUNCS]       (default 1000)
# Env:   RETWATCH   binary to time (default build/retwatch; `make` builds it)
#        BINARY     the Go binary to inspect (default: the largest of the Go
#                   toolchain's compile and go commands)
#        BIG        the big Go binary (default ~/.cache/retwatch/k8s/*/bin/
#                   kube-apiserver; none there: that part is skipped)
#        BASELINE   another retwatch to time against (a build of main)
#        RUNS       runs of each big-binary case (default 5)
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

# ---- every function of a big Go binary ----

big=${BIG:-$(ls ~/.cache/retwatch/k8s/*/bin/kube-apiserver 2>/dev/null | head -n 1 || true)}
if [[ -z $big || ! -f $big ]]; then
	echo "big:      none (set BIG, or run the agent tests once to build kube-apiserver)"
	exit 0
fi
runs=${RUNS:-5}
baseline=${BASELINE:-}
echo
echo "big:      $big ($(stat -c %s "$big") bytes), $runs runs each${baseline:+, alternating with $baseline}"

# timed BIN ARGS...: one run's "wall_seconds max_rss_kib" (output thrown away)
timed() {
	local bin=$1
	shift
	/usr/bin/time -f '%e %M' -o "$work/t" "$bin" inspect "$@" >/dev/null 2>&1 || true
	cat "$work/t"
}

# median of the numbers on stdin
median() {
	sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

# big_case LABEL ARGS...: the medians of RETWATCH (and BASELINE) over runs
big_case() {
	local label=$1 i
	shift
	: >"$work/a"
	: >"$work/b"
	for ((i = 0; i < runs; i++)); do
		timed "$retwatch" "$@" >>"$work/a"
		if [[ -n $baseline ]]; then
			timed "$baseline" "$@" >>"$work/b"
		fi
	done
	local wa ra wb rb
	wa=$(awk '{ print $1 }' "$work/a" | median)
	ra=$(awk '{ print $2 }' "$work/a" | median)
	printf '%-12s wall %6.2f s  max RSS %5d MiB' "$label" "$wa" "$((${ra%.*} / 1024))"
	if [[ -n $baseline ]]; then
		wb=$(awk '{ print $1 }' "$work/b" | median)
		rb=$(awk '{ print $2 }' "$work/b" | median)
		printf '   baseline wall %6.2f s  max RSS %5d MiB   wall ratio %.2f' \
			"$wb" "$((${rb%.*} / 1024))" "$(echo "$wa / $wb" | bc -l)"
	fi
	printf '\n'
}

big_case "'*' text" --limit 1000000 "$big" '*'
big_case "'*' json" --json --limit 1000000 "$big" '*'
big_case "main.main" "$big" main.main
