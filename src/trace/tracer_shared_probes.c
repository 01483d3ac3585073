// SPDX-License-Identifier: MIT
/*
 * Shared probes: one link per function for every process of a file, where
 * every process running the file is traced for the function (or about to
 * be), else each traced process's own; checked again every turn.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "base/clock.h"
#include "trace/exeprocs.h"
#include "trace/tracer_impl.h"
#include "trace/uprobe.h"

/*
 * Whether each function's probes should be shared by every process of its
 * file, or each traced process's own, is checked this often: a process of
 * the file that is not traced (another namespace's pod of the same image)
 * traps on shared probes until then.
 */
#define SHARE_CHECK_EVERY_NS (1 * NS_PER_S)
/* A decision at attach time trusts a list of the node's processes this old. */
#define SHARE_SCAN_FRESH_NS (NS_PER_S / 2)
/*
 * A process of the file not traced for a function keeps its probes shared
 * this long: while it is about to be (the agent attaches a probe's pods a
 * few at a time; a new replica of the same namespace starts), or was just
 * (a probe being deleted). Only for processes the caller says are of the
 * same tenant (tracer_opts.tenant_of) or does not know yet (a pod just
 * started), or that were traced for it.
 */
#define SHARE_GRACE_NS (10 * NS_PER_S)
/* ... and a process that stopped being traced for it, this long. */
#define SHARE_DROP_GRACE_NS (2 * NS_PER_S)
/* Changes between shared and per-process probes stop for the turn after this long. */
#define SHARE_CHANGE_BUDGET_NS (NS_PER_S / 10)

/* The node's processes by executable, listed again when older than max_age_ns. */
static void exe__refresh(struct tracer *t, uint64_t max_age_ns)
{
	uint64_t now = clock__mono_ns();

	if (t->exe.scanned_ns && now - t->exe.scanned_ns < max_age_ns)
		return;
	exeprocs__scan(&t->exe, "/proc", now);
}

/* The list, fresh enough to decide on process pid's functions, and with it. */
void exe__refresh_for(struct tracer *t, pid_t pid)
{
	exe__refresh(t, SHARE_SCAN_FRESH_NS);
	/* not listed, or listed as the process that had its pid before */
	if (!exeprocs__current(&t->exe, "/proc", pid))
		exe__refresh(t, 0);
}

/*
 * Whether process e runs file f. A container's executable is seen through
 * its overlay mount (a device of its own, major 0), with the inode number
 * of the layer's file beneath when the layers share a filesystem, as the
 * runtimes' snapshots do; f is that layer's file. Another file with the
 * same inode number on another anonymous device is taken for f too: that
 * only keeps probes per process.
 */
bool exe__is(const struct exeproc *e, const struct attached_file *f)
{
	return e->ino == f->ino && (e->dev == f->dev || !major(e->dev));
}

/* Whether process m, which runs s's file and is not traced for s, may trap on s's shared probes for now. */
static bool slot__graced(const struct tracer *t, const struct slot *s, const struct exeproc *m,
			 uint64_t now)
{
	uint64_t since = m->first_ns > s->made_ns ? m->first_ns : s->made_ns;
	const char *tenant;

	/* forked by a process traced for s: counted in its histograms */
	if (slot__batch(s, follow__lender_of(t, m->pid)))
		return true;
	/* it was traced for s a moment ago: a probe is being deleted */
	for (size_t k = 0; k < s->ndropped; k++)
		if (s->dropped[k].pid == m->pid &&
		    (!s->dropped[k].starttime || s->dropped[k].starttime == m->starttime) &&
		    now - s->dropped[k].ns < SHARE_DROP_GRACE_NS)
			return true;
	if (!t->tenant_of || now - since >= SHARE_GRACE_NS)
		return false;
	/* new, or the function is: its tenant's, about to be traced for it */
	tenant = t->tenant_of(m->pid, t->tenant_ctx);
	/* a process just started may not be known to the caller yet */
	if (!tenant)
		return now - m->first_ns < SHARE_GRACE_NS;
	for (const struct batch *b = s->pids; *tenant && b; b = b->next) {
		const char *name = share__name_of(t, b->pid);

		if (name && !strcmp(name, tenant))
			return true;
	}
	return false;
}

/*
 * Whether s's probes may be one attachment for every process mapping its
 * file: the file is the executable of each process traced for s, and every
 * process running it is traced for s (or about to be: slot__graced), at
 * least two of them, or one whose children are followed. A library (libc)
 * is never shared: who maps it is not known without reading every
 * process's mappings.
 */
bool slot__shareable(const struct tracer *t, const struct attached_file *f, const struct slot *s,
		     uint64_t now)
{
	size_t running = 0;

	for (const struct batch *b = s->pids; b; b = b->next) {
		const struct exeproc *e = exeprocs__find(&t->exe, b->pid);

		/* not listed: gone since (its target goes soon), or newer than the list */
		if (e && !exe__is(e, f))
			return false;
	}
	for (size_t i = 0; i < t->exe.n; i++) {
		const struct exeproc *m = &t->exe.procs[i];

		if (!exe__is(m, f))
			continue;
		if (!slot__batch(s, m->pid) && !slot__graced(t, s, m, now)) {
			/* a pre-fork server's worker of a millisecond ends between
			 * the scan and the check of its lender (whose start time
			 * can no longer be read), and traps on nothing */
			if (exeprocs__gone("/proc", m->pid))
				continue;
			return false;
		}
		running++;
	}
	/*
	 * One process shares nothing, but one whose children are followed
	 * (tracer_opts.follow) needs the shared probes: a child forked after
	 * its last scan traps on them alone, counted from its fork in its
	 * lender's histograms, which per-process probes never do.
	 */
	return running >= 2 || (t->follow && running == 1);
}

/* s's probes become one attachment for every process; its batches' links close. */
int slot__share(struct tracer *t, struct attached_file *f, struct slot *s, struct rw_error *err)
{
	struct batch *sh = calloc(1, sizeof(*sh));
	int e;

	if (!sh)
		return rw_error_set(err, ENOMEM, "out of memory");
	uprobe_links__init(&sh->entry);
	uprobe_links__init(&sh->ret);
	uprobe_links__init(&sh->uret);
	uprobe_links__init(&sh->hook);
	sh->pid = -1;
	e = batch__attach(t, f, s, sh, err);
	if (e) {
		batch__free(t, sh);
		return e;
	}
	/* from here on the shared probes count, the batches' not: each hit once */
	s->meta.flags |= RW_FUNC_SHARED;
	e = slot__write(t, s);
	if (e) {
		s->meta.flags &= ~RW_FUNC_SHARED;
		batch__free(t, sh);
		return rw_error_set(err, -e, "failed to store a function slot: %s", strerror(-e));
	}
	s->shared = sh;
	for (struct batch *b = s->pids; b; b = b->next) {
		uprobe_links__close(&b->entry);
		uprobe_links__close(&b->ret);
		uprobe_links__close(&b->uret);
	}
	t->share_changes++;
	return 0;
}

/* s's probes become each traced process's own again; the shared ones close. */
int slot__unshare(struct tracer *t, struct attached_file *f, struct slot *s, struct rw_error *err)
{
	int e = 0;

	for (struct batch *b = s->pids; !e && b; b = b->next)
		if (!batch__attached(b))
			e = batch__attach(t, f, s, b, err);
	if (!e) {
		s->meta.flags &= ~RW_FUNC_SHARED;
		e = slot__write(t, s);
		if (e)
			rw_error_set(err, -e, "failed to store a function slot: %s", strerror(-e));
	}
	if (e) {
		/* still shared: the batches' links would count nothing */
		s->meta.flags |= RW_FUNC_SHARED;
		for (struct batch *b = s->pids; b; b = b->next) {
			uprobe_links__close(&b->entry);
			uprobe_links__close(&b->ret);
			uprobe_links__close(&b->uret);
		}
		return e;
	}
	batch__free(t, s->shared);
	s->shared = NULL;
	t->share_changes++;
	return 0;
}

/* Drops the graces that have run out. */
static void slot__prune_dropped(struct slot *s, uint64_t now)
{
	for (size_t i = 0; i < s->ndropped;)
		if (now - s->dropped[i].ns >= SHARE_DROP_GRACE_NS)
			s->dropped[i] = s->dropped[--s->ndropped];
		else
			i++;
}

/*
 * Every SHARE_CHECK_EVERY_NS: each function's probes shared where every
 * process running its file is traced for it, each process's own where not
 * (a process of the file that is not traced appeared, or one stopped being
 * traced), within SHARE_CHANGE_BUDGET_NS a turn.
 */
void share__check(struct tracer *t, uint64_t now)
{
	uint64_t deadline = now + SHARE_CHANGE_BUDGET_NS;

	if (now < t->next_share_check_ns || !t->files)
		return;
	t->next_share_check_ns = now + SHARE_CHECK_EVERY_NS;
	exe__refresh(t, 0);
	for (struct attached_file *f = t->files; f; f = f->next) {
		for (size_t i = 0; i < f->nslots && clock__mono_ns() < deadline; i++) {
			struct slot *s = f->slots[i];
			bool want;

			slot__prune_dropped(s, now);
			want = slot__shareable(t, f, s, now);
			if (want == !!s->shared)
				continue;
			if (want ? slot__share(t, f, s, NULL) : slot__unshare(t, f, s, NULL))
				t->share_change_failures++;
		}
		file__sync_morestack(t, f);
	}
}
