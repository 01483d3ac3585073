// SPDX-License-Identifier: MIT
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analysis/binary.h"
#include "base/cancel.h"
#include "base/clock.h"
#include "base/log.h"
#include "agent/funclist.h"
#include "trace/shlib.h"

/* One executable of the probe's pods on this node, listed once. */
struct flfile {
	dev_t dev;
	ino_t ino;
	char *exe;	     /* as the container sees it */
	cJSON *pods;	     /* {pod, container}, this turn's */
	size_t pods_omitted; /* this turn's, past FUNCLIST_MAX_PODS */
	bool done, seen;
	cJSON *functions; /* {name, size, library, generic} */
	size_t matched;	  /* functions matched: listed and left out */
	cJSON *errors;	  /* strings */
	/* the executable's own part, kept while its libraries are read: what
	 * functions, matched and errors held after it */
	bool exe_done;
	size_t exe_functions, exe_matched, exe_errors;
	struct flfile *next;
};

struct funclist {
	struct traceset_env *env;
	char *ns;
	struct flfile *files;
	size_t files_omitted; /* this turn's, past FUNCLIST_MAX_FILES */
	bool listed;	      /* an executable listed this turn */
};

struct funclist *funclist__new(struct traceset_env *env, const char *ns)
{
	struct funclist *fl = calloc(1, sizeof(*fl));

	if (!fl)
		return NULL;
	fl->env = env;
	fl->ns = strdup(ns);
	if (!fl->ns) {
		free(fl);
		return NULL;
	}
	return fl;
}

/* Deletes the items of arr past its first n. */
static void truncate_to(cJSON *arr, size_t n)
{
	while ((size_t)cJSON_GetArraySize(arr) > n)
		cJSON_DeleteItemFromArray(arr, cJSON_GetArraySize(arr) - 1);
}

/* Back to the executable's part (its libraries are listed again), or to nothing. */
static void file_reset(struct flfile *f)
{
	if (!f->exe_done || !f->functions || !f->errors) {
		cJSON_Delete(f->functions);
		cJSON_Delete(f->errors);
		f->functions = cJSON_CreateArray();
		f->errors = cJSON_CreateArray();
		f->matched = 0;
		f->exe_done = false;
		return;
	}
	truncate_to(f->functions, f->exe_functions);
	truncate_to(f->errors, f->exe_errors);
	f->matched = f->exe_matched;
}

static void file_free(struct flfile *f)
{
	cJSON_Delete(f->pods);
	cJSON_Delete(f->functions);
	cJSON_Delete(f->errors);
	free(f->exe);
	free(f);
}

void funclist__free(struct funclist *fl)
{
	struct flfile *f, *next;

	if (!fl)
		return;
	for (f = fl->files; f; f = next) {
		next = f->next;
		file_free(f);
	}
	free(fl->ns);
	free(fl);
}

void funclist__begin(struct funclist *fl)
{
	fl->files_omitted = 0;
	fl->listed = false;
	for (struct flfile *f = fl->files; f; f = f->next) {
		f->seen = false;
		f->pods_omitted = 0;
		cJSON_Delete(f->pods);
		f->pods = cJSON_CreateArray();
	}
}

bool funclist__end(struct funclist *fl)
{
	struct flfile **fp = &fl->files;

	/* an executable no selected pod runs any more is not listed */
	while (*fp) {
		struct flfile *f = *fp;

		if (f->seen) {
			fp = &f->next;
			continue;
		}
		*fp = f->next;
		file_free(f);
	}
	return fl->listed;
}

size_t funclist__count(const struct funclist *fl)
{
	size_t n = 0;

	for (const struct flfile *f = fl->files; f; f = f->next)
		n++;
	return n;
}

size_t funclist__pending(const struct funclist *fl)
{
	size_t n = 0;

	for (const struct flfile *f = fl->files; f; f = f->next)
		n += !f->done;
	return n;
}

static void add_error(struct flfile *f, const char *msg)
{
	cJSON_AddItemToArray(f->errors, cJSON_CreateString(msg));
}

/*
 * Lists what patterns match in b (lib: the library's file name, or NULL for
 * the executable), within what is left of FUNCLIST_MAX_NAMES; the patterns
 * that match nothing into l (the caller clears it). A glob
 * over every name and the suggestions run on the main loop: bounded by
 * FUNCLIST_DEADLINE_NS (the analyzer read and indexed the file already).
 */
static int list_binary(struct flfile *f, struct binary *b, const char *const *pats, size_t n,
		       const char *lib, struct binary_list *l, struct rw_error *err)
{
	size_t listed = (size_t)cJSON_GetArraySize(f->functions);
	size_t room = listed < FUNCLIST_MAX_NAMES ? FUNCLIST_MAX_NAMES - listed : 0;
	int e;

	cancel__bind(NULL, clock__mono_ns() + FUNCLIST_DEADLINE_NS);
	e = binary__list(b, pats, n, room, l, err);
	cancel__bind(NULL, 0);
	if (e == -ECANCELED)
		return rw_error_set(err, ECANCELED,
				    "listing the functions of %s took longer than %llu ms: give "
				    "narrower patterns",
				    lib ? lib : f->exe, FUNCLIST_DEADLINE_NS / 1000000);
	if (e)
		return e;
	f->matched += l->total;
	for (size_t i = 0; i < l->nfuncs; i++) {
		cJSON *o = cJSON_CreateObject();

		cJSON_AddItemToArray(f->functions, o);
		cJSON_AddStringToObject(o, "name", l->funcs[i].name);
		cJSON_AddNumberToObject(o, "size", (double)l->funcs[i].size);
		if (lib)
			cJSON_AddStringToObject(o, "library", lib);
		if (l->funcs[i].generic)
			cJSON_AddBoolToObject(o, "generic", true);
	}
	return 0;
}

/* The tracer's cache of analyses (none without a tracer: tests). */
static struct binary_cache *cache(const struct funclist *fl)
{
	return fl->env->tracer ? tracer__cache(fl->env->tracer) : NULL;
}

/*
 * Where a file stands once asked of the analyzer (READY with none); origin,
 * where its process sees it (or NULL), tells where its debug file lies.
 */
static enum analysis_state check(struct funclist *fl, const char *path, const char *origin,
				 struct rw_error *err)
{
	struct traceset_env *env = fl->env;

	return env->analyzer
		       ? analyzer__check_as(env->analyzer, cache(fl), path, origin, NULL, 0, err)
		       : ANALYSIS_READY;
}

/* The executable's own patterns (no library part). Whether it is still being read. */
static bool list_exe(struct funclist *fl, struct flfile *f, const struct placement_proc *pp,
		     const char *const *pats, size_t n)
{
	struct rw_error err = { "" };
	struct binary_list l = { 0 };
	struct binary *b = NULL;
	char path[96], msg[1024], origin[32];
	int real = traceset__exe_path(pp, path, sizeof(path));
	enum analysis_state st;

	snprintf(origin, sizeof(origin), "/proc/%d/exe", pp->proc.pid);
	st = check(fl, path, real >= 0 ? origin : NULL, &err);

	if (st == ANALYSIS_READY && (b = binary__open(cache(fl), path, &err)) &&
	    !list_binary(f, b, pats, n, NULL, &l, &err)) {
		for (size_t i = 0; i < l.nunmatched; i++) {
			traceset__no_match(&l.unmatched[i], f->exe, msg, sizeof(msg));
			add_error(f, msg);
		}
	} else if (st != ANALYSIS_PENDING) {
		rw_error_replace(&err, path, f->exe);
		snprintf(msg, sizeof(msg), "cannot list the functions of %s: %s", f->exe, err.msg);
		add_error(f, msg);
	}
	binary_list__clear(&l);
	binary__put(b);
	if (real >= 0)
		close(real);
	return st == ANALYSIS_PENDING;
}

/* What a LIB:FUNC pattern found over the process's libraries. */
struct libpat {
	const char *full, *func;
	char lib[SHLIB_MAX_NAME];
	bool lib_seen, matched;
	char miss[512]; /* the first library's "no function matches" */
};

/* Whether a library pattern names lib. */
static bool lib_wanted(const struct shlib *lib, const struct libpat *lp, size_t nlp)
{
	for (size_t i = 0; i < nlp; i++)
		if (shlib__matches(lib, lp[i].lib))
			return true;
	return false;
}

/* The library patterns in one library. Whether it is still being read. */
static bool list_lib(struct funclist *fl, struct flfile *f, pid_t pid, const struct shlib *lib,
		     struct libpat *lp, size_t nlp, const char *root)
{
	const char *funcs[PROBE_MAX_FUNCTIONS];
	struct rw_error err = { "" };
	struct binary_list l = { 0 };
	struct binary *b = NULL;
	size_t n = 0, *at = calloc(nlp + 1, sizeof(*at));
	char path[64], msg[1024];
	enum analysis_state st = ANALYSIS_FAILED;
	int fd;

	for (size_t i = 0; at && i < nlp; i++)
		if (shlib__matches(lib, lp[i].lib)) {
			lp[i].lib_seen = true;
			at[n] = i;
			funcs[n++] = lp[i].func;
		}
	fd = n ? shlib__open(pid, lib, root, &err) : -1;
	if (fd >= 0) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		st = check(fl, path, NULL, &err);
	}
	if (st == ANALYSIS_READY && (b = binary__open(cache(fl), path, &err)) &&
	    !list_binary(f, b, funcs, n, lib->name, &l, &err)) {
		for (size_t k = 0, u = 0; k < n; k++) {
			if (u < l.nunmatched && l.unmatched[u].pattern == funcs[k]) {
				if (!lp[at[k]].miss[0])
					traceset__no_match(&l.unmatched[u], lib->name,
							   lp[at[k]].miss, sizeof(lp[at[k]].miss));
				u++;
			} else {
				lp[at[k]].matched = true;
			}
		}
	} else if (n && st != ANALYSIS_PENDING) {
		snprintf(msg, sizeof(msg), "cannot list the functions of %s: %s", lib->name,
			 err.msg);
		add_error(f, msg);
	}
	binary_list__clear(&l);
	binary__put(b);
	if (fd >= 0)
		close(fd);
	free(at);
	return st == ANALYSIS_PENDING;
}

/* The LIB:FUNC patterns over the libraries pid has mapped. Whether one is still being read. */
static bool list_libs(struct funclist *fl, struct flfile *f, const struct placement_proc *pp,
		      struct libpat *lp, size_t nlp)
{
	struct rw_error err = { "" };
	struct shlib_list l;
	char root[64], msg[1024];
	bool pending = false;
	size_t nlibs = 0, skipped = 0;

	if (shlib_list__load(pp->proc.pid, &l, &err)) {
		snprintf(msg, sizeof(msg), "cannot read the libraries of process %d: %s",
			 pp->proc.pid, err.msg);
		add_error(f, msg);
		return false;
	}
	nodeprocs__host_root(pp->proc.pid, root, sizeof(root));
	/* each library a pattern names is an analysis: a process mapping
	 * thousands of files gets the first few read */
	for (size_t i = 0; i < l.n; i++) {
		if (!strcmp(l.libs[i].path, pp->exe) || !lib_wanted(&l.libs[i], lp, nlp))
			continue;
		if (nlibs++ >= FUNCLIST_MAX_LIBS) {
			skipped++;
			continue;
		}
		pending |= list_lib(fl, f, pp->proc.pid, &l.libs[i], lp, nlp, root);
	}
	shlib_list__clear(&l);
	if (skipped) {
		snprintf(msg, sizeof(msg),
			 "%zu more libraries of the process match the patterns, not read (the "
			 "first %d are): name the library",
			 skipped, FUNCLIST_MAX_LIBS);
		add_error(f, msg);
	}
	for (size_t i = 0; i < nlp && !pending; i++) {
		if (!lp[i].lib_seen)
			snprintf(msg, sizeof(msg),
				 "no library the process has mapped matches '%s' (of '%s')",
				 lp[i].lib, lp[i].full);
		else if (!lp[i].matched)
			snprintf(msg, sizeof(msg), "%s", lp[i].miss);
		else
			continue;
		add_error(f, msg);
	}
	return pending;
}

/* Lists f for spec's patterns; done unless a file is still being read. */
static void list(struct funclist *fl, struct flfile *f, const struct placement_proc *pp,
		 const struct probe_spec *spec)
{
	const char *pats[PROBE_MAX_FUNCTIONS];
	struct libpat lp[PROBE_MAX_FUNCTIONS];
	size_t n = 0, nlp = 0;
	bool pending = false;

	for (size_t i = 0; i < spec->nfunctions && i < PROBE_MAX_FUNCTIONS; i++) {
		struct libpat *p = &lp[nlp];

		memset(p, 0, sizeof(*p));
		if (binary_pattern__library(spec->functions[i], p->lib, sizeof(p->lib), &p->func)) {
			p->full = spec->functions[i];
			nlp++;
		} else {
			pats[n++] = spec->functions[i];
		}
	}
	file_reset(f);
	if (!f->functions || !f->errors)
		return;
	/* read once: the turns that wait for its libraries do not list it again */
	if (n && !f->exe_done)
		pending = list_exe(fl, f, pp, pats, n);
	if (!pending && !f->exe_done) {
		f->exe_done = true;
		f->exe_functions = (size_t)cJSON_GetArraySize(f->functions);
		f->exe_errors = (size_t)cJSON_GetArraySize(f->errors);
		f->exe_matched = f->matched;
	}
	if (nlp && !pending)
		pending = list_libs(fl, f, pp, lp, nlp);
	/* the pid may have been taken over since the scan (by another pod's
	 * process, whose names are not this probe's to see): what was read
	 * through it goes, and a later turn lists the file anew */
	if (!pending && fl->env->procs &&
	    !nodeprocs__still_in(fl->env->procs, &pp->proc, pp->cid, pp->pod_uid)) {
		f->exe_done = false;
		file_reset(f);
		return;
	}
	f->done = !pending;
	fl->listed |= f->done;
	if (f->done)
		log_info("listed %zu functions of %s in pod %s (%zu matched)",
			 (size_t)cJSON_GetArraySize(f->functions), f->exe, pp->pod, f->matched);
}

static struct flfile *file_find(struct funclist *fl, const struct placement_proc *pp)
{
	for (struct flfile *f = fl->files; f; f = f->next)
		if (f->dev == pp->dev && f->ino == pp->ino)
			return f;
	return NULL;
}

static void add_pod(struct flfile *f, const struct placement_proc *pp)
{
	const cJSON *o;
	cJSON *n;

	cJSON_ArrayForEach(o, f->pods)
	{
		if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(o, "pod")), pp->pod) &&
		    !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(o, "container")),
			    pp->container))
			return;
	}
	if (cJSON_GetArraySize(f->pods) >= FUNCLIST_MAX_PODS) {
		f->pods_omitted++; /* a process more of a pod named counts too: a bound, not a count */
		return;
	}
	n = cJSON_CreateObject();
	cJSON_AddStringToObject(n, "pod", pp->pod);
	cJSON_AddStringToObject(n, "container", pp->container);
	cJSON_AddItemToArray(f->pods, n);
}

void funclist__want(struct funclist *fl, const struct placement_proc *pp,
		    const struct probe_spec *spec, struct errlist *errs)
{
	struct traceset_env *env = fl->env;
	struct flfile *f = file_find(fl, pp);
	uint64_t start;

	(void)errs;
	if (fl->env->analyzer)
		analyzer__owner(fl->env->analyzer, fl->ns);
	if (!f) {
		if (funclist__count(fl) >= FUNCLIST_MAX_FILES) {
			fl->files_omitted++;
			return;
		}
		f = calloc(1, sizeof(*f));
		if (!f || !(f->exe = strdup(pp->exe)) || !(f->pods = cJSON_CreateArray())) {
			if (f)
				file_free(f);
			return;
		}
		f->dev = pp->dev;
		f->ino = pp->ino;
		f->next = fl->files;
		fl->files = f;
	}
	f->seen = true;
	if (f->pods)
		add_pod(f, pp);
	if (f->done)
		return;
	/*
	 * Listing shares the turn's time with attaching (traceset.h): past it,
	 * a later turn lists the file; the first of a turn always starts.
	 */
	if (env->budget_ns && env->spent_ns >= env->budget_ns) {
		env->attach_waiting++;
		return;
	}
	start = clock__mono_ns();
	list(fl, f, pp, spec);
	env->spent_ns += clock__mono_ns() - start;
}

/* Bytes a listed name costs in the report, about. */
static size_t name_bytes(const cJSON *fn)
{
	const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(fn, "name"));
	const char *lib = cJSON_GetStringValue(cJSON_GetObjectItem(fn, "library"));

	return (name ? strlen(name) : 0) + (lib ? strlen(lib) + 12 : 0) + 32;
}

/* The most names each file lists for the list to weigh at most budget bytes. */
static size_t names_kept(const struct funclist *fl, size_t budget)
{
	size_t keep = FUNCLIST_MAX_NAMES;

	for (;;) {
		size_t bytes = 0;

		for (const struct flfile *f = fl->files; f; f = f->next) {
			size_t i = 0;
			const cJSON *fn;

			cJSON_ArrayForEach(fn, f->functions)
			{
				if (i++ >= keep)
					break;
				bytes += name_bytes(fn);
			}
		}
		if (bytes <= budget || !keep)
			return keep;
		keep /= 2;
	}
}

/*
 * The object listed before for a file of the same path whose list is the
 * same (the same executable in a copy of its own: an image unpacked for
 * each container), or NULL.
 */
static cJSON *same_file(const struct funclist *fl, const struct flfile *f, cJSON *arr)
{
	int i = 0;

	for (const struct flfile *g = fl->files; g && g != f; g = g->next, i++)
		if (g->done && f->done && !strcmp(g->exe, f->exe) && g->matched == f->matched &&
		    cJSON_Compare(g->functions, f->functions, true) &&
		    cJSON_Compare(g->errors, f->errors, true))
			return cJSON_GetArrayItem(arr, i);
	return NULL;
}

void funclist__add_to(const struct funclist *fl, cJSON *entry, size_t budget)
{
	cJSON *arr = cJSON_CreateArray(), *shown = cJSON_CreateArray();
	size_t keep = names_kept(fl, budget);

	for (const struct flfile *f = fl->files; f && arr && shown; f = f->next) {
		cJSON *o = cJSON_CreateObject(), *fns, *same = same_file(fl, f, arr);
		const cJSON *fn, *pod;
		size_t i = 0;

		/* arr: one object a file, for same_file's index; shown: those listed */
		cJSON_AddItemToArray(arr, o);
		if (same) {
			cJSON_ArrayForEach(pod, f->pods)
			{
				cJSON *pods = cJSON_GetObjectItem(same, "pods");

				if (pods && cJSON_GetArraySize(pods) < FUNCLIST_MAX_PODS)
					cJSON_AddItemToArray(pods, cJSON_Duplicate(pod, true));
			}
			continue;
		}
		cJSON_AddStringToObject(o, "executable", f->exe);
		cJSON_AddItemToObject(o, "pods", cJSON_Duplicate(f->pods, true));
		if (f->pods_omitted)
			cJSON_AddNumberToObject(o, "podsOmitted", (double)f->pods_omitted);
		/* a reference copies o's first child pointer: made once o has them all */
		if (!f->done) {
			cJSON_AddBoolToObject(o, "pending", true);
			cJSON_AddItemReferenceToArray(shown, o);
			continue;
		}
		fns = cJSON_AddArrayToObject(o, "functions");
		cJSON_ArrayForEach(fn, f->functions)
		{
			if (i++ >= keep)
				break;
			cJSON_AddItemToArray(fns, cJSON_Duplicate(fn, true));
		}
		cJSON_AddNumberToObject(o, "matched", (double)f->matched);
		cJSON_AddNumberToObject(o, "omitted",
					(double)(f->matched - (size_t)cJSON_GetArraySize(fns)));
		if (cJSON_GetArraySize(f->errors))
			cJSON_AddItemToObject(o, "errors", cJSON_Duplicate(f->errors, true));
		cJSON_AddItemReferenceToArray(shown, o);
	}
	/* the references resolved into copies, in the entry */
	cJSON_AddItemToObject(entry, "functionList", cJSON_Duplicate(shown, true));
	cJSON_Delete(shown);
	cJSON_Delete(arr);
	cJSON_AddNumberToObject(entry, "functionListPending", (double)funclist__pending(fl));
	if (fl->files_omitted)
		cJSON_AddNumberToObject(entry, "executablesOmitted", (double)fl->files_omitted);
}
