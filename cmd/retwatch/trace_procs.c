// SPDX-License-Identifier: MIT
/* retwatch trace: the processes traced, as they come and go. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/proctree.h"
#include "trace/shlib.h"
#include "trace/symbolize.h"
#include "trace_run.h"

/*
 * Says how many more of pr's children ended uncounted: its probes are its
 * own (another process runs its executable untraced), which a child does
 * not inherit. Never a silent zero.
 */
void trace_say_unprobed(struct trace_run *r, struct proc *pr)
{
	uint64_t n = tracer_target__children_unprobed(pr->target);

	for (size_t i = 0; i < shlib_procs__ntargets(pr->libs); i++)
		n += tracer_target__children_unprobed(shlib_procs__target(pr->libs, i));
	if (n <= pr->unprobed_said)
		return;
	fprintf(stderr,
		"retwatch: calls not counted: %" PRIu64 " more processes forked by process %d "
		"(or by those it forked) "
		"ended before they could be probed (%" PRIu64 " in all): another process runs "
		"its executable untraced, so its probes are its own, which the processes it "
		"forks do not inherit\n",
		n - pr->unprobed_said, pr->pid, n);
	r->children_unprobed += n - pr->unprobed_said;
	pr->unprobed_said = n;
}

/* The process is gone: keep what it measured, count what it left in flight. */
static void proc_exited(struct trace_run *r, struct proc *pr)
{
	tracer__count_children(r->t, pr->target);
	for (size_t i = 0; i < shlib_procs__ntargets(pr->libs); i++)
		tracer__count_children(r->t, shlib_procs__target(pr->libs, i));
	trace_say_unprobed(r, pr);
	results__retire(r->results, pr->target, true);
	for (size_t i = 0; i < shlib_procs__ntargets(pr->libs); i++)
		results__retire(r->results, shlib_procs__target(pr->libs, i), true);
	shlib_procs__free(pr->libs);
	pr->libs = NULL;
	symbolizer__forget(r->sym, pr->pid);
	pr->target = NULL;
	close(pr->pidfd);
	pr->pidfd = -1;
	r->nlive--;
	fprintf(stderr, "retwatch: process %d exited; %zu still traced\n", pr->pid, r->nlive);
}

/* Reads the slow calls waiting in the ring buffer (a bounded number of rounds). */
void trace_drain_events(struct trace_run *r)
{
	for (int round = 0; round < 16 && tracer__poll(r->t, 0) >= TRACER_POLL_MAX_EVENTS; round++)
		;
}

void trace_check_exits(struct trace_run *r)
{
	bool drained = false;

	for (size_t p = 0; p < r->nprocs; p++) {
		struct pollfd pfd = { .fd = r->procs[p].pidfd, .events = POLLIN };

		if (!r->procs[p].target || poll(&pfd, 1, 0) <= 0)
			continue;
		/* its last slow calls are in the ring buffer: read them while the
		 * symbolizer still holds its files */
		if (!drained)
			trace_drain_events(r);
		drained = true;
		proc_exited(r, &r->procs[p]);
	}
}

static int take_target(struct tracer_target *tt, const char *lib, void *ctx)
{
	(void)lib;
	return results__add(ctx, tt, NULL, NULL);
}

/*
 * A name the executable lacks: say so, and which mapped library has it.
 * 0 when every pattern matches (or the executable cannot be read: tracer__add
 * will say why).
 */
int trace_check_exe(struct trace_run *r, pid_t pid, const char *exe, const char *const *patterns,
		    size_t npatterns)
{
	struct binary_match m = { 0 };
	struct binary *b = binary__open(r->cache, exe, NULL);
	char lib[SHLIB_MAX_NAME];
	int ret = 0;

	if (!b || binary__match(b, patterns, npatterns, BINARY_DEFAULT_LIMIT, &m, NULL))
		goto out;
	for (size_t i = 0; i < m.nunmatched && !ret; i++) {
		const char *pat = m.unmatched[i].pattern;

		if (!shlib__find(pid, r->cache, NULL, NULL, pat, lib, sizeof(lib), NULL))
			continue;
		fprintf(stderr,
			"retwatch: process %d: no function matches '%s' in %s; %s is in %s: "
			"write '%s:%s'\n",
			pid, pat, exe, pat, lib, lib, pat);
		ret = -ENOENT;
	}
out:
	binary_match__clear(&m);
	binary__put(b);
	return ret;
}

/*
 * With several --pid, each process traces the functions it has: the
 * patterns of args->exe_patterns that match in exe (an executable that
 * cannot be read keeps them all: tracer__add says why), into own (room for
 * all). Their number; the preflight saw each match in one process at least.
 */
size_t trace_pid_patterns(struct trace_run *r, const char *exe, const struct trace_args *args,
			  const char **own)
{
	size_t n = 0;

	if (access(exe, R_OK)) {
		memcpy(own, args->exe_patterns, args->nexe_patterns * sizeof(*own));
		return args->nexe_patterns;
	}
	for (size_t i = 0; i < args->nexe_patterns; i++) {
		struct rw_error err = {};

		if (tracer__check(r->t, exe, &args->exe_patterns[i], 1, &err) != -ENOENT)
			own[n++] = args->exe_patterns[i];
	}
	return n;
}

/*
 * With several --pid: the patterns of args->exe_patterns not among the
 * process's own (trace_pid_patterns), said with the analysis's words for
 * them, and whether the process is traced for others.
 */
static void say_missing(struct trace_run *r, pid_t pid, const char *exe,
			const struct trace_args *args, const char *const *own, size_t nown,
			bool traced)
{
	const char **missing = calloc(args->nexe_patterns, sizeof(*missing));
	struct rw_error err = {};
	size_t n = 0;

	if (!missing)
		return;
	for (size_t i = 0, j = 0; i < args->nexe_patterns; i++) {
		if (j < nown && own[j] == args->exe_patterns[i])
			j++;
		else
			missing[n++] = args->exe_patterns[i];
	}
	if (tracer__check(r->t, exe, missing, n, &err) == -ENOENT)
		fprintf(stderr, "retwatch: process %d: %s; %s\n", pid, err.msg,
			traced ? "its other functions are traced" : "not traced");
	free(missing);
}

/* Libraries the process mapped since the last look (dlopen): attach to them. */
int trace_update_libs(struct trace_run *r, struct proc *pr, bool first)
{
	struct rw_error err = {};
	char *unmatched = NULL;
	int n;

	if (!shlib_procs__wanted(pr->libs))
		return 0;
	n = shlib_procs__update(pr->libs, r->t, r->cache, NULL, NULL, SIZE_MAX, take_target,
				r->results, &unmatched, &err);
	if (n < 0) {
		if (first)
			fprintf(stderr, "retwatch: process %d: %s\n", pr->pid, err.msg);
		free(unmatched);
		return first ? n : 0;
	}
	/* at the start, every pattern must match; later, new libraries just join */
	if (first && unmatched) {
		fprintf(stderr, "retwatch: process %d: %s\n", pr->pid, unmatched);
		free(unmatched);
		return -ENOENT;
	}
	if (!first && n > 0)
		fprintf(stderr, "retwatch: process %d: attached to %d newly loaded librar%s\n",
			pr->pid, n, n == 1 ? "y" : "ies");
	free(unmatched);
	return 0;
}

/* Room for one more process in r->procs. NULL: out of memory. */
static struct proc *proc_slot(struct trace_run *r)
{
	if (r->nprocs == r->procs_cap) {
		size_t cap = r->procs_cap * 2 + 16;
		struct proc *more = realloc(r->procs, cap * sizeof(*more));

		if (!more)
			return NULL;
		r->procs = more;
		r->procs_cap = cap;
	}
	return memset(&r->procs[r->nprocs], 0, sizeof(r->procs[0]));
}

/*
 * Why a process was not traced. A process --pid names: always said. One
 * --follow, --comm or --cgroup selected: said once per executable (a
 * shell's children run many programs that lack the functions), by the
 * caller, since the process is not asked again.
 */
static bool refusal_said(struct trace_run *r, pid_t pid, bool selected)
{
	char link[64], exe[4096];
	ssize_t n;

	if (!selected)
		return false;
	snprintf(link, sizeof(link), "/proc/%d/exe", pid);
	n = readlink(link, exe, sizeof(exe) - 1);
	if (n <= 0)
		return true; /* gone, or not ours to read: nothing useful to say */
	exe[n] = '\0';
	for (size_t i = 0; i < r->nrefused_exes; i++)
		if (!strcmp(r->refused_exes[i], exe))
			return true;
	if (r->nrefused_exes < MAX_REFUSED_EXES)
		r->refused_exes[r->nrefused_exes++] = strdup(exe);
	return false;
}

/*
 * Traces process pid: named by --pid (an error ends the run), or selected
 * (selected: it is left out, and said once per executable). 0, or -1.
 */
int trace_add_proc(struct trace_run *r, pid_t pid, const struct trace_args *args, bool selected)
{
	/* several --pid: each traces the functions it has (trace_pid_patterns) */
	bool several = !selected && args->npids > 1 && args->nexe_patterns;
	const char **pats = args->exe_patterns;
	size_t npats = args->nexe_patterns;
	struct proc *pr = proc_slot(r);
	struct proc_stat st = {};
	struct rw_error err = {};
	char exe[64];
	int ret = -1;

	if (!pr || (several && !(pats = calloc(args->nexe_patterns, sizeof(*pats))))) {
		fprintf(stderr, "retwatch: out of memory\n");
		return -1;
	}
	snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
	if (several) {
		bool others = args->npatterns > args->nexe_patterns; /* a library's */

		npats = trace_pid_patterns(r, exe, args, pats);
		if (npats < args->nexe_patterns)
			say_missing(r, pid, exe, args, pats, npats, npats || others);
		if (!npats && !others) {
			free(pats);
			return 0;
		}
	}
	pr->pid = pid;
	pr->start = proc_stat__read(pid, &st) ? 0 : st.start;
	pr->pidfd = syscall(SYS_pidfd_open, pid, 0);
	if (pr->pidfd < 0) {
		if (errno == ESRCH && !selected)
			fprintf(stderr, "retwatch: no process with PID %d\n", pid);
		else if (errno != ESRCH && !refusal_said(r, pid, selected))
			fprintf(stderr, "retwatch: cannot watch process %d: %s\n", pid,
				strerror(errno));
		goto out;
	}
	pr->libs = shlib_procs__new(pid, (const char *const *)args->patterns, args->npatterns,
				    args->threshold_ns);
	if (!pr->libs) {
		fprintf(stderr, "retwatch: out of memory\n");
		close(pr->pidfd);
		goto out;
	}
	if ((selected || several || !trace_check_exe(r, pid, exe, pats, npats)) &&
	    (pr->target = tracer__add(r->t, pid, exe, pats, npats, args->threshold_ns, &err)) ==
		    NULL &&
	    !refusal_said(r, pid, selected))
		fprintf(stderr, "retwatch: process %d%s: %s\n", pid,
			selected ? " (not traced)" : "", err.msg);
	if (!pr->target) {
		shlib_procs__free(pr->libs);
		close(pr->pidfd);
		goto out;
	}
	r->nprocs++;
	if (results__add(r->results, pr->target, NULL, NULL)) {
		tracer__remove(r->t, pr->target);
		pr->target = NULL;
		fprintf(stderr, "retwatch: out of memory\n");
		goto out;
	}
	r->nlive++;
	/* its files opened now: a slow call read after it exited is still named */
	if (r->stacks)
		symbolizer__watch(r->sym, pid);
	if (selected)
		fprintf(stderr, "retwatch: process %d traced too\n", pid);
	/* at the start, every pattern of a process --pid names must match */
	ret = trace_update_libs(r, pr, !selected) ? -1 : 0;
out:
	if (several)
		free(pats);
	return ret;
}

/* Whether pid, started at start, is traced now or was, or was left out. */
static bool proc_known(const struct trace_run *r, pid_t pid, uint64_t start)
{
	for (size_t i = 0; i < r->nprocs; i++)
		if (r->procs[i].pid == pid && r->procs[i].start == start)
			return true;
	for (size_t i = 0; i < r->nrefused; i++)
		if (r->refused[i].pid == pid && r->refused[i].start == start)
			return true;
	return false;
}

/* A selected process that could not be traced: not asked again. */
static void refuse(struct trace_run *r, pid_t pid, uint64_t start)
{
	if (r->nrefused == r->refused_cap) {
		size_t cap = r->refused_cap * 2 + 16;
		void *more = realloc(r->refused, cap * sizeof(*r->refused));

		if (!more)
			return;
		r->refused = more;
		r->refused_cap = cap;
	}
	r->refused[r->nrefused].pid = pid;
	r->refused[r->nrefused].start = start;
	r->nrefused++;
}

/* Whether a process not traced yet is one --follow, --comm or --cgroup selects. */
static bool proc_selected(const struct trace_args *args, pid_t pid, const struct proc_stat *st)
{
	char cg[4096];

	for (size_t i = 0; i < args->ncomms; i++)
		if (!strcmp(st->comm, args->comms[i]))
			return true;
	if (args->ncgroups && !proctree__cgroup(pid, cg, sizeof(cg)))
		for (size_t i = 0; i < args->ncgroups; i++)
			if (!strcmp(cg, args->cgroups[i]))
				return true;
	return args->follow && proctree__descends(pid, args->pids, args->npids);
}

struct scan_ctx {
	struct trace_run *r;
	const struct trace_args *args;
};

static int scan_one(pid_t pid, void *data)
{
	struct scan_ctx *sc = data;
	struct proc_stat st;

	if (pid == getpid() || proc_stat__read(pid, &st) || proc_known(sc->r, pid, st.start) ||
	    !proc_selected(sc->args, pid, &st))
		return 0;
	if (trace_add_proc(sc->r, pid, sc->args, true))
		refuse(sc->r, pid, st.start);
	return 0;
}

struct kids_ctx {
	pid_t parent;
	dev_t dev;
	ino_t ino;
	size_t n;
};

static int count_kid(pid_t pid, void *data)
{
	struct kids_ctx *k = data;
	struct proc_stat st;
	struct stat exe;
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	if (!proc_stat__read(pid, &st) && st.ppid == k->parent && !stat(path, &exe) &&
	    exe.st_dev == k->dev && exe.st_ino == k->ino)
		k->n++;
	return 0;
}

/*
 * A server that does its work in children running its own executable (a
 * pre-fork server: PostgreSQL, nginx, Apache) counts nothing itself: say
 * so, and what traces them, rather than show a silent 0.
 */
void trace_hint_children(const struct trace_args *args)
{
	for (size_t i = 0; i < args->npids && !args->follow; i++) {
		struct kids_ctx k = { .parent = args->pids[i] };
		struct stat exe;
		char path[64];

		snprintf(path, sizeof(path), "/proc/%d/exe", k.parent);
		if (stat(path, &exe))
			continue;
		k.dev = exe.st_dev;
		k.ino = exe.st_ino;
		proctree__each(count_kid, &k);
		if (k.n)
			fprintf(stderr,
				"retwatch: process %d has %zu child process%s running its executable "
				"(a pre-fork server's workers?), not traced: --follow traces them "
				"too\n",
				k.parent, k.n, k.n == 1 ? "" : "es");
	}
}

/* The processes --follow, --comm or --cgroup select that are not traced yet: traced. */
void trace_scan_procs(struct trace_run *r, const struct trace_args *args)
{
	struct scan_ctx sc = { r, args };

	if (args->follow || args->ncomms || args->ncgroups)
		proctree__each(scan_one, &sc);
}
