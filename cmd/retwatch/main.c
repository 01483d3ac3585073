// SPDX-License-Identifier: MIT
/* retwatch: which calls of a function are slow. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "analysis/binary.h"
#include "analysis/debugfile.h"
#include "base/termsafe.h"
#include "cmd.h"

#ifndef RETWATCH_VERSION
#define RETWATCH_VERSION "0.1.0"
#endif

void cmd_usage(FILE *f)
{
	fprintf(f,
		"usage: retwatch inspect [--json] [--limit N] [--debug-dir DIR...] BINARY PATTERN...\n"
		"       retwatch trace --pid PID [--pid PID...] [--duration SECONDS]\n"
		"                      [--threshold DURATION] [--interval SECONDS] [--json] PATTERN...\n"
		"       retwatch --version\n"
		"\n"
		"inspect  list each matching function's address, file offset, size and\n"
		"         return sites; PATTERN is a name or a glob with * and ?\n"
		"         (e.g. 'main.ProcessPayment', 'main.(*Cart).*', 'parse_*'); on a\n"
		"         shared library, LIB:PATTERN as trace takes it (libc.so.6:malloc)\n"
		"  --json     print one JSON object\n"
		"  --limit N  refuse a glob that matches more than N functions (default %d)\n"
		"  --debug-dir DIR  look for a stripped file's debug file in DIR/.build-id/\n"
		"             and DIR/<the file's directory>/ before /usr/lib/debug (repeatable)\n",
		BINARY_DEFAULT_LIMIT);
	fprintf(f, "\ntrace    measure every call of the matching functions in running processes\n"
		   "         (retwatch trace --help)\n");
}

int cmd_debug_dir(const char *dir)
{
	int e = debugfile__add_dir(dir);

	if (!e)
		return 0;
	if (e == -EINVAL)
		fprintf(stderr, "retwatch: invalid --debug-dir '%s': give an absolute path\n", dir);
	else if (e == -E2BIG)
		fprintf(stderr, "retwatch: at most %d --debug-dir options\n", DEBUGFILE_MAX_DIRS);
	else
		fprintf(stderr, "retwatch: --debug-dir '%s': %s\n", dir, strerror(-e));
	return 2;
}

int main(int argc, char **argv)
{
	termsafe__install();
	if (argc < 2) {
		cmd_usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("retwatch %s\n", RETWATCH_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
		cmd_usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "inspect"))
		return cmd_inspect(argc - 1, argv + 1);
	if (!strcmp(argv[1], "trace"))
		return cmd_trace(argc - 1, argv + 1);
	fprintf(stderr, "retwatch: unknown command '%s'\n", argv[1]);
	cmd_usage(stderr);
	return 2;
}
