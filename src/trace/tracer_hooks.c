// SPDX-License-Identifier: MIT
/*
 * Calls that leave through a hook: a traced native function that ends with
 * a jump through a function pointer (PostgreSQL's ExecutorRun calling the
 * ExecutorRun_hook an extension set, often in another file) returns through
 * the RET of whatever the pointer held. Where each such jump goes is read
 * where it runs (rw_hook, from the jump's operand as the analysis decoded
 * it), sent once per process, function and target, and the RETs of the
 * function there are probed as exits of the call (RW_COOKIE_TAIL: they end
 * it only at the call's entry depth). Calls that jumped before those probes
 * were in stay tail exits: counted, not timed.
 *
 * A hook set anew later (another extension loaded, a hook reset) makes the
 * calls tail exits again: the programs count those entered after the last
 * follow (rw_hooks.missed), and the jump's probe is attached again until it
 * reads the new target (hooks__tick).
 *
 * The target's file is the one mapped at that address in the process
 * (/proc/PID/map_files, never a path a container could redirect); the
 * function must start exactly at the target by the file's own tables, and
 * every RET is vouched an instruction of the file's code (binvouch.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "base/clock.h"
#include "base/procmaps.h"
#include "trace/shlib.h"
#include "trace/tracer_impl.h"
#include "trace/uprobe.h"

_Static_assert(DISASM_HOOK_REG == RW_HOOK_REG && DISASM_HOOK_MEM == RW_HOOK_MEM &&
		       DISASM_REG_IP == RW_REG_IP,
	       "hook sites: the analysis' numbering is the programs'");

/* Slot s's hook jump sites, written to the kernel's map; *ret_offs their file offsets. */
static int hooks__offsets(struct tracer *t, const struct slot *s, uint64_t **ret_offs,
			  size_t *ret_n)
{
	const struct func_info *fi = s->info;
	struct rw_hooks h = { 0 };
	uint64_t *offs;
	size_t n = 0;

	*ret_offs = NULL;
	*ret_n = 0;
	if (!fi->nhooks || (s->meta.flags & RW_FUNC_ENTRY_ONLY))
		return 0;
	offs = calloc(RW_HOOK_SITES, sizeof(*offs));
	if (!offs)
		return -ENOMEM;
	for (size_t k = 0; k < fi->nhooks && n < RW_HOOK_SITES; k++) {
		const struct disasm_hook *d = &fi->hooks[k];
		uint64_t off = fi->file_offset + (uint64_t)d->off;
		bool clash = false;

		/* the program tells sites apart by their offset in the page */
		for (size_t i = 0; i < n; i++)
			clash |= h.site[i].page_off == (off & 0xfff);
		if (clash)
			continue;
		h.site[n] = (struct rw_hook_site){ .page_off = off & 0xfff,
						   .kind = d->kind,
						   .len = d->len,
						   .base = d->base,
						   .index = d->index,
						   .scale = d->scale,
						   .disp = d->disp };
		offs[n++] = off;
	}
	if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.hook_sites), &s->fn_id, &h, BPF_ANY)) {
		/* the map is full: those calls stay tail exits */
		free(offs);
		return 0;
	}
	*ret_offs = offs;
	*ret_n = n;
	return 0;
}

int hooks__attach(struct tracer *t, struct attached_file *f, const struct slot *s, struct batch *b,
		  uint64_t cookie, struct rw_error *err)
{
	uint64_t cookies[RW_HOOK_SITES], *offs;
	size_t n, bad = 0;
	int e = hooks__offsets(t, s, &offs, &n);

	if (e || !n)
		return e ? rw_error_set(err, -e, "out of memory") : 0;
	/* the last word before a probe goes in, as for every other (tracer_slots.c) */
	e = binary__vouch_offsets(f->bin, offs, n, &bad, err);
	for (size_t i = 0; !e && i < n; i++)
		cookies[i] = cookie;
	if (!e)
		e = uprobe_attach_pid(&b->hook, bpf_program__fd(t->skel->progs.rw_hook), t->multi,
				      f->path, offs, cookies, n, b->pid, err);
	free(offs);
	return e;
}

void hooks__forget(struct tracer *t, uint32_t fn_id)
{
	bpf_map_delete_elem(bpf_map__fd(t->skel->maps.hook_sites), &fn_id);
}

void hook_exits__free(struct batch *b)
{
	while (b->exits) {
		struct hook_exit *x = b->exits;

		b->exits = x->next;
		uprobe_links__close(&x->links);
		free(x);
	}
}

/* The slot of function slot fn_id, and its file; NULL when it is gone. */
static struct slot *slot_of(struct tracer *t, uint32_t fn_id, struct attached_file **ret_f)
{
	for (struct attached_file *f = t->files; f; f = f->next)
		for (size_t i = 0; i < f->nslots; i++)
			if (f->slots[i]->fn_id == fn_id) {
				*ret_f = f;
				return f->slots[i];
			}
	return NULL;
}

/* The batch a hit of slot s in process tgid counts by; NULL when none (not traced). */
static struct batch *batch_of(struct slot *s, pid_t tgid)
{
	if (s->meta.flags & RW_FUNC_SHARED)
		return s->shared;
	for (struct batch *b = s->pids; b; b = b->next)
		if (b->pid == tgid && b->has_hist)
			return b;
	return NULL;
}

/*
 * The file mapped, executable, at addr in process pid, opened as the
 * process sees it (shlib__open: its mapping, or its path inside the
 * process's root, checked to be the inode mapped), with addr's offset in
 * it and its name. The fd, or -errno.
 */
static int mapped_file(pid_t pid, uint64_t addr, uint64_t *ret_off, char *name, size_t size)
{
	struct procmaps *maps = procmaps__load(pid, NULL);
	const struct procmap *m = maps ? procmaps__find(maps, addr) : NULL;
	int fd = m ? shlib__open_map(pid, m, NULL, NULL) : -ENOENT;

	if (fd >= 0) {
		*ret_off = addr - m->start + m->offset;
		snprintf(name, size, "%s", m->path);
	}
	procmaps__free(maps);
	return fd;
}

/* A hook exit of b at the function entered at file offset off of the file fd has open. */
static struct hook_exit *exit_find(struct batch *b, const struct stat *st, uint64_t off)
{
	for (struct hook_exit *x = b->exits; x; x = x->next)
		if (x->dev == st->st_dev && x->ino == st->st_ino && x->offset == off)
			return x;
	return NULL;
}

/* Probes the RETs of g (in bin, open as fd) as exits of slot s's calls in batch b. */
static int exit_attach(struct tracer *t, struct slot *s, struct batch *b, struct binary *bin,
		       int fd, const struct stat *st, const struct func_info *g,
		       struct rw_error *err)
{
	uint64_t cookie = batch__cookie(s, b, RW_COOKIE_TAIL);
	uint64_t *offs = calloc(g->nreturns, sizeof(*offs)), *cookies;
	struct hook_exit *x = calloc(1, sizeof(*x));
	char path[64];
	size_t bad = 0;
	int e;

	cookies = calloc(g->nreturns, sizeof(*cookies));
	if (!offs || !x || !cookies) {
		e = rw_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t k = 0; k < g->nreturns; k++) {
		offs[k] = g->file_offset + (uint64_t)g->returns[k];
		cookies[k] = cookie;
	}
	e = binary__vouch_offsets(bin, offs, g->nreturns, &bad, err);
	if (e)
		goto out;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	uprobe_links__init(&x->links);
	e = uprobe_attach_pid(&x->links, bpf_program__fd(t->skel->progs.rw_ret), t->multi, path,
			      offs, cookies, g->nreturns, b->pid, err);
	if (e)
		goto out;
	x->dev = st->st_dev;
	x->ino = st->st_ino;
	x->offset = g->file_offset;
	x->next = b->exits;
	b->exits = x;
	x = NULL;
out:
	free(x);
	free(offs);
	free(cookies);
	return e;
}

/* How often a slot's hook probes are attached again, at most, for calls gone elsewhere. */
#define HOOK_REARMS 8
/* How long they stay attached again while reading no new target. */
#define HOOK_REARMED_NS (NS_PER_S / 2)
/* How often rw_hooks.missed is looked at. */
#define HOOK_CHECK_NS (NS_PER_S / 5)

static bool hook__attached(const struct uprobe_links *l)
{
	return l->multi_fd >= 0 || l->n;
}

/*
 * Slot s's hook probes in batch b go: the programs count the calls entered
 * from now on that still leave as tail exits (rw_hooks.missed).
 */
static void hook__close(struct tracer *t, struct slot *s, struct batch *b)
{
	int fd = bpf_map__fd(t->skel->maps.hook_sites);
	struct rw_hooks h;

	uprobe_links__close(&b->hook);
	b->hook_rearmed_ns = 0;
	if (bpf_map_lookup_elem(fd, &s->fn_id, &h))
		return;
	/* after the close: a call entered later that still leaves as a tail exit jumped elsewhere */
	h.followed_ns = clock__mono_ns();
	s->hook_missed = h.missed;
	bpf_map_update_elem(fd, &s->fn_id, &h, BPF_EXIST);
}

/* Where a call of s in tgid went through its hook: that function's RETs end such calls. */
static void follow_target(struct tracer *t, struct slot *s, struct batch *b,
			  const struct rw_hook_event *ev)
{
	struct rw_error err = { "" };
	const struct func_info *g;
	struct binary *bin = NULL;
	char path[64], name[256] = "", gname[64];
	uint64_t off = 0, vaddr;
	struct stat st;
	int fd, e;

	/* the lender (a short-lived child may be gone), else the child */
	fd = mapped_file((pid_t)ev->k.tgid, ev->k.target, &off, name, sizeof(name));
	if (fd < 0 && ev->tgid != ev->k.tgid)
		fd = mapped_file((pid_t)ev->tgid, ev->k.target, &off, name, sizeof(name));
	if (fd < 0)
		return; /* gone, or not code: the calls stay tail exits */
	if (fstat(fd, &st))
		goto out;
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	bin = binary__open(t->cache, path, &err);
	if (!bin || binary__offset_to_addr(bin, off, &vaddr))
		goto out;
	g = binary__entry_at(bin, vaddr);
	/* a jump within the function (a switch table not read as one) */
	if (!g || (g == s->info) || exit_find(b, &st, g->file_offset))
		goto out;
	e = exit_attach(t, s, b, bin, fd, &st, g, &err);
	/*
	 * Followed: the jump's probe goes, a trap each call (7 us here) that
	 * would be inside every duration. A hook set once stays; calls to
	 * another target set later are tail exits, and say so.
	 */
	if (!e)
		hook__close(t, s, b);
	/* a function without a symbol (a stripped file's static one): where it is */
	if (g->name[0] == '(')
		snprintf(gname, sizeof(gname), "the function at 0x%" PRIx64, g->file_offset);
	if (t->hook_fn)
		t->hook_fn(s->info->name, g->name[0] == '(' ? gname : g->name, name, g->nreturns,
			   e ? err.msg : NULL, t->hook_ctx);
out:
	binary__put(bin);
	close(fd);
}

int hooks__on_target(void *ctx, void *data, size_t len)
{
	const struct rw_hook_event *ev = data;
	struct tracer *t = ctx;
	struct attached_file *f;
	struct batch *b;
	struct slot *s;

	if (len < sizeof(*ev))
		return 0;
	s = slot_of(t, ev->k.fn_id, &f);
	b = s ? batch_of(s, (pid_t)ev->k.tgid) : NULL;
	if (b)
		follow_target(t, s, b, ev);
	return 0;
}

/* Attaches s's hook probes in b again, or closes them when attached again for long enough. */
static void hook__check(struct tracer *t, struct attached_file *f, struct slot *s, struct batch *b,
			bool missed, uint64_t now)
{
	struct rw_error err = { "" };

	/* followed at least once: else its probes are still attached, or never were */
	if (!b || !b->exits)
		return;
	if (hook__attached(&b->hook)) {
		if (b->hook_rearmed_ns && now - b->hook_rearmed_ns >= HOOK_REARMED_NS)
			hook__close(t, s, b);
		return;
	}
	if (!missed)
		return;
	if (hooks__attach(t, f, s, b, batch__cookie(s, b, 0), &err))
		return; /* the calls stay tail exits, as before */
	b->hook_rearmed_ns = now ? now : 1;
}

void hooks__tick(struct tracer *t, uint64_t now)
{
	int fd = bpf_map__fd(t->skel->maps.hook_sites);

	if (now < t->hook_check_ns)
		return;
	t->hook_check_ns = now + HOOK_CHECK_NS;
	for (struct attached_file *f = t->files; f; f = f->next) {
		for (size_t i = 0; i < f->nslots; i++) {
			struct slot *s = f->slots[i];
			struct rw_hooks h;
			bool missed;

			if (!s->info->nhooks || bpf_map_lookup_elem(fd, &s->fn_id, &h))
				continue;
			missed = h.missed > s->hook_missed && s->hook_rearms < HOOK_REARMS;
			if (missed) {
				s->hook_missed = h.missed;
				s->hook_rearms++;
			}
			/* shared, the batches' probes do not count */
			if (s->meta.flags & RW_FUNC_SHARED)
				hook__check(t, f, s, s->shared, missed, now);
			else
				for (struct batch *b = s->pids; b; b = b->next)
					hook__check(t, f, s, b, missed, now);
		}
	}
}
