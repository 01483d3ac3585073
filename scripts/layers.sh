#!/usr/bin/env bash
# The layer rule of src/ (docs/development.md): a file includes headers of its
# own layer and of the layers below it, never above. Run by make lint; prints
# each include that breaks the rule and fails.
set -euo pipefail
cd "$(dirname "$0")/.."

layers=(base analysis trace agent plugin)
rank() {
	local i
	for i in "${!layers[@]}"; do
		[[ ${layers[$i]} == "$1" ]] && { echo "$i"; return; }
	done
	echo -1
}

# The highest layer each place may include: a layer itself; the CLI the
# engine (trace); the agent's program the agent; the kubectl plugin and the
# tests everything.
top_of() {
	case $1 in
	src/*) rank "$(cut -d/ -f2 <<<"$1")" ;;
	cmd/retwatch/*) rank trace ;;
	cmd/retwatch-agent/*) rank agent ;;
	*) rank plugin ;;
	esac
}

bad=0
while IFS= read -r file; do
	top=$(top_of "$file")
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
		r=$(rank "$layer")
		((r >= 0)) || continue
		if ((r > top)); then
			echo "$file:$line: includes $inc: layer $layer is above ${file%/*}" >&2
			bad=1
		fi
	done < <(grep -n '^#include "' "$file" | sed 's/^\([0-9]*\):#include "\([^"]*\)".*/\1:\2/')
done < <(git ls-files 'src/*.[ch]' 'cmd/*.[ch]' 'tests/unit/*.[ch]' 'tests/fuzz/*.c' 'bench/*.c')
if ((bad)); then
	echo "layers: the layers are, lowest first: ${layers[*]}" >&2
	exit 1
fi
