// SPDX-License-Identifier: MIT
/*
 * floor: the cheapest probes possible at the places retwatch probes. Attaches
 * an empty BPF program at the entry and every RET of the functions matching
 * PATTERN in process PID's executable, and at runtime.morestack in a Go
 * binary, as src/trace/tracer_slots.c does, with the same links (one for the
 * entries, one for the RETs, one for morestack). Prints one line on stderr
 * once attached, then holds the probes until SIGINT or SIGTERM.
 *
 * usage: floor [--perf] [--clock] PID PATTERN...
 *   --perf   one perf-event uprobe per offset instead of uprobe_multi links
 *   --clock  the clock program (emptyprog.h) instead of the empty one
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "analysis/binary.h"
#include "emptyprog.h"
#include "trace/uprobe.h"

static volatile sig_atomic_t exiting;

static void on_signal(int sig)
{
	(void)sig;
	exiting = 1;
}

/* Go binaries: the tracer also probes runtime.morestack's entry. */
static int attach_morestack(struct binary *bin, int prog_fd, bool multi, const char *path,
			    struct uprobe_links *l, struct rw_error *err)
{
	const char *pattern = "runtime.morestack";
	struct binary_match m = { 0 };
	uint64_t offset, cookie = 0;
	int e = 0;

	if (!binary__is_go(bin))
		return 0;
	if (binary__match(bin, &pattern, 1, 1, &m, NULL) || m.nfuncs != 1)
		goto out;
	offset = m.funcs[0]->file_offset;
	e = uprobe_attach(l, prog_fd, multi, path, &offset, &cookie, 1, err);
out:
	binary_match__clear(&m);
	return e;
}

static void print_run_stats(int prog_fd)
{
	struct bpf_prog_info info = { 0 };
	__u32 len = sizeof(info);

	if (bpf_obj_get_info_by_fd(prog_fd, &info, &len))
		return;
	fprintf(stderr, "floor: program %u ran %llu times, %llu ns in all\n", info.id,
		(unsigned long long)info.run_cnt, (unsigned long long)info.run_time_ns);
}

static int usage(void)
{
	fprintf(stderr, "usage: floor [--perf] [--clock] PID PATTERN...\n");
	return 2;
}

int main(int argc, char **argv)
{
	struct uprobe_links entry, ret, morestack;
	struct binary_match m = { 0 };
	struct offsets off = { 0 };
	struct binary *bin = NULL;
	struct rw_error err = { 0 };
	struct sigaction sa = { .sa_handler = on_signal };
	sigset_t block, old;
	char exe[64], path[64];
	bool multi = true, clock = false;
	int argi = 1, fd = -1, prog_fd = -1, status = 1, e;

	uprobe_links__init(&entry);
	uprobe_links__init(&ret);
	uprobe_links__init(&morestack);
	for (; argi < argc && argv[argi][0] == '-'; argi++) {
		if (!strcmp(argv[argi], "--perf"))
			multi = false;
		else if (!strcmp(argv[argi], "--clock"))
			clock = true;
		else
			return usage();
	}
	if (argc - argi < 2 || atoi(argv[argi]) <= 0)
		return usage();
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &old);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);

	/* Like the tracer: name the inode we opened, whatever the path names later. */
	snprintf(exe, sizeof(exe), "/proc/%s/exe", argv[argi]);
	fd = open(exe, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr, "floor: failed to open %s: %s\n", exe, strerror(errno));
		goto cleanup;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	bin = binary__open(NULL, path, &err);
	if (!bin) {
		fprintf(stderr, "floor: %s: %s\n", exe, err.msg);
		goto cleanup;
	}
	if (binary__match(bin, (const char *const *)argv + argi + 1, argc - argi - 1,
			  BINARY_DEFAULT_LIMIT, &m, &err)) {
		fprintf(stderr, "floor: %s\n", err.msg);
		goto cleanup;
	}
	if (m.nunmatched) {
		fprintf(stderr, "floor: no function matches '%s' in %s\n", m.unmatched[0].pattern,
			exe);
		goto cleanup;
	}
	if (offsets__collect(m.funcs, m.nfuncs, &off)) {
		fprintf(stderr, "floor: out of memory\n");
		goto cleanup;
	}
	prog_fd = clock ? clock_prog__load(multi) : empty_prog__load(multi);
	if (prog_fd < 0) {
		fprintf(stderr, "floor: failed to load the %s program: %s\n",
			clock ? "clock" : "empty", strerror(-prog_fd));
		goto cleanup;
	}
	if (multi && !uprobe_multi_supported(prog_fd)) {
		fprintf(stderr, "floor: this kernel has no uprobe_multi links; try --perf\n");
		goto cleanup;
	}
	e = uprobe_attach(&entry, prog_fd, multi, path, off.entries, off.cookies, off.nentries,
			  &err);
	if (!e)
		e = uprobe_attach(&ret, prog_fd, multi, path, off.rets, off.cookies, off.nrets,
				  &err);
	if (!e)
		e = attach_morestack(bin, prog_fd, multi, path, &morestack, &err);
	if (e) {
		fprintf(stderr, "floor: %s\n", err.msg);
		goto cleanup;
	}
	fprintf(stderr, "floor: attached %s at %zu entries, %zu returns%s of %zu functions (%s)\n",
		clock ? CLOCK_PROG_NAME : EMPTY_PROG_NAME, entry.n, ret.n,
		morestack.n ? " and runtime.morestack" : "", m.nfuncs,
		multi ? "uprobe_multi" : "perf_event");
	while (!exiting)
		sigsuspend(&old);
	print_run_stats(prog_fd);
	status = 0;
cleanup:
	uprobe_links__close(&morestack);
	uprobe_links__close(&ret);
	uprobe_links__close(&entry);
	if (prog_fd >= 0)
		close(prog_fd);
	offsets__free(&off);
	binary_match__clear(&m);
	binary__put(bin);
	if (fd >= 0)
		close(fd);
	return status;
}
