#!/usr/bin/env bash
# Sizes a newcomer can read (docs/development.md): no .c file of src/ or
# cmd/ over 1,000 lines, src/agent/agent.c under 500, no function of src/ or cmd/ over
# 80 lines (from its opening brace in column 0 to its closing brace). Run by
# make lint; prints each file or function over its limit and fails.
set -euo pipefail
cd "$(dirname "$0")/.."

bad=0
while IFS= read -r file; do
	n=$(wc -l <"$file")
	limit=1000
	[[ $file == src/agent/agent.c ]] && limit=499
	if ((n > limit)); then
		echo "$file: $n lines, over $limit" >&2
		bad=1
	fi
done < <(git ls-files 'src/*.c' 'cmd/*.c')

# A function starts at a line of its signature (a name in column 0 followed
# by an opening parenthesis) and its body at the next "{" in column 0.
if ! git ls-files 'src/*.c' 'cmd/*.c' | xargs awk '
	FNR == 1 { name = ""; start = 0 }
	/^[A-Za-z_].*\(/ { name = $0 }
	/^\{/ { start = FNR }
	/^\}/ && start {
		if (FNR - start + 1 > 80) {
			sub(/\(.*/, "", name)
			printf "%s:%d: %s: %d lines, over 80\n", FILENAME, start, name, FNR - start + 1
			over = 1
		}
		start = 0
	}
	END { exit over }' >&2; then
	bad=1
fi
exit "$bad"
