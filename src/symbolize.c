// SPDX-License-Identifier: MIT
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "procmaps.h"
#include "clock.h"
#include "symbolize.h"

#define PROC_BUCKETS 256
/* Frames from code without frame pointers are often garbage: reread a
 * process's maps for an unknown address at most this often. */
#define RELOAD_EVERY_NS 100000000ULL

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
};

struct symbolizer {
	struct binary_cache *cache;
	struct sym_proc *procs[PROC_BUCKETS];
};

struct symbolizer *symbolizer__new(struct binary_cache *cache)
{
	struct symbolizer *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->cache = cache;
	return s;
}

static void proc_drop_maps(struct sym_proc *p)
{
	for (size_t i = 0; i < p->nmaps; i++)
		binary__put(p->bins[i]);
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
	if (!p->bins || !p->bin_errs) {
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
	proc_load(p);
	p->next = *head;
	*head = p;
	*ret_loaded = true;
	return p;
}

/* The analysis of mapping i's file, or NULL with *ret_err. */
static struct binary *proc_binary(struct symbolizer *s, struct sym_proc *p, size_t i,
				  const struct procmap *map, int *ret_err)
{
	struct rw_error err;
	char path[96];
	int ret;

	if (!p->bins[i] && !p->bin_errs[i]) {
		ret = procmap__file_path(map, p->pid, path, sizeof(path));
		if (!ret) {
			p->bins[i] = binary__open(s->cache, path, &err);
			if (!p->bins[i])
				ret = -errno;
		}
		p->bin_errs[i] = ret;
	}
	*ret_err = p->bin_errs[i];
	return p->bins[i];
}

/* The function holding lookup in map's file, or NULL with -errno. */
static const struct func_info *map_func(struct symbolizer *s, struct sym_proc *p,
					const struct procmap *map, uint64_t lookup,
					uint64_t *ret_vaddr, int *ret_err)
{
	const struct func_info *f;
	struct binary *b;
	uint64_t off;
	size_t n;

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

int symbolizer__resolve(struct symbolizer *s, pid_t pid, uint64_t addr, bool is_ip, char *buf,
			size_t len)
{
	/* a return address may be the first byte of the next function */
	uint64_t lookup = is_ip || !addr ? addr : addr - 1, vaddr, off;
	const struct procmap *map = NULL;
	const struct func_info *f;
	const char *path, *deleted, *name;
	struct sym_proc *p;
	bool loaded;
	int ret;

	p = proc_get(s, pid, &loaded);
	if (!p) {
		snprintf(buf, len, "0x%" PRIx64 " (?)", addr);
		return -ENOMEM;
	}
	if (p->maps)
		map = procmaps__find(p->maps, lookup);
	if (!map && !loaded && clock__mono_ns() - p->loaded_ns >= RELOAD_EVERY_NS) {
		/* mapped since we read the maps (dlopen), or never */
		proc_load(p);
		if (p->maps)
			map = procmaps__find(p->maps, lookup);
	}
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
	if (!f) {
		snprintf(buf, len, "0x%" PRIx64 " (%s%s)", addr, path, deleted);
		return ret;
	}
	/* C++ and Rust functions by their demangled names: stacks are read by people */
	name = f->demangled ? f->demangled : f->name;
	/* the offset of addr itself, from the entry; a .cold part lies before it at times */
	vaddr += addr - lookup;
	if (vaddr >= f->address) {
		off = vaddr - f->address;
		snprintf(buf, len, "%s+0x%" PRIx64 " (%s%s)", name, off, path, deleted);
	} else {
		off = f->address - vaddr;
		snprintf(buf, len, "%s-0x%" PRIx64 " (%s%s)", name, off, path, deleted);
	}
	return 0;
}

static void proc_free(struct sym_proc *p)
{
	if (!p)
		return;
	proc_drop_maps(p);
	free(p);
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
