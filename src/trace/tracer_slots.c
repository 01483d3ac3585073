// SPDX-License-Identifier: MIT
/*
 * The files the tracer has probes in and their function slots: each slot's
 * probes, a batch per traced process (or one shared batch, see
 * tracer_shared_probes.c), Go's runtime.morestack marker, and a target's
 * slots attached, used and given back.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/types.h>

#include "base/clock.h"
#include "trace/exeprocs.h"
#include "trace/tracer_impl.h"
#include "trace/uprobe.h"

#define MORESTACK "runtime.morestack"

void batch__free(struct tracer *t, struct batch *b)
{
	if (!b)
		return;
	uprobe_links__close(&b->entry);
	uprobe_links__close(&b->ret);
	uprobe_links__close(&b->uret);
	uprobe_links__close(&b->hook);
	hook_exits__free(b);
	if (b->has_hist) {
		struct rw_hist_key k = { .fn_id = b->fn_id, .tgid = (uint32_t)b->pid };

		bpf_map_delete_elem(bpf_map__fd(t->skel->maps.proc_hists), &k);
		hist_slot__release(t, b->hist);
	}
	free(b);
}

void file__free(struct tracer *t, struct attached_file *f)
{
	if (!f)
		return;
	while (f->morestack) {
		struct batch *b = f->morestack;

		f->morestack = b->next;
		batch__free(t, b);
	}
	batch__free(t, f->morestack_shared);
	for (size_t i = 0; i < f->nslots; i++) {
		while (f->slots[i]->pids) {
			struct batch *b = f->slots[i]->pids;

			f->slots[i]->pids = b->next;
			batch__free(t, b);
		}
		batch__free(t, f->slots[i]->shared);
		free(f->slots[i]->dropped);
		free(f->slots[i]);
	}
	free(f->slots);
	inline__free(f);
	binary__put(f->bin);
	free(f->name);
	if (f->fd >= 0)
		close(f->fd);
	free(f);
}

/* ---- function slots ---- */

int slot__write(struct tracer *t, const struct slot *s)
{
	return bpf_map_update_elem(bpf_map__fd(t->skel->maps.funcs), &s->fn_id, &s->meta, BPF_ANY)
		       ? -errno
		       : 0;
}

struct slot *file__find_slot(struct attached_file *f, uint64_t address)
{
	for (size_t i = 0; i < f->nslots; i++)
		if (f->slots[i]->address == address)
			return f->slots[i];
	return NULL;
}

/* ---- Go ---- */

/*
 * R14 holds g from Go 1.17 (the register ABI) on. Where the binary does not
 * say its version, the stack-bounds check in BPF still guards the key.
 */
static int go_minor(const struct binary *b)
{
	const char *v = binary__go_version(b);
	int major, minor;

	if (!v || sscanf(v, "go%d.%d", &major, &minor) != 2 || major != 1)
		return -1;
	return minor;
}

/* Offset of runtime.g.goid (see docs/design.md, section 5); 0 when unknown. */
static uint32_t goid_offset(int minor)
{
	if (minor < 17)
		return 0;
	return (minor == 23 || minor == 24) ? 160 : 152;
}

static bool func_uses_go_key(const struct binary *b, const struct func_info *fi)
{
	int minor;

	if (!binary__is_go(b) || !fi->go)
		return false;
	minor = go_minor(b);
	return minor < 0 || minor >= 17;
}

/* ---- attach ---- */

int file__open(struct tracer *t, pid_t pid, const char *path, struct attached_file **ret,
	       struct rw_error *err)
{
	struct attached_file *f;
	char fd_path[64], origin[64];
	const char *origin_name;
	struct binary *bin;
	struct stat st;
	int fd, e;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return rw_error_set(err, errno, "failed to open %s: %s", path, strerror(errno));
	if (fstat(fd, &st)) {
		e = rw_error_set(err, errno, "failed to stat %s: %s", path, strerror(errno));
		close(fd);
		return e;
	}
	/* The kernel resolves this to the inode we opened, whatever the path now names. */
	snprintf(fd_path, sizeof(fd_path), "/proc/self/fd/%d", fd);
	/*
	 * One attached file per file and view: processes of one executable
	 * that see different debug files (binary.h) get their own analysis,
	 * and their probes are their own.
	 */
	origin_name = exeprocs__origin(pid, &st, origin, sizeof(origin));
	bin = binary__open_as(t->cache, fd_path, origin_name ? origin_name : path, err);
	if (!bin) {
		e = -errno;
		/* say which file, not our descriptor */
		char msg[sizeof(err->msg)];

		if (err) {
			snprintf(msg, sizeof(msg), "%s", err->msg);
			rw_error_set(err, -e, "%s: %s", path, msg);
		}
		close(fd);
		return e;
	}
	for (f = t->files; f; f = f->next) {
		if (f->dev == st.st_dev && f->ino == st.st_ino && f->bin == bin) {
			binary__put(bin);
			close(fd);
			*ret = f;
			return 0;
		}
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		binary__put(bin);
		close(fd);
		return rw_error_set(err, ENOMEM, "out of memory");
	}
	f->dev = st.st_dev;
	f->ino = st.st_ino;
	f->fd = fd;
	f->bin = bin;
	f->name = strdup(path);
	snprintf(f->path, sizeof(f->path), "%s", fd_path);
	f->next = t->files;
	t->files = f;
	*ret = f;
	return 0;
}

void file__drop(struct tracer *t, struct attached_file *f)
{
	struct attached_file **p;

	for (p = &t->files; *p; p = &(*p)->next) {
		if (*p == f) {
			*p = f->next;
			file__free(t, f);
			return;
		}
	}
}

/* The cookie of a probe of function slot fn_id, histogram slot hist, in process pid (bpf/retwatch.h). */
uint64_t cookie__make(uint32_t fn_id, uint32_t hist, pid_t pid, uint64_t flags)
{
	return fn_id | (uint64_t)hist << RW_COOKIE_HIST_SHIFT | flags |
	       (uint64_t)(uint32_t)pid << RW_COOKIE_TGID_SHIFT;
}

uint64_t batch__cookie(const struct slot *s, const struct batch *b, uint64_t flags)
{
	return b->pid < 0 ? s->fn_id | RW_COOKIE_SHARED | flags
			  : cookie__make(s->fn_id, b->hist, b->pid, flags);
}

/*
 * The last word before a probe goes in: each of offs (file offsets) is an
 * instruction of the file's own code (binary__vouch), whichever table
 * derived it. A breakpoint anywhere else changes the instruction it lands
 * in: the program would run on and compute something else.
 */
static int vouch(struct attached_file *f, const char *name, const uint64_t *offs, size_t n,
		 struct rw_error *err)
{
	struct rw_error why = { "" };
	size_t bad = 0;
	int e = binary__vouch_offsets(f->bin, offs, n, &bad, &why);

	if (e == -ENOMEM)
		return rw_error_set(err, ENOMEM, "out of memory");
	if (e)
		return rw_error_set(
			err, -e,
			"cannot trace %s in %s: its probe at file offset 0x%llx would not "
			"be on an instruction of the file's own code (%s): nothing was "
			"attached, since a probe there would change what the program "
			"computes",
			name, f->name, (unsigned long long)offs[bad], why.msg);
	return 0;
}

/*
 * runtime.morestack's probe in process pid (-1: in every process), made;
 * NULL when the file is not Go or it failed.
 */
static struct batch *morestack__attach(struct tracer *t, struct attached_file *f, pid_t pid)
{
	const char *pattern = MORESTACK;
	struct binary_match m = { 0 };
	uint64_t offset, cookie = pid < 0 ? RW_COOKIE_MORESTACK | RW_COOKIE_SHARED
					  : cookie__make(0, 0, pid, RW_COOKIE_MORESTACK);
	struct batch *b = NULL;

	if (!binary__is_go(f->bin) || binary__match(f->bin, &pattern, 1, 1, &m, NULL) ||
	    m.nfuncs != 1 || !(b = calloc(1, sizeof(*b))))
		goto out;
	uprobe_links__init(&b->entry);
	uprobe_links__init(&b->ret);
	uprobe_links__init(&b->uret);
	uprobe_links__init(&b->hook);
	b->pid = pid;
	offset = m.funcs[0]->file_offset;
	if (vouch(f, MORESTACK, &offset, 1, NULL) ||
	    uprobe_attach_pid(&b->entry, bpf_program__fd(t->skel->progs.rw_entry), t->multi,
			      f->path, &offset, &cookie, 1, pid, NULL)) {
		batch__free(t, b);
		b = NULL;
	}
out:
	binary_match__clear(&m);
	return b;
}

/* Go binaries: mark restarts of a function's entry after runtime.morestack, in process pid. */
static void file__attach_morestack(struct tracer *t, struct attached_file *f, pid_t pid)
{
	struct batch *b;

	if (f->morestack_shared)
		return; /* every process has it */
	for (b = f->morestack; b; b = b->next)
		if (b->pid == pid)
			return;
	b = morestack__attach(t, f, pid);
	if (b) {
		b->next = f->morestack;
		f->morestack = b;
	}
}

/*
 * The morestack probe is shared where every function of the file is (every
 * process running the file is traced), else each traced process's own.
 * Both kinds mark a restart alike, so the new kind goes on before the old
 * one comes off.
 */
void file__sync_morestack(struct tracer *t, struct attached_file *f)
{
	bool want = f->nslots > 0;

	for (size_t i = 0; i < f->nslots; i++)
		want = want && (f->slots[i]->meta.flags & RW_FUNC_SHARED);
	if (want && !f->morestack_shared) {
		f->morestack_shared = morestack__attach(t, f, -1);
		while (f->morestack_shared && f->morestack) {
			struct batch *b = f->morestack;

			f->morestack = b->next;
			batch__free(t, b);
		}
	} else if (!want && f->morestack_shared) {
		struct batch *b = f->morestack_shared;

		f->morestack_shared = NULL;
		for (const struct tracer_target *tt = t->targets; tt; tt = tt->next)
			if (tt->file == f)
				file__attach_morestack(t, f, tt->pid);
		batch__free(t, b);
	}
}

/* Takes the morestack probe out of process pid. */
void file__drop_morestack(struct tracer *t, struct attached_file *f, pid_t pid)
{
	for (struct batch **p = &f->morestack; *p; p = &(*p)->next) {
		if ((*p)->pid == pid) {
			struct batch *b = *p;

			*p = b->next;
			batch__free(t, b);
			return;
		}
	}
}

/*
 * The x86 kernel refuses uprobes on instructions with a LOCK or an ES, CS,
 * SS or DS segment prefix: say which function and site, before attaching.
 */
static int check_probe_addr(const struct attached_file *f, const char *name, uint64_t addr,
			    int64_t off, struct rw_error *err)
{
	uint8_t insn[15];
	size_t i;

	if (binary__read(f->bin, addr, insn, sizeof(insn)))
		return 0; /* near the end of the segment: attaching will say */
	for (i = 0; i < sizeof(insn); i++) {
		switch (insn[i]) {
		case 0xf0:
		case 0x26:
		case 0x2e:
		case 0x36:
		case 0x3e:
			return rw_error_set(err, EOPNOTSUPP,
					    "cannot trace %s: the kernel refuses uprobes on the "
					    "instruction at %s+0x%llx (it has a LOCK or segment "
					    "prefix); choose another function",
					    name, name, (long long)off);
		case 0x66:
		case 0x67:
		case 0xf2:
		case 0xf3:
		case 0x64:
		case 0x65: continue; /* other prefixes */
		default: return 0;
		}
	}
	return 0;
}

static int check_probe_site(const struct attached_file *f, const struct func_info *fi, int64_t off,
			    struct rw_error *err)
{
	return check_probe_addr(f, fi->name, fi->address + (uint64_t)off, off, err);
}

/* The sites of s's inlined copies, checked as check_probe_site checks. */
static int check_inline_sites(const struct attached_file *f, const struct slot *s,
			      struct rw_error *err)
{
	const struct inl_probes *ip = s->inl;
	int e = 0;

	for (size_t k = 0; ip && !e && k < ip->nentries; k++)
		e = check_probe_addr(f, ip->name, ip->entry_addrs[k], 0, err);
	for (size_t k = 0; ip && !e && k < ip->nexits; k++)
		e = check_probe_addr(f, ip->name, ip->exit_addrs[k], 0, err);
	return e;
}

/* The tail-called functions' RETs a slot probes: none for an entry-only function. */
static size_t slot__ntail_returns(const struct slot *s)
{
	return s->meta.flags & RW_FUNC_ENTRY_ONLY ? 0 : s->info->ntail_returns;
}

/* Every site of slot s, checked as check_probe_site checks. */
static int slot__check_sites(struct tracer *t, const struct attached_file *f, const struct slot *s,
			     struct rw_error *err)
{
	const struct func_info *fi = s->info;
	int e = check_probe_site(f, fi, tracer__site(t, f->bin, fi), err);

	for (size_t k = 0; !e && !(s->meta.flags & RW_FUNC_ENTRY_ONLY) && k < fi->nreturns; k++)
		e = check_probe_site(f, fi, fi->returns[k], err);
	for (size_t k = 0; !e && k < slot__ntail_returns(s); k++) {
		uint64_t addr;

		/* tail_returns are file offsets: the site's address may differ */
		if (!binary__offset_to_addr(f->bin, fi->file_offset + fi->tail_returns[k], &addr))
			e = check_probe_site(f, fi, (int64_t)(addr - fi->address), err);
	}
	return e ? e : check_inline_sites(f, s, err);
}

/* err's message, naming the file as the user gave it, not our descriptor. */
static void name_file(const struct attached_file *f, int e, struct rw_error *err)
{
	char msg[sizeof(err->msg)];

	if (!err)
		return;
	snprintf(msg, sizeof(msg), "%s", err->msg);
	rw_error_set(err, -e, "%s: %s", f->name, msg);
}

/* The exit of calls that end as they come back through the kernel's trampoline: at the entry. */
static int batch__attach_trampoline(struct tracer *t, struct attached_file *f, struct batch *b,
				    uint64_t entry, uint64_t cookie, struct rw_error *err)
{
	uint64_t after = cookie | RW_COOKIE_AFTER_RET;

	return uretprobe_attach_pid(&b->uret, bpf_program__fd(t->skel->progs.rw_ret), t->multi,
				    f->path, &entry, &after, 1, b->pid, err);
}

/*
 * Attaches slot s's probes in b's process, each with the cookie of the
 * function and its histogram slot in that process.
 */
int batch__attach(struct tracer *t, struct attached_file *f, struct slot *s, struct batch *b,
		  struct rw_error *err)
{
	uint64_t *eoff = NULL, *ecookie = NULL, *roff = NULL, *rcookie = NULL;
	uint64_t cookie = batch__cookie(s, b, 0);
	struct slot **slots = &s;
	size_t ne = 0, nr = 0, nret = 0, nent = 0, n = 1;
	int e = -ENOMEM;

	for (size_t i = 0; i < n; i++) {
		nret += slots[i]->info->nreturns + slot__ntail_returns(slots[i]);
		nent += 1 + (slots[i]->inl ? slots[i]->inl->nentries : 0);
		nret += slots[i]->inl ? slots[i]->inl->nexits : 0;
	}
	eoff = calloc(nent, sizeof(*eoff));
	ecookie = calloc(nent, sizeof(*ecookie));
	roff = calloc(nret + 1, sizeof(*roff));
	rcookie = calloc(nret + 1, sizeof(*rcookie));
	if (!eoff || !ecookie || !roff || !rcookie) {
		rw_error_set(err, ENOMEM, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		const struct func_info *fi = slots[i]->info;
		const struct inl_probes *ip = slots[i]->inl;

		e = slot__check_sites(t, f, slots[i], err);
		if (e)
			goto out;
		/* a function that exists only inlined has no entry or RET of its own */
		if (!ip || !ip->has_own) {
			eoff[ne] = fi->file_offset + (uint64_t)tracer__site(t, f->bin, fi);
			ecookie[ne++] = cookie;
		}
		for (size_t k = 0; ip && k < ip->nentries && ne < nent; k++) {
			eoff[ne] = ip->entries[k];
			ecookie[ne++] = cookie | RW_COOKIE_INLINE |
					(ip->entry_counts[k] ? RW_COOKIE_INLINE_COUNT : 0);
		}
		if (slots[i]->meta.flags & RW_FUNC_ENTRY_ONLY)
			continue;
		for (size_t k = 0; ip && k < ip->nexits && nr < nret; k++) {
			roff[nr] = ip->exits[k];
			rcookie[nr++] = cookie | RW_COOKIE_INLINE;
		}
		for (size_t k = 0; !slots[i]->trampoline && k < fi->nreturns && nr < nret; k++) {
			roff[nr] = fi->file_offset + fi->returns[k];
			rcookie[nr++] = cookie;
		}
		/* the RETs of the functions it tail-calls: ended at its entry depth */
		for (size_t k = 0; k < slot__ntail_returns(slots[i]) && nr < nret; k++) {
			roff[nr] = fi->file_offset + fi->tail_returns[k];
			rcookie[nr++] = cookie | RW_COOKIE_TAIL;
		}
	}
	e = vouch(f, s->info->name, eoff, ne, err);
	if (!e)
		e = vouch(f, s->info->name, roff, nr, err);
	if (e)
		goto out;
	/* the exits first: a call entered meanwhile has every exit probed */
	if (nr)
		e = uprobe_attach_pid(&b->ret, bpf_program__fd(t->skel->progs.rw_ret), t->multi,
				      f->path, roff, rcookie, nr, b->pid, err);
	if (!e && s->trampoline)
		e = batch__attach_trampoline(t, f, b, eoff[0], ecookie[0], err);
	/* where its hook jumps go is read before the call leaves */
	if (!e)
		e = hooks__attach(t, f, s, b, cookie, err);
	if (!e)
		e = uprobe_attach_pid(&b->entry, bpf_program__fd(t->skel->progs.rw_entry), t->multi,
				      f->path, eoff, ecookie, ne, b->pid, err);
	if (e)
		name_file(f, e, err);
out:
	free(eoff);
	free(ecookie);
	free(roff);
	free(rcookie);
	return e;
}

/* func_info.entry_clobbers' bit for RSP. */
#define CLOBBERS_SP (1U << 4)

const char *tracer__func_trampoline_refusal(const struct binary *b, const struct func_info *fi,
					    int64_t site)
{
	const char *why = binary__trampoline_refusal(b, fi);

	if (why)
		return why;
	if (site > 0 && (fi->entry_sp || (fi->entry_clobbers & CLOBBERS_SP)))
		return "its entry probe is past where the stack pointer moves";
	return NULL;
}

/* Why s's calls cannot return through the kernel's trampoline, or NULL. */
static const char *trampoline_refusal(const struct tracer *t, const struct attached_file *f,
				      const struct slot *s, int64_t site)
{
	if (!t->trampoline)
		return t->trampoline_why;
	if (s->inl && !s->inl->has_own)
		return "it has no code of its own, only inlined copies";
	return tracer__func_trampoline_refusal(f->bin, s->info, site);
}

/* A new slot for fi in f, not yet live: its probes are not attached. */
int file__new_slot(struct tracer *t, struct attached_file *f, const struct func_info *fi,
		   struct slot **ret, struct rw_error *err)
{
	struct slot **slots = realloc(f->slots, (f->nslots + 1) * sizeof(*slots));
	struct slot *s;
	int64_t site;
	int minor;

	if (!slots)
		return rw_error_set(err, ENOMEM, "out of memory");
	f->slots = slots;
	s = calloc(1, sizeof(*s));
	if (!s)
		return rw_error_set(err, ENOMEM, "out of memory");
	if (ids__alloc(t, &t->fn_ids, &s->fn_id)) {
		free(s);
		return rw_error_set(err, ENOSPC, "too many traced functions (at most %d at once)",
				    RW_MAX_FUNCS);
	}
	s->address = fi->address;
	s->info = fi;
	s->inl = inline__find(f, fi->name);
	s->made_ns = clock__mono_ns();
	s->meta.size = fi->size;
	s->meta.max_events = t->slow_calls_per_sec;
	/* the site stays as chosen here: the kinds are set before any slot */
	site = tracer__site(t, f->bin, fi);
	if (site > 0)
		s->meta.entry_sp = fi->entry_sp;
	if (fi->mode == FUNC_MODE_ENTRY_ONLY)
		s->meta.flags |= RW_FUNC_ENTRY_ONLY;
	if (!fi->go && fi->ntail_calls)
		s->meta.flags |= RW_FUNC_TAIL_CALLS;
	if (!fi->go && (fi->ntail_untimed || fi->nindirect_jumps))
		s->meta.flags |= RW_FUNC_TAIL_UNTIMED;
	s->trampoline_why = trampoline_refusal(t, f, s, site);
	s->trampoline = t->trampoline && !s->trampoline_why &&
			!(s->meta.flags & RW_FUNC_ENTRY_ONLY);
	if (s->trampoline)
		s->meta.flags |= RW_FUNC_TRAMPOLINE;
	if (func_uses_go_key(f->bin, fi)) {
		minor = go_minor(f->bin);
		s->meta.flags |= RW_FUNC_GO;
		s->meta.goid_offset = goid_offset(minor < 0 ? 0 : minor);
		if (fi->entry_past_check && site > 0)
			s->meta.flags |= RW_FUNC_ENTRY_PAST_CHECK;
	}
	f->slots[f->nslots++] = s;
	*ret = s;
	return 0;
}

/* Undoes slots made by file__new_slot; the others belong to earlier targets. */
void file__drop_slots(struct tracer *t, struct attached_file *f, struct slot **slots, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct rw_func off = { 0 };

		bpf_map_update_elem(bpf_map__fd(t->skel->maps.funcs), &slots[i]->fn_id, &off,
				    BPF_ANY);
		slot__forget_args(t, slots[i]->fn_id);
		hooks__forget(t, slots[i]->fn_id);
		idpool__release(&t->fn_ids, slots[i]->fn_id, true);
		for (size_t k = 0; k < f->nslots; k++) {
			if (f->slots[k] == slots[i]) {
				f->slots[k] = f->slots[--f->nslots];
				break;
			}
		}
		free(slots[i]);
	}
}

/* Makes a new slot live: its probes, attached after, find it. */
int slot__activate(struct tracer *t, struct slot *s, struct rw_error *err)
{
	int e;

	s->meta.flags |= RW_FUNC_ACTIVE;
	e = slot__write(t, s);
	if (e)
		return rw_error_set(err, -e, "failed to store a function slot: %s", strerror(-e));
	return 0;
}

/* ---- probes of one slot in one process ---- */

/* Whether a target of process pid uses slot s. */
bool slot_used_in(const struct tracer *t, const struct slot *s, pid_t pid)
{
	for (const struct tracer_target *o = t->targets; o; o = o->next)
		for (size_t k = 0; o->pid == pid && k < o->nfuncs; k++)
			if (o->slots[k] == s)
				return true;
	return false;
}

struct batch *slot__batch(const struct slot *s, pid_t pid)
{
	for (struct batch *b = s->pids; b; b = b->next)
		if (b->pid == pid)
			return b;
	return NULL;
}

bool batch__attached(const struct batch *b)
{
	return b->entry.multi_fd >= 0 || b->entry.n;
}

/*
 * Attaches slot s's probes for process pid, unless they are there: shared
 * where they can be. Call exe__refresh_for(pid) first, once for all of the
 * process's functions.
 */
int slot__attach_pid(struct tracer *t, struct attached_file *f, struct slot *s, pid_t pid,
		     uint64_t threshold_ns, struct rw_error *err)
{
	struct rw_hist_key k = { .fn_id = s->fn_id, .tgid = (uint32_t)pid };
	const struct exeproc *ep;
	struct rw_proc_hist ph;
	struct batch *b;
	int e;

	b = slot__batch(s, pid);
	if (b) {
		/* another probe of the process's namespace: the lower threshold */
		if (threshold_ns && (!b->threshold_ns || threshold_ns < b->threshold_ns)) {
			uint64_t was = b->threshold_ns;

			b->threshold_ns = threshold_ns;
			if (batch__set_threshold(t, b))
				b->threshold_ns = was;
		}
		return 0;
	}
	b = calloc(1, sizeof(*b));
	if (!b)
		return rw_error_set(err, ENOMEM, "out of memory");
	uprobe_links__init(&b->entry);
	uprobe_links__init(&b->ret);
	uprobe_links__init(&b->uret);
	uprobe_links__init(&b->hook);
	b->pid = pid;
	b->fn_id = s->fn_id;
	e = hist_slot__alloc(t, s->fn_id, (uint32_t)pid, &b->hist, err);
	if (e) {
		free(b);
		return e;
	}
	b->has_hist = true;
	/* before its probes: calls counted from the attach on are sent as slow */
	b->threshold_ns = threshold_ns;
	e = batch__set_threshold(t, b);
	if (e) {
		e = rw_error_set(err, -e, "failed to set a slow-call threshold: %s", strerror(-e));
		batch__free(t, b);
		return e;
	}
	ep = exeprocs__find(&t->exe, pid); /* exe__refresh_for(pid): the caller's */
	ph = (struct rw_proc_hist){ .hist = b->hist,
				    .starttime = ep && t->starttimes ? ep->starttime : 0 };
	if (bpf_map_update_elem(bpf_map__fd(t->skel->maps.proc_hists), &k, &ph, BPF_ANY)) {
		e = rw_error_set(err, errno, "failed to store a histogram slot: %s",
				 strerror(errno));
		batch__free(t, b);
		return e;
	}
	b->next = s->pids;
	s->pids = b;
	for (size_t i = 0; i < s->ndropped; i++)
		if (s->dropped[i].pid == pid)
			s->dropped[i] = s->dropped[--s->ndropped];
	if (s->shared) {
		/* the shared probes count it now; unless it maps the file as a library */
		if (ep && exe__is(ep, f))
			return 0;
		/* not listed, as it exited: the probes stay shared, or the processes
		 * forked by traced ones would trap on nothing until the next check */
		if (!ep && exeprocs__gone("/proc", pid))
			e = rw_error_set(err, ESRCH, "process %d exited", (int)pid);
		else
			e = slot__unshare(t, f, s, err);
	} else if (slot__shareable(t, f, s, clock__mono_ns()) && !slot__share(t, f, s, NULL)) {
		return 0;
	}
	if (!e && !batch__attached(b))
		e = batch__attach(t, f, s, b, err);
	if (e) {
		s->pids = b->next;
		batch__free(t, b);
	}
	return e;
}

/* Takes slot s's probes (or its share of the shared ones) out of process pid. */
void slot__drop_pid(struct tracer *t, struct slot *s, pid_t pid)
{
	for (struct batch **p = &s->pids; *p; p = &(*p)->next) {
		if ((*p)->pid == pid) {
			struct batch *b = *p;
			struct dropped_pid *d;

			*p = b->next;
			batch__free(t, b);
			if (!s->shared)
				return;
			/* it traps on the shared probes until the next check */
			d = realloc(s->dropped, (s->ndropped + 1) * sizeof(*d));
			if (d) {
				const struct exeproc *e = exeprocs__find(&t->exe, pid);

				s->dropped = d;
				d[s->ndropped++] = (struct dropped_pid){ pid, e ? e->starttime : 0,
									 clock__mono_ns() };
			}
			return;
		}
	}
}

/* Slots for the matched functions; new ones are attached. */
int target__attach(struct tracer *t, struct tracer_target *tt, uint64_t threshold_ns,
		   struct rw_error *err)
{
	struct attached_file *f = tt->file;
	struct slot **fresh = calloc(tt->nfuncs + 1, sizeof(*fresh));
	size_t nfresh = 0;
	int e = 0;

	if (!fresh)
		return rw_error_set(err, ENOMEM, "out of memory");
	for (size_t i = 0; i < tt->nfuncs; i++) {
		const struct func_info *fi = tt->funcs[i].info;
		struct slot *s = file__find_slot(f, fi->address);

		if (!s) {
			e = file__new_slot(t, f, fi, &s, err);
			if (e)
				break;
			fresh[nfresh++] = s;
		}
		tt->funcs[i].fn_id = s->fn_id;
		tt->funcs[i].go_key = s->meta.flags & RW_FUNC_GO;
		tt->funcs[i].trampoline = s->trampoline;
		tt->funcs[i].trampoline_why = s->trampoline_why;
		tt->slots[i] = s;
	}
	for (size_t i = 0; !e && i < nfresh; i++)
		e = slot__activate(t, fresh[i], err);
	/* probes of their own in this process (another process of the file,
	 * another pod of the image, never traps on them), or shared by every
	 * process of the file where all are traced */
	if (!e)
		exe__refresh_for(t, tt->pid);
	for (size_t i = 0; !e && i < tt->nfuncs; i++)
		e = slot__attach_pid(t, f, tt->slots[i], tt->pid, threshold_ns, err);
	if (!e) {
		file__sync_morestack(t, f);
		file__attach_morestack(t, f, tt->pid);
	}
	if (e) {
		/* tt is not among the targets yet: what it alone needed goes */
		for (size_t i = 0; i < tt->nfuncs; i++)
			if (tt->slots[i] && !slot_used_in(t, tt->slots[i], tt->pid))
				slot__drop_pid(t, tt->slots[i], tt->pid);
		file__drop_slots(t, f, fresh, nfresh);
		for (size_t i = 0; i < tt->nfuncs; i++)
			tt->slots[i] = NULL;
	}
	free(fresh);
	return e;
}

/* Slot s's histogram slot in process pid; false when s has no probes there. */
bool slot__hist(const struct slot *s, pid_t pid, uint32_t *ret)
{
	for (const struct batch *b = s ? s->pids : NULL; b; b = b->next) {
		if (b->pid == pid && b->has_hist) {
			*ret = b->hist;
			return true;
		}
	}
	return false;
}

/* Whether a target of tt's process other than tt uses slot s. */
static bool slot_shared(const struct tracer *t, const struct tracer_target *tt,
			const struct slot *s)
{
	for (const struct tracer_target *o = t->targets; o; o = o->next)
		for (size_t k = 0; o != tt && o->pid == tt->pid && k < o->nfuncs; k++)
			if (o->slots[k] == s)
				return true;
	return false;
}

/*
 * Function i of tt's process, just attached: its histogram slot is new and
 * empty, or another target (another probe) of the process counts in it
 * already: tt's counts start from its.
 */
int hist__create(struct tracer *t, struct tracer_target *tt, size_t i, struct rw_error *err)
{
	uint32_t h;

	if (!slot__hist(tt->slots[i], tt->pid, &h))
		return rw_error_set(err, ENOENT, "function %s has no histogram",
				    tt->funcs[i].info->name);
	if (!slot_shared(t, tt, tt->slots[i]))
		return 0;
	free(tt->base[i]);
	tt->base[i] = malloc(sizeof(struct latency));
	if (!tt->base[i] || hist_slot__read(t, h, tt->base[i]))
		return rw_error_set(err, ENOMEM, "failed to read a histogram");
	return 0;
}

int target__add_maps(struct tracer *t, struct tracer_target *tt, struct rw_error *err)
{
	int e;

	for (size_t i = 0; i < tt->nfuncs; i++) {
		e = hist__create(t, tt, i, err);
		if (e)
			return e;
	}
	return 0;
}

/* A target of process pid no longer uses slot s (it is out of t->targets,
 * or its slots[] no longer holds s). */
void slot__unuse(struct tracer *t, struct attached_file *f, struct slot *s, pid_t pid)
{
	struct rw_func off = { 0 };

	if (!slot_used_in(t, s, pid))
		slot__drop_pid(t, s, pid);
	if (--s->users)
		return;
	bpf_map_update_elem(bpf_map__fd(t->skel->maps.funcs), &s->fn_id, &off, BPF_ANY);
	hooks__forget(t, s->fn_id);
	while (s->pids)
		slot__drop_pid(t, s, s->pids->pid);
	batch__free(t, s->shared);
	free(s->dropped);
	for (size_t k = 0; k < f->nslots; k++) {
		if (f->slots[k] == s) {
			f->slots[k] = f->slots[--f->nslots];
			break;
		}
	}
	slot__forget_args(t, s->fn_id);
	idpool__release(&t->fn_ids, s->fn_id, true);
	free(s);
}
