// SPDX-License-Identifier: MIT
/*
 * Processes followed from their fork (tracer_opts.follow): each traced
 * process is a lender in the follow map, and the kernel's fork program
 * adds each process it forks, lent its histograms (struct rw_follow) until
 * the caller traces the child itself. Where tracer_opts.follow_started
 * asks, a process that starts anew in a traced process's cgroup, running
 * its executable, is lent its histograms too (the exec program, by
 * exec_lend). Entries of children the caller never traced (they ended
 * first) are swept here.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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

/*
 * Process pid's cgroup and executable as the kernel knows them: the
 * rw_task_key iterator over its threads (over every thread of the node
 * before 6.1, whose kernel cannot be asked for one process's: its record is
 * looked for).
 * 0 (all 0 where it has no address space), or -errno.
 */
static int exec_key__read(struct tracer *t, pid_t pid, struct rw_exec_key *ret)
{
	union bpf_iter_link_info li = { .task.pid = (__u32)pid };
	LIBBPF_OPTS(bpf_iter_attach_opts, o, .link_info = &li, .link_info_len = sizeof(li));
	struct bpf_link *l = bpf_program__attach_iter(t->skel->progs.rw_task_key, &o);
	struct rw_task_key r[64];
	int fd, e = 0;
	ssize_t n;

	memset(ret, 0, sizeof(*ret));
	/* a kernel before 6.1 knows no task.pid (E2BIG): every thread, then */
	if (!l && errno == E2BIG)
		l = bpf_program__attach_iter(t->skel->progs.rw_task_key, NULL);
	if (!l)
		return -errno;
	fd = bpf_iter_create(bpf_link__fd(l));
	if (fd < 0) {
		e = -errno;
		goto out;
	}
	/* reads of a multiple of the record size: the records stay whole */
	while ((n = read(fd, r, sizeof(r))) > 0)
		for (size_t i = 0; i < (size_t)n / sizeof(r[0]); i++)
			if (r[i].tgid == (uint32_t)pid) {
				*ret = r[i].k;
				goto done;
			}
	if (n < 0)
		e = -errno;
done:
	close(fd);
out:
	bpf_link__destroy(l);
	return e;
}

/* Lends tt's histograms to the processes started beside it, unless another traced process does. */
static void follow__lend_started(struct tracer *t, struct tracer_target *tt)
{
	int fd = bpf_map__fd(t->skel->maps.exec_lend), e;
	uint32_t pid = (uint32_t)tt->pid, had;

	for (const struct tracer_target *o = t->targets; o; o = o->next)
		if (o != tt && o->pid == tt->pid && o->exec_key.exe) {
			tt->exec_key = o->exec_key;
			return;
		}
	e = exec_key__read(t, tt->pid, &tt->exec_key);
	if (e) {
		if (e != -ESRCH && e != -ENOENT) {
			log_warn("processes started anew beside a traced one are counted only once "
				 "found in /proc: cannot read process %d's cgroup and executable "
				 "(a task iterator): %s",
				 (int)tt->pid, strerror(-e));
			t->follow_started = false;
		}
		return;
	}
	if (!tt->exec_key.exe ||
	    (!bpf_map_lookup_elem(fd, &tt->exec_key, &had) && pid_traced(t, had)))
		return;
	bpf_map_update_elem(fd, &tt->exec_key, &pid, BPF_ANY);
}

/* tt's process, traced no more, lends to no process started beside it: another traced one there does. */
static void follow__unlend_started(struct tracer *t, const struct tracer_target *tt)
{
	int fd = bpf_map__fd(t->skel->maps.exec_lend);
	uint32_t had;

	if (!tt->exec_key.exe || bpf_map_lookup_elem(fd, &tt->exec_key, &had) ||
	    had != (uint32_t)tt->pid)
		return;
	for (const struct tracer_target *o = t->targets; o; o = o->next)
		if (o->pid != tt->pid &&
		    !memcmp(&o->exec_key, &tt->exec_key, sizeof(o->exec_key))) {
			had = (uint32_t)o->pid;
			bpf_map_update_elem(fd, &tt->exec_key, &had, BPF_ANY);
			return;
		}
	bpf_map_delete_elem(fd, &tt->exec_key);
}

void follow__add(struct tracer *t, struct tracer_target *tt)
{
	int fd = bpf_map__fd(t->skel->maps.follow);
	pid_t pid = tt->pid;
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
	if (t->follow_started)
		follow__lend_started(t, tt);
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

void follow__drop(struct tracer *t, struct tracer_target *tt)
{
	uint32_t key = (uint32_t)tt->pid;

	if (!t->follow)
		return;
	follow__unlend_started(t, tt);
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
 * Whether the calls of tt's process's children in tt's file were counted
 * from their start: each of its functions' probes is shared (a per-process
 * probe is not inherited: its program does not run in the child).
 */
static bool follow__counted(const struct tracer_target *tt)
{
	for (size_t i = 0; i < tt->nfuncs; i++)
		if (tt->slots[i] && !(tt->slots[i]->meta.flags & RW_FUNC_SHARED))
			return false;
	return true;
}

/* Child of f's lender, never traced on its own, ended: counted if its calls were not. */
static void follow__count_unprobed(struct tracer *t, const struct rw_follow *f)
{
	if (f->flags & (RW_FOLLOW_TRACED | RW_FOLLOW_EXECED | RW_FOLLOW_SAID))
		return;
	/* any of the lender's targets (its executable, its libraries) */
	for (struct tracer_target *tt = t->targets; tt; tt = tt->next)
		if ((uint32_t)tt->pid == f->lender && !follow__counted(tt)) {
			tt->children_unprobed++;
			return;
		}
}

void tracer__count_children(struct tracer *t, struct tracer_target *tt)
{
	int fd = bpf_map__fd(t->skel->maps.follow);
	uint32_t key, next, *prev = NULL;
	struct rw_follow f;

	if (!t->follow || follow__counted(tt))
		return;
	while (!bpf_map_get_next_key(fd, prev, &next)) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &f) || f.lender != (uint32_t)tt->pid ||
		    key == f.lender ||
		    f.flags & (RW_FOLLOW_TRACED | RW_FOLLOW_EXECED | RW_FOLLOW_SAID) ||
		    follow__current(t, (pid_t)key, &f))
			continue;
		tt->children_unprobed++;
		/* the sweep retires it, not counted again */
		f.flags |= RW_FOLLOW_SAID;
		bpf_map_update_elem(fd, &key, &f, BPF_EXIST);
	}
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
