// SPDX-License-Identifier: MIT
/*
 * A List probe's lists on a node (funclist.h), over real files: a Go
 * fixture as two pods' executable, and this process's own libraries for
 * LIB:NAME patterns. No tracer, no analyzer: the files are read here.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/funclist.h"
#include "test.h"

static struct placement_proc proc(const char *pod, const char *path, const struct stat *st)
{
	return (struct placement_proc){ .pod = pod,
					.container = "app",
					.cid = "c1",
					.pod_uid = "u1",
					.exe = "/app/demo",
					.path = path,
					.proc = { .pid = getpid() },
					.dev = st->st_dev,
					.ino = st->st_ino };
}

static const cJSON *first(const cJSON *entry)
{
	return cJSON_GetArrayItem(cJSON_GetObjectItem(entry, "functionList"), 0);
}

static int num(const cJSON *o, const char *key)
{
	return (int)cJSON_GetNumberValue(cJSON_GetObjectItem(o, key));
}

TEST(funclist_one_list_per_file_bounded_with_suggestions)
{
	const char *path = test__fixture("go/go1.26.8/default/demo");
	char *fns[] = { "main.*", "main.ProcesPayment", "libc.so*:mallo?", "nolib*:x" };
	struct probe_spec spec = { .functions = fns, .nfunctions = 4, .list = true };
	struct traceset_env env = { 0 };
	struct errlist errs = { 0 };
	struct funclist *fl = funclist__new(&env, "shop");
	cJSON *entry = cJSON_CreateObject(), *small = cJSON_CreateObject();
	const cJSON *f, *fn, *errors;
	struct stat st;
	bool ok, libc = false, charge = false;
	char *text;

	if (!ASSERT_TRUE(fl) || !CHECK(!stat(path, &st), "no fixture %s", path))
		return false;
	funclist__begin(fl);
	{
		struct placement_proc a = proc("web-1", path, &st), b = proc("web-2", path, &st);

		funclist__want(fl, &a, &spec, &errs);
		funclist__want(fl, &b, &spec, &errs);
	}
	ok = ASSERT_TRUE(funclist__end(fl)) && ASSERT_EQ(funclist__count(fl), 1) &&
	     ASSERT_EQ(funclist__pending(fl), 0);
	funclist__add_to(fl, entry, 1 << 20);
	f = first(entry);
	errors = cJSON_GetObjectItem(f, "errors");
	cJSON_ArrayForEach(fn, cJSON_GetObjectItem(f, "functions"))
	{
		const char *lib = cJSON_GetStringValue(cJSON_GetObjectItem(fn, "library"));
		const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(fn, "name"));

		libc |= lib && !strncmp(lib, "libc.so", 7) && !strcmp(name, "malloc");
		charge |= !lib && !strcmp(name, "main.ProcessPayment");
	}
	text = cJSON_PrintUnformatted(errors);
	ok = ok && ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(f, "pods")), 2) &&
	     ASSERT_TRUE(libc) && ASSERT_TRUE(charge) &&
	     ASSERT_EQ(num(f, "matched"),
		       cJSON_GetArraySize(cJSON_GetObjectItem(f, "functions"))) &&
	     ASSERT_EQ(num(f, "omitted"), 0) && ASSERT_EQ(num(entry, "functionListPending"), 0) &&
	     ASSERT_STRCONTAINS(
		     text,
		     "no function matches 'main.ProcesPayment' in /app/demo (did you mean: main.ProcessPayment") &&
	     ASSERT_STRCONTAINS(text, "no library the process has mapped matches 'nolib*' (of "
				      "'nolib*:x')");
	free(text);
	/* a small budget: fewer names, the rest counted */
	funclist__add_to(fl, small, 300);
	f = first(small);
	ok = ok &&
	     ASSERT_TRUE(cJSON_GetArraySize(cJSON_GetObjectItem(f, "functions")) <
			 num(f, "matched")) &&
	     ASSERT_EQ(num(f, "omitted") + cJSON_GetArraySize(cJSON_GetObjectItem(f, "functions")),
		       num(f, "matched"));
	/* a turn without the pods: the file is forgotten */
	funclist__begin(fl);
	ok = ok && ASSERT_FALSE(funclist__end(fl)) && ASSERT_EQ(funclist__count(fl), 0);
	cJSON_Delete(entry);
	cJSON_Delete(small);
	errlist__clear(&errs);
	funclist__free(fl);
	return ok;
}
