// SPDX-License-Identifier: MIT
/*
 * Processes followed from their fork (tracer_opts.follow): each traced
 * process is a lender in the follow map, and the kernel's fork program
 * adds each process it forks, lent its histograms (struct rw_follow) until
 * the caller traces the child itself. Entries of children the caller never
 * traced (they ended first) are swept here.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include "base/cgroup.h"
#include "base/log.h"
#include "trace/tracer_impl.h"

static bool pid_traced(const struct tracer *t, uint32_t pid)
{
	for (const struct tracer_target *tt = t->targets; tt; tt = tt->next)
		if ((uint32_t)tt->pid == pid)
			return true;
	return false;
}

/* pid's start time as the map holds it: 0 where the clocks do not agree. */
static int follow__starttime(const struct tracer *t, pid_t pid, __u64 *ret)
{
	uint64_t st = 0;
	int e = t->starttimes ? cgroup__pid_starttime("/proc", pid, &st) : 0;

	*ret = st;
	return e;
}

/* Whether the map's entry f is process pid's now, not an earlier holder's of its pid. */
static bool follow__current(const struct tracer *t, pid_t pid, const struct rw_follow *f)
{
	__u64 st;

	if (follow__starttime(t, pid, &st))
		return false;
	return !f->starttime || f->starttime == st;
}

int follow__start(struct tracer *t, struct rw_error *err)
{
	struct bpf_link *l = bpf_program__attach(t->skel->progs.rw_fork);

	if (!l)
		return rw_error_set(err, errno,
				    "cannot follow processes from their fork (the "
				    "sched_process_fork tracepoint): %s",
				    strerror(errno));
	bpf_link__destroy(l);
	return 0;
}

void follow__add(struct tracer *t, pid_t pid)
{
	int fd = bpf_map__fd(t->skel->maps.follow);
	struct rw_follow f = { .lender = (uint32_t)pid };
	uint32_t key = (uint32_t)pid;
	struct rw_follow had;

	if (!t->follow)
		return;
	if (!t->fork_link && !(t->fork_link = bpf_program__attach(t->skel->progs.rw_fork)))
		log_warn("cannot follow the processes %d forks (the sched_process_fork "
			 "tracepoint): %s",
			 (int)pid, strerror(errno));
	/* without it, children that ran another program count as unprobed workers */
	if (!t->exec_link)
		t->exec_link = bpf_program__attach(t->skel->progs.rw_exec);
	/* forked by a followed process: it keeps its lender, so that its calls
	 * begun in the lender's histograms end there */
	if (!bpf_map_lookup_elem(fd, &key, &had) && had.lender != key &&
	    pid_traced(t, had.lender) && follow__current(t, pid, &had)) {
		had.flags |= RW_FOLLOW_TRACED;
		bpf_map_update_elem(fd, &key, &had, BPF_EXIST);
		return;
	}
	if (follow__starttime(t, pid, &f.starttime))
		return;
	bpf_map_update_elem(fd, &key, &f, BPF_ANY);
}

void follow__drop(struct tracer *t, pid_t pid)
{
	uint32_t key = (uint32_t)pid;

	if (!t->follow)
		return;
	bpf_map_delete_elem(bpf_map__fd(t->skel->maps.follow), &key);
	/* tracing nothing, it holds nothing in the kernel */
	if (!t->targets) {
		bpf_link__destroy(t->fork_link);
		bpf_link__destroy(t->exec_link);
		t->fork_link = t->exec_link = NULL;
	}
}

pid_t follow__lender_of(const struct tracer *t, pid_t pid)
{
	uint32_t key = (uint32_t)pid;
	struct rw_follow f;

	if (!t->follow || bpf_map_lookup_elem(bpf_map__fd(t->skel->maps.follow), &key, &f) ||
	    f.lender == key || !follow__current(t, pid, &f))
		return 0;
	return (pid_t)f.lender;
}

/*
 * Whether the calls of process pid's children were counted from their fork:
 * each of its functions' probes is shared (a per-process probe is not
 * inherited: its program does not run in the child).
 */
static bool follow__counted(const struct tracer *t, pid_t pid)
{
	for (const struct tracer_target *tt = t->targets; tt; tt = tt->next)
		for (size_t i = 0; tt->pid == pid && i < tt->nfuncs; i++)
			if (tt->slots[i] && !(tt->slots[i]->meta.flags & RW_FUNC_SHARED))
				return false;
	return true;
}

/* Child of f's lender, never traced on its own, ended: counted if its calls were not. */
static void follow__count_unprobed(struct tracer *t, const struct rw_follow *f)
{
	struct tracer_target *tt = t->targets;

	if (f->flags & (RW_FOLLOW_TRACED | RW_FOLLOW_EXECED) ||
	    follow__counted(t, (pid_t)f->lender))
		return;
	while (tt && (uint32_t)tt->pid != f->lender)
		tt = tt->next;
	if (tt)
		tt->children_unprobed++;
}

size_t follow__retire_gone(struct tracer *t, uint32_t **ret)
{
	int fd = bpf_map__fd(t->skel->maps.follow);
	uint32_t key, next, *prev = NULL, *doomed = NULL;
	size_t ndoomed = 0, cap = 0;
	struct rw_follow f;

	*ret = NULL;
	if (!t->follow)
		return 0;
	/* deleting while walking would restart the walk: collect first */
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &f) || pid_traced(t, key) ||
		    (pid_traced(t, f.lender) && follow__current(t, (pid_t)key, &f)))
			continue;
		if (ndoomed == cap) {
			uint32_t *more = realloc(doomed, (cap * 2 + 16) * sizeof(*more));

			if (!more)
				break;
			doomed = more;
			cap = cap * 2 + 16;
		}
		doomed[ndoomed++] = key;
		/* its lender still traced: it ended */
		if (f.lender != key && pid_traced(t, f.lender))
			follow__count_unprobed(t, &f);
	}
	for (size_t i = 0; i < ndoomed; i++)
		pid__retire(t, (pid_t)doomed[i]);
	*ret = doomed;
	return ndoomed;
}

void follow__forget(struct tracer *t, uint32_t *gone, size_t n)
{
	for (size_t i = 0; i < n; i++)
		bpf_map_delete_elem(bpf_map__fd(t->skel->maps.follow), &gone[i]);
	free(gone);
}
