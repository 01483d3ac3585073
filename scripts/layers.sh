#!/usr/bin/env bash
# The layer rule of src/ (docs/development.md): a file includes headers of its
# own layer and of the layers it stands on, never of one above or beside it.
# Run by make lint; prints each include that breaks the rule and fails.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each layer of src/, lowest first, and the layers it may include: its own
# and those below it. kube (the Kubernetes client) stands beside analysis and
# trace, report (what reports and summaries are on the wire) on kube and
# analysis; the plugin uses kube and report, never the agent.
layers=(base analysis kube trace report agent plugin)
declare -A reach=(
	[base]="base"
	[analysis]="base analysis"
	[kube]="base kube"
	[trace]="base analysis trace"
	[report]="base analysis kube report"
	[agent]="base analysis kube trace report agent"
	[plugin]="base analysis kube trace report plugin"
	[all]="base analysis kube trace report agent plugin"
)

# What each place may include: a layer what it reaches; the CLI the engine
# (trace); the agent's program the agent; the kubectl plugin's, the tests
# and the benches everything.
reach_of() {
	case $1 in
	src/*) echo "${reach[$(cut -d/ -f2 <<<"$1")]}" ;;
	cmd/retwatch/*) echo "${reach[trace]}" ;;
	cmd/retwatch-agent/*) echo "${reach[agent]}" ;;
	*) echo "${reach[all]}" ;;
	esac
}

is_layer() {
	local l
	for l in "${layers[@]}"; do
		[[ $l == "$1" ]] && return 0
	done
	return 1
}

bad=0
while IFS= read -r file; do
	allowed=" $(reach_of "$file") "
	while IFS=: read -r line inc; do
		layer=${inc%%/*}
		if [[ $inc != */* ]]; then
			# A header beside the file (cmd/, tests/) is fine; one of src/
			# is named by its layer, so that every include shows it.
			for l in "${layers[@]}"; do
				[[ -f src/$l/$inc ]] || continue
				echo "$file:$line: include \"$l/$inc\", not \"$inc\"" >&2
				bad=1
			done
			continue
		fi
		is_layer "$layer" || continue
		if [[ $allowed != *" $layer "* ]]; then
			echo "$file:$line: includes $inc: ${file%/*} may include only$allowed" >&2
			bad=1
		fi
	done < <(grep -n '^#include "' "$file" | sed 's/^\([0-9]*\):#include "\([^"]*\)".*/\1:\2/')
done < <(git ls-files 'src/*.[ch]' 'cmd/*.[ch]' 'tests/unit/*.[ch]' 'tests/fuzz/*.c' 'bench/*.c')
if ((bad)); then
	echo "layers: the layers are, lowest first: ${layers[*]}" >&2
	exit 1
fi
