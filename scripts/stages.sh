#!/usr/bin/env bash
# Runs `make STAGE` for each stage named, in order, stopping at the first
# that fails (as make does), and prints how long each took: after it, and
# all of them at the end, so that a slow stage is seen in any log.
#
#   scripts/stages.sh STAGE[,STAGE...][+STAGE[,STAGE...]...]...
#
# Stages joined by + run at the same time (one that mostly waits beside
# ones that compute), and stages joined by , one after another within that
# (up to the first that fails): the first chain's output as it comes, the
# others' after it, from build/stages/STAGE.log.
set -u
times=()
total=0
status=0

# One stage, its time in build/stages/STAGE.time and its exit status.
run_stage() {
	local stage=$1 t0 rc
	t0=$(date +%s)
	${MAKE:-make} --no-print-directory "$stage"
	rc=$?
	echo "$(($(date +%s) - t0)) $rc" >"build/stages/$stage.time"
	return $rc
}

# A chain of stages (a,b,c) one after another, up to the first that fails;
# with a second argument, each stage's output into build/stages/STAGE.log.
run_chain() {
	local stage
	IFS=, read -r -a chain <<<"$1"
	for stage in "${chain[@]}"; do
		if [ -n "${2:-}" ]; then
			run_stage "$stage" >"build/stages/$stage.log" 2>&1 || return
		else
			run_stage "$stage" || return
		fi
	done
}

# The line a finished stage gets in the table; its status in $rc.
stage_line() {
	local stage=$1 secs
	read -r secs rc <"build/stages/$stage.time"
	line=$(printf '%-12s %5d s' "$stage" "$secs")
	[ "$rc" -eq 0 ] || line="$line  FAILED (exit $rc)"
}

mkdir -p build/stages
for group in "$@"; do
	IFS=+ read -r -a members <<<"$group"
	t0=$(date +%s)
	pids=()
	for i in "${!members[@]}"; do
		IFS=, read -r -a chain <<<"${members[$i]}"
		for stage in "${chain[@]}"; do
			rm -f "build/stages/$stage.time" "build/stages/$stage.log"
		done
		if [ "$i" -eq 0 ]; then
			run_chain "${members[$i]}" &
		else
			run_chain "${members[$i]}" log &
		fi
		pids+=("$!")
	done
	wait "${pids[@]}"
	for i in "${!members[@]}"; do
		IFS=, read -r -a chain <<<"${members[$i]}"
		failed=0
		for stage in "${chain[@]}"; do
			if [ "$i" -gt 0 ] && [ -f "build/stages/$stage.log" ]; then
				echo "--- stage $stage, run beside ${members[0]} ---"
				cat "build/stages/$stage.log"
			fi
			if [ -f "build/stages/$stage.time" ]; then
				stage_line "$stage"
			elif [ $failed -ne 0 ]; then
				line=$(printf '%-12s     - s  not run (the stage before it failed)' "$stage")
				rc=0
			else
				line=$(printf '%-12s     ? s  FAILED (no exit status)' "$stage")
				rc=1
			fi
			[ "$rc" -eq 0 ] || failed=1
			times+=("$line")
			echo "stage $line"
			[ "$rc" -eq 0 ] || status=$rc
		done
	done
	secs=$(($(date +%s) - t0))
	total=$((total + secs))
	if [ "${#members[@]}" -gt 1 ]; then
		times+=("$(printf '  together  %5d s' "$secs")")
	fi
	[ $status -eq 0 ] || break
done
echo "--- stages ---"
printf '%s\n' "${times[@]}"
printf '%-12s %5d s (%d min)\n' total "$total" $((total / 60))
exit $status
