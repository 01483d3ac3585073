#!/usr/bin/env bash
# Runs `make STAGE` for each stage named, in order, stopping at the first
# that fails (as make does), and prints how long each took: after it, and
# all of them at the end, so that a slow stage is seen in any log.
#
#   scripts/stages.sh STAGE...
set -u
times=()
total=0
status=0
for stage in "$@"; do
	t0=$(date +%s)
	${MAKE:-make} --no-print-directory "$stage"
	status=$?
	secs=$(($(date +%s) - t0))
	total=$((total + secs))
	line=$(printf '%-12s %5d s' "$stage" "$secs")
	[ $status -eq 0 ] || line="$line  FAILED (exit $status)"
	times+=("$line")
	echo "stage $line"
	[ $status -eq 0 ] || break
done
echo "--- stages ---"
printf '%s\n' "${times[@]}"
printf '%-12s %5d s (%d min)\n' total "$total" $((total / 60))
exit $status
