// SPDX-License-Identifier: MIT
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/demangle.h"
#include "analysis/debugfile.h"
#include "analysis/elfbin.h"
#include "base/procmaps.h"
#include "base/rootpath.h"
#include "trace/exeprocs.h"
#include "trace/shlib.h"
#include "trace/symbolize.h"

#define PROC_BUCKETS 256
/* Frames from code without frame pointers are often garbage: reread a
 * process's maps for an unknown address at most this often. */
#define RELOAD_EVERY_NS 100000000ULL

/* A debug file larger than this is not checked against a CRC (read whole). */
#define DEBUG_CRC_MAX_BYTES (64ULL << 20)
/* Where distributions put separate debug files, inside the process's root. */
#define DEBUG_DIR "/usr/lib/debug"

/*
 * What unwinding and naming need of one mapped file besides its analysis,
 * shared by the processes that map the same file (device and inode: while
 * one maps it, the inode is not reused) and freed with the last of them.
 */
struct map_file {
	struct map_file *next; /* in the symbolizer's list */
	unsigned int dev_major, dev_minor;
	uint64_t inode;
	int refs;
	bool debug_tried, dwarf_tried;
	struct elfbin *eb;    /* the mapped file: its CFI */
	Dwarf_CFI *eh;	      /* its .eh_frame (dwarf_cfi_end) */
	struct elfbin *debug; /* its separate debug file, or NULL: names, .debug_frame */
	/* the DWARF .debug_frame comes from (the file's, else the debug
	 * file's), opened on demand: dwarf_begin_elf decompresses every
	 * debug section, tens of milliseconds for a libc */
	Dwarf *dw;
	Dwarf_CFI *debug_frame;
};

/* What is kept for one process. */
struct sym_proc {
	struct sym_proc *next; /* in its hash bucket */
	pid_t pid;
	uint64_t loaded_ns;    /* CLOCK_MONOTONIC of the last read */
	struct procmaps *maps; /* NULL: could not be read (maps_err) */
	int maps_err;
	size_t nmaps;
	struct binary **bins; /* per mapping, opened on first use */
	int *bin_errs;	      /* per mapping: -errno of a failed open, not retried */
	/* per mapping, found or opened on first unwind or naming miss;
	 * &no_file: its open failed (not retried) */
	struct map_file **files;
	struct symbolizer *s;
	/* the process it was forked by and counted for (tracer_event.lender):
	 * its mappings stand for this one's once this one is gone */
	pid_t stand_in;
};

struct symbolizer {
	struct binary_cache *cache;
	symbolizer_root_fn root_of; /* symbolizer__set_root_fn; NULL: none */
	struct sym_proc *procs[PROC_BUCKETS];
	struct map_file *files; /* in use by some process */
};

static struct map_file no_file;

struct symbolizer *symbolizer__new(struct binary_cache *cache)
{
	struct symbolizer *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->cache = cache;
	return s;
}

static void map_file_free(struct map_file *mf)
{
	if (mf->eh)
		dwarf_cfi_end(mf->eh);
	if (mf->dw)
		dwarf_end(mf->dw);
	elfbin__free(mf->debug);
	elfbin__free(mf->eb);
	free(mf);
}

/* Drops a process's reference; the last one frees the file. */
static void map_file_put(struct symbolizer *s, struct map_file *mf)
{
	if (!mf || mf == &no_file || --mf->refs)
		return;
	for (struct map_file **pp = &s->files; *pp; pp = &(*pp)->next) {
		if (*pp == mf) {
			*pp = mf->next;
			break;
		}
	}
	map_file_free(mf);
}

static void proc_drop_maps(struct sym_proc *p)
{
	for (size_t i = 0; i < p->nmaps; i++) {
		binary__put(p->bins[i]);
		if (p->files)
			map_file_put(p->s, p->files[i]);
	}
	free(p->files);
	p->files = NULL;
	free(p->bins);
	free(p->bin_errs);
	procmaps__free(p->maps);
	p->bins = NULL;
	p->bin_errs = NULL;
	p->maps = NULL;
	p->nmaps = 0;
}

/* (Re)reads the process's mappings; failures are kept in maps_err. */
static void proc_load(struct sym_proc *p)
{
	struct rw_error err;
	size_t n;

	proc_drop_maps(p);
	p->loaded_ns = clock__mono_ns();
	p->maps = procmaps__load(p->pid, &err);
	if (!p->maps) {
		/* /proc/PID is gone with the process */
		p->maps_err = errno == ENOENT ? -ESRCH : -errno;
		return;
	}
	procmaps__maps(p->maps, &n);
	p->bins = calloc(n ? n : 1, sizeof(*p->bins));
	p->bin_errs = calloc(n ? n : 1, sizeof(*p->bin_errs));
	p->files = calloc(n ? n : 1, sizeof(*p->files));
	if (!p->bins || !p->bin_errs || !p->files) {
		proc_drop_maps(p);
		p->maps_err = -ENOMEM;
		return;
	}
	p->nmaps = n;
	p->maps_err = 0;
}

/* The process's entry, made (and its maps read) when new; *ret_loaded tells. */
static struct sym_proc *proc_get(struct symbolizer *s, pid_t pid, bool *ret_loaded)
{
	struct sym_proc **head = &s->procs[(unsigned int)pid % PROC_BUCKETS], *p;

	*ret_loaded = false;
	for (p = *head; p; p = p->next)
		if (p->pid == pid)
			return p;
	p = calloc(1, sizeof(*p));
	if (!p)
		return NULL;
	p->pid = pid;
	p->s = s;
	proc_load(p);
	p->next = *head;
	*head = p;
	*ret_loaded = true;
	return p;
}

/*
 * pid's entry, as proc_get; for a process gone (or a zombie) whose slow
 * call came with the process it was forked by (stand_in), that one's: a pre-fork server's
 * worker that ended before its call was read maps what its server mapped.
 */
static struct sym_proc *proc_use(struct symbolizer *s, pid_t pid, bool *ret_loaded)
{
	struct sym_proc *p = proc_get(s, pid, ret_loaded), *q;
	bool loaded;

	/* gone, or a zombie (its maps read empty) */
	if (!p || p->nmaps || p->stand_in <= 0 || p->stand_in == pid)
		return p;
	q = proc_get(s, p->stand_in, &loaded);
	if (!q || !q->maps)
		return p;
	*ret_loaded = loaded;
	return q;
}

/*
 * The file of map, read-only: its mapping in /proc/PID/map_files, which
 * needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE (the CLI as root has them;
 * the agent's pod, with the chart's capabilities, does not), else its path
 * inside /proc/PID/root while that is still the mapped file (shlib.h). An
 * fd, or -errno.
 */
static int map_open(const struct symbolizer *s, pid_t pid, const struct procmap *map)
{
	char root[64];

	return shlib__open_map(
		pid, map, s->root_of && s->root_of(pid, root, sizeof(root)) ? root : NULL, NULL);
}

void symbolizer__set_root_fn(struct symbolizer *s, symbolizer_root_fn fn)
{
	s->root_of = fn;
}

/* The analysis of mapping i's file, or NULL with *ret_err. */
static struct binary *proc_binary(struct symbolizer *s, struct sym_proc *p, size_t i,
				  const struct procmap *map, int *ret_err)
{
	struct rw_error err;
	char path[64], origin[64];
	struct stat st;
	int ret, fd;

	if (!p->bins[i] && !p->bin_errs[i]) {
		fd = ret = map_open(s, p->pid, map);
		if (fd >= 0) {
			snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
			/* the executable's debug file where the tracer looked (exeprocs.h) */
			p->bins[i] = binary__open_as(
				s->cache, path,
				fstat(fd, &st)
					? NULL
					: exeprocs__origin(p->pid, &st, origin, sizeof(origin)),
				&err);
			ret = p->bins[i] ? 0 : -errno;
			close(fd);
		}
		p->bin_errs[i] = ret;
	}
	*ret_err = p->bin_errs[i];
	return p->bins[i];
}

/* ---- separate debug files ---- */

/* The CRC-32 .gnu_debuglink holds, of the whole file fd. */
static bool crc_matches(int fd, uint32_t want)
{
	uint32_t crc;

	return !debugfile__crc32(fd, DEBUG_CRC_MAX_BYTES, &crc) && crc == want;
}

/*
 * The debug file at path inside the process's root, when it is the mapped
 * file's: the same GNU build id, or (a file without one) the CRC-32 its
 * .gnu_debuglink names. NULL otherwise.
 */
static struct elfbin *debug_try(int root_fd, const char *path, const char *build_id, bool by_crc,
				uint32_t crc)
{
	struct rw_error err;
	struct elfbin *d;
	const char *id;
	int fd = rootpath__open_regular(root_fd, path, NULL);

	if (fd < 0)
		return NULL;
	d = elfbin__open_debug_fd(fd, path, &err);
	if (!d)
		return NULL;
	id = elfbin__build_id(d);
	if (by_crc ? !crc_matches(elfbin__fd(d), crc) : !id || strcmp(id, build_id)) {
		elfbin__free(d);
		return NULL;
	}
	return d;
}

/*
 * A separate debug file of map's file (eb), looked for inside the process's
 * root as a debugger would: /usr/lib/debug/.build-id/xx/yyyy.debug, then
 * the .gnu_debuglink name beside the file, in its .debug directory, and
 * under /usr/lib/debug. Opened through the root (never a host path).
 */
static struct elfbin *debug_find(pid_t pid, const struct procmap *map, const struct elfbin *eb)
{
	const char *id = elfbin__build_id(eb), *link, *slash;
	struct elfbin *d = NULL;
	char root[64], path[4096];
	uint32_t crc;
	int root_fd;

	/* not hex (or none): no .build-id path */
	if (id && debugfile__build_id_path(DEBUG_DIR, id, path, sizeof(path)))
		id = NULL;
	link = elfbin__debuglink(eb, &crc);
	if (!id && !link)
		return NULL;
	snprintf(root, sizeof(root), "/proc/%d/root", (int)pid);
	root_fd = open(root, O_PATH | O_CLOEXEC | O_DIRECTORY);
	if (root_fd < 0)
		return NULL;
	if (id)
		d = debug_try(root_fd, path, id, false, 0);
	slash = map->path[0] == '/' ? strrchr(map->path, '/') : NULL;
	if (!d && link && slash) {
		int dir = (int)(slash - map->path);
		const char *forms[] = { "%.*s/%s", "%.*s/.debug/%s", DEBUG_DIR "%.*s/%s" };

		for (size_t i = 0; !d && i < sizeof(forms) / sizeof(forms[0]); i++) {
			int n = snprintf(path, sizeof(path), forms[i], dir, map->path, link);

			/* a link naming the file itself is no debug file */
			if (n > 0 && (size_t)n < sizeof(path) && strcmp(path, map->path))
				d = debug_try(root_fd, path, id, !id, crc);
		}
	}
	close(root_fd);
	return d;
}

/* ---- mapped files ---- */

/* The file of map, opened as map_open() does; NULL on failure. */
static struct map_file *map_file_open(const struct symbolizer *s, pid_t pid,
				      const struct procmap *map)
{
	struct map_file *mf;
	struct rw_error err;
	char path[64];
	int fd = map_open(s, pid, map);

	if (fd < 0)
		return NULL;
	mf = calloc(1, sizeof(*mf));
	if (!mf) {
		close(fd);
		return NULL;
	}
	snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
	mf->eb = elfbin__open(path, &err);
	close(fd);
	if (!mf->eb) {
		free(mf);
		return NULL;
	}
	mf->dev_major = map->dev_major;
	mf->dev_minor = map->dev_minor;
	mf->inode = map->inode;
	/* a table naming absurd registers makes libdw allocate gigabytes a step */
	if (unwind__section_ok(elfbin__elf(mf->eb), ".eh_frame", true))
		mf->eh = dwarf_getcfi_elf(elfbin__elf(mf->eb));
	return mf;
}

/* Mapping i's file for unwinding and naming: another process's, or opened; NULL (not retried). */
static struct map_file *proc_file(struct sym_proc *p, size_t i, const struct procmap *map)
{
	struct symbolizer *s = p->s;
	struct map_file *mf;

	if (p->files[i])
		return p->files[i] == &no_file ? NULL : p->files[i];
	for (mf = s->files; mf; mf = mf->next)
		if (mf->inode == map->inode && mf->dev_major == map->dev_major &&
		    mf->dev_minor == map->dev_minor)
			break;
	if (!mf) {
		mf = map_file_open(s, p->pid, map);
		if (!mf) {
			p->files[i] = &no_file;
			return NULL;
		}
		mf->next = s->files;
		s->files = mf;
	}
	mf->refs++;
	p->files[i] = mf;
	return mf;
}

/* The file's separate debug file, looked for once. */
static struct elfbin *map_file_debug(struct map_file *mf, pid_t pid, const struct procmap *map)
{
	if (!mf->debug_tried) {
		mf->debug_tried = true;
		mf->debug = debug_find(pid, map, mf->eb);
	}
	return mf->debug;
}

/* .debug_frame of the file, else of its debug file; opened once, on demand. */
static Dwarf_CFI *map_file_debug_frame(struct map_file *mf, pid_t pid, const struct procmap *map)
{
	struct elfbin *d;

	if (mf->dwarf_tried)
		return mf->debug_frame;
	mf->dwarf_tried = true;
	mf->dw = dwarf_begin_elf(elfbin__elf(mf->eb), DWARF_C_READ, NULL);
	if (mf->dw && unwind__section_ok(elfbin__elf(mf->eb), ".debug_frame", false))
		mf->debug_frame = dwarf_getcfi(mf->dw);
	d = mf->debug_frame ? NULL : map_file_debug(mf, pid, map);
	if (d) {
		if (mf->dw)
			dwarf_end(mf->dw);
		mf->dw = dwarf_begin_elf(elfbin__elf(d), DWARF_C_READ, NULL);
		if (mf->dw && unwind__section_ok(elfbin__elf(d), ".debug_frame", false))
			mf->debug_frame = dwarf_getcfi(mf->dw);
	}
	return mf->debug_frame;
}

/* The debug file's function symbol holding vaddr, or NULL. */
static const struct elfbin_sym *debug_sym_at(const struct elfbin *d, uint64_t vaddr)
{
	size_t n, lo = 0, hi;
	const struct elfbin_sym *syms = elfbin__syms(d, &n);

	hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (syms[mid].addr <= vaddr)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* syms[lo - 1] is the last at or below vaddr; aliases and nested
	 * symbols sit just below it: look a few back for one that covers */
	for (size_t k = lo, tries = 0; k > 0 && tries < 8; k--, tries++) {
		const struct elfbin_sym *sym = &syms[k - 1];

		if (vaddr - sym->addr < sym->size)
			return sym;
	}
	return NULL;
}

/* ---- naming ---- */

/* The function holding lookup in map's file, or NULL with -errno. */
static const struct func_info *map_func(struct symbolizer *s, struct sym_proc *p,
					const struct procmap *map, uint64_t lookup,
					uint64_t *ret_vaddr, int *ret_err)
{
	const struct func_info *f;
	struct binary *b;
	uint64_t off;
	size_t n;

	*ret_vaddr = 0;
	b = proc_binary(s, p, map - procmaps__maps(p->maps, &n), map, ret_err);
	if (!b)
		return NULL;
	/* runtime address -> file offset -> the ELF's own virtual address */
	off = lookup - map->start + map->offset;
	if (binary__offset_to_addr(b, off, ret_vaddr)) {
		*ret_err = -ENOENT;
		return NULL;
	}
	f = binary__func_at(b, *ret_vaddr);
	if (!f)
		*ret_err = errno == ENOMEM ? -ENOMEM : -ENOENT;
	return f;
}

/* Writes "name+0xoff (path)", or name-0xoff where a .cold part lies before the entry. */
static void print_named(char *buf, size_t len, const char *name, uint64_t entry, uint64_t vaddr,
			const char *path, const char *deleted)
{
	if (vaddr >= entry)
		snprintf(buf, len, "%s+0x%" PRIx64 " (%s%s)", name, vaddr - entry, path, deleted);
	else
		snprintf(buf, len, "%s-0x%" PRIx64 " (%s%s)", name, entry - vaddr, path, deleted);
}

/* Names lookup from map's separate debug file, into buf; false when it cannot. */
static bool debug_name(struct sym_proc *p, const struct procmap *map, uint64_t lookup,
		       uint64_t addr, char *buf, size_t len, const char *path, const char *deleted)
{
	char full[DEMANGLE_MAX_OUT + 1];
	const struct elfbin_sym *sym;
	struct map_file *mf;
	uint64_t vaddr;
	size_t n;

	mf = proc_file(p, map - procmaps__maps(p->maps, &n), map);
	if (!mf || !map_file_debug(mf, p->pid, map) ||
	    elfbin__offset_to_addr(mf->eb, lookup - map->start + map->offset, &vaddr))
		return false;
	sym = debug_sym_at(mf->debug, vaddr);
	if (!sym)
		return false;
	print_named(buf, len, demangle(sym->name, true, full, sizeof(full)) ? full : sym->name,
		    sym->addr, vaddr + (addr - lookup), path, deleted);
	return true;
}

/* The mapping holding lookup, reading the maps again when allowed (dlopen since). */
static const struct procmap *proc_find(struct sym_proc *p, bool loaded, uint64_t lookup)
{
	const struct procmap *map = p->maps ? procmaps__find(p->maps, lookup) : NULL;

	if (!map && !loaded && clock__mono_ns() - p->loaded_ns >= RELOAD_EVERY_NS) {
		proc_load(p);
		if (p->maps)
			map = procmaps__find(p->maps, lookup);
	}
	return map;
}

int symbolizer__resolve(struct symbolizer *s, pid_t pid, uint64_t addr, bool is_ip, char *buf,
			size_t len)
{
	/* a return address may be the first byte of the next function */
	uint64_t lookup = is_ip || !addr ? addr : addr - 1, vaddr;
	const struct procmap *map = NULL;
	const struct func_info *f;
	const char *path, *deleted;
	struct sym_proc *p;
	bool loaded;
	int ret;

	p = proc_use(s, pid, &loaded);
	if (!p) {
		snprintf(buf, len, "0x%" PRIx64 " (?)", addr);
		return -ENOMEM;
	}
	map = proc_find(p, loaded, lookup);
	if (!map) {
		snprintf(buf, len, "0x%" PRIx64 " (?)", addr);
		return p->maps ? -ENOENT : p->maps_err;
	}
	path = map->path[0] ? map->path : "[anon]";
	deleted = map->deleted ? " (deleted)" : "";
	if (!map->inode) {
		snprintf(buf, len, "0x%" PRIx64 " (%s%s)", addr, path, deleted);
		return -ENOENT;
	}
	f = map_func(s, p, map, lookup, &vaddr, &ret);
	if (f) {
		/* C++ and Rust functions by their demangled names: stacks are read by people */
		print_named(buf, len, f->demangled ? f->demangled : f->name, f->address,
			    vaddr + (addr - lookup), path, deleted);
		return 0;
	}
	if (debug_name(p, map, lookup, addr, buf, len, path, deleted))
		return 0;
	/* no name: where in which file, which a reader can look up offline */
	snprintf(buf, len, "%s+0x%" PRIx64 "%s", path, addr - map->start + map->offset, deleted);
	return ret;
}

/* ---- unwinding ---- */

struct unwind_ctx {
	struct sym_proc *p;
	bool loaded;
};

static Dwarf_CFI *find_cfi(void *ctx, uint64_t pc, enum unwind_table which, uint64_t *ret_bias)
{
	struct unwind_ctx *u = ctx;
	const struct procmap *map = proc_find(u->p, u->loaded, pc);
	struct map_file *mf;
	uint64_t vaddr;
	size_t n;

	u->loaded = true; /* one reread per unwind at most */
	if (!map || !map->inode)
		return NULL;
	mf = proc_file(u->p, map - procmaps__maps(u->p->maps, &n), map);
	if (!mf || elfbin__offset_to_addr(mf->eb, pc - map->start + map->offset, &vaddr))
		return NULL;
	*ret_bias = pc - vaddr;
	return which == UNWIND_EH_FRAME ? mf->eh : map_file_debug_frame(mf, u->p->pid, map);
}

size_t symbolizer__unwind(struct symbolizer *s, pid_t pid, const struct unwind_regs *regs,
			  const void *stack, size_t len, uint64_t base, uint64_t *ret_pcs,
			  size_t max)
{
	struct unwind_ctx u = {};

	u.p = proc_use(s, pid, &u.loaded);
	if (!u.p)
		return 0;
	return unwind__stack(regs, stack, len, base, find_cfi, &u, ret_pcs, max);
}

size_t symbolizer__event_stack(struct symbolizer *s, const struct tracer_event *ev,
			       uint64_t *ret_pcs, size_t max)
{
	size_t n = ev->nstack < max ? ev->nstack : max;
	struct sym_proc *p;
	bool loaded;

	/* a followed process: its server's mappings stand for it once it is gone */
	if (ev->lender > 0 && ev->lender_maps && (p = proc_get(s, ev->pid, &loaded)))
		p->stand_in = ev->lender;
	if (ev->stack_copy_len) {
		size_t lead = ev->lead_pc && max ? 1 : 0;

		if (lead)
			ret_pcs[0] = ev->lead_pc; /* the returned call's own frame */
		return lead + symbolizer__unwind(s, ev->pid, &ev->regs, ev->stack_copy,
						 ev->stack_copy_len, ev->stack_copy_addr,
						 ret_pcs + lead, max - lead);
	}
	memcpy(ret_pcs, ev->stack, n * sizeof(*ret_pcs));
	return n;
}

static void proc_free(struct sym_proc *p)
{
	if (!p)
		return;
	proc_drop_maps(p);
	free(p);
}

void symbolizer__watch(struct symbolizer *s, pid_t pid)
{
	const struct procmap *maps;
	struct sym_proc *p;
	bool loaded;
	size_t n;
	int err;

	p = proc_get(s, pid, &loaded);
	if (!p || !p->maps)
		return;
	maps = procmaps__maps(p->maps, &n);
	for (size_t i = 0; i < n; i++) {
		if (!maps[i].inode)
			continue;
		(void)proc_binary(s, p, i, &maps[i], &err);
		(void)proc_file(p, i, &maps[i]);
	}
}

void symbolizer__forget(struct symbolizer *s, pid_t pid)
{
	struct sym_proc **pp = &s->procs[(unsigned int)pid % PROC_BUCKETS];

	for (; *pp; pp = &(*pp)->next) {
		if ((*pp)->pid == pid) {
			struct sym_proc *p = *pp;

			*pp = p->next;
			proc_free(p);
			return;
		}
	}
}

void symbolizer__free(struct symbolizer *s)
{
	if (!s)
		return;
	for (size_t i = 0; i < PROC_BUCKETS; i++) {
		while (s->procs[i]) {
			struct sym_proc *p = s->procs[i];

			s->procs[i] = p->next;
			proc_free(p);
		}
	}
	free(s);
}
