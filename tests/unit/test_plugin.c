// SPDX-License-Identifier: MIT
/* kubectl-retwatch's pure parts: its command line, label selectors both
 * ways, the FunctionProbe it creates, and its YAML. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/cli.h"
#include "plugin/functions.h"
#include "plugin/selector.h"
#include "plugin/trace.h"
#include "plugin/view.h"
#include "test.h"

/* Parses a command line given as one string of space-separated words. */
static int parse(const char *line, struct plugin_cli *c, struct rw_error *err)
{
	static char buf[1024];
	static char *argv[64];
	int argc = 0;

	snprintf(buf, sizeof(buf), "kubectl-retwatch %s", line);
	for (char *tok = strtok(buf, " "); tok && argc < 63; tok = strtok(NULL, " "))
		argv[argc++] = tok;
	argv[argc] = NULL;
	return plugin_cli__parse(argc, argv, c, err);
}

TEST(plugin_cli_trace_workload)
{
	struct plugin_cli c;
	struct rw_error err = { { 0 } };

	if (!ASSERT_OK(parse("trace deploy/payments main.charge main.valid* --for 30s -n shop "
			     "--threshold=50ms --keep",
			     &c, &err)))
		return false;
	return ASSERT_EQ(c.cmd, PLUGIN_TRACE) && ASSERT_EQ(c.kind, PLUGIN_KIND_DEPLOY) &&
	       ASSERT_STREQ(c.name, "payments") && ASSERT_EQ(c.npatterns, 2) &&
	       ASSERT_STREQ(c.patterns[1], "main.valid*") && ASSERT_STREQ(c.lifetime, "30s") &&
	       ASSERT_EQ(c.lifetime_ns, 30000000000ull) && ASSERT_STREQ(c.ns, "shop") &&
	       ASSERT_STREQ(c.threshold, "50ms") && ASSERT_TRUE(c.keep) &&
	       ASSERT_STREQ(c.interval, "2s");
}

TEST(plugin_cli_trace_selector_and_defaults)
{
	struct plugin_cli c;
	struct rw_error err = { { 0 } };

	/* with -l every argument is a pattern, even one with a '/' */
	if (!ASSERT_OK(parse("trace -l app=web net/http.(*conn).serve", &c, &err)))
		return false;
	return ASSERT_EQ(c.kind, PLUGIN_KIND_NONE) && ASSERT_STREQ(c.selector, "app=web") &&
	       ASSERT_EQ(c.npatterns, 1) && ASSERT_STREQ(c.patterns[0], "net/http.(*conn).serve") &&
	       ASSERT_STREQ(c.lifetime, "2m") && ASSERT_FALSE(c.keep) && ASSERT_TRUE(!c.ns);
}

TEST(plugin_cli_kinds)
{
	const char *names[] = { "po", "pods", "deployment.apps", "sts", "statefulsets", "ds" };
	enum plugin_kind want[] = { PLUGIN_KIND_POD, PLUGIN_KIND_POD, PLUGIN_KIND_DEPLOY,
				    PLUGIN_KIND_STS, PLUGIN_KIND_STS, PLUGIN_KIND_DS };

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!ASSERT_EQ(plugin_kind__parse(names[i], strlen(names[i])), want[i]))
			return false;
	return ASSERT_EQ(plugin_kind__parse("svc", 3), PLUGIN_KIND_NONE) &&
	       ASSERT_STREQ(plugin_kind__api(PLUGIN_KIND_DS), "/apis/apps/v1");
}

TEST(plugin_cli_mistakes_say_what_to_write)
{
	static const struct {
		const char *line, *says;
	} bad[] = {
		{ "trace payments main.x", "deploy/NAME" },
		{ "trace svc/payments main.x", "the kinds are deploy" },
		{ "trace deploy/payments", "name the functions" },
		{ "trace", "name the pods" },
		{ "trace pod/a main.x --for 2", "with its unit" },
		{ "trace pod/a main.x --for 0s", "above zero" },
		{ "trace pod/a main.x --interval 1s", "2s or more" },
		{ "trace pod/a main.x --bogus", "--bogus" },
		{ "get -o xml", "json, yaml and wide" },
		{ "trace pod/a main.x -o json", "trace prints tables: -o wide" },
		{ "top extra", "no arguments" },
		{ "trcae pod/a", "unknown command" },
		{ "-n x", "give a command" },
	};
	struct plugin_cli c;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct rw_error err = { { 0 } };

		if (!ASSERT_NEQ(parse(bad[i].line, &c, &err), 0) ||
		    !ASSERT_STRCONTAINS(err.msg, bad[i].says))
			return false;
	}
	return true;
}

TEST(plugin_cli_options_before_the_command)
{
	struct plugin_cli c;
	struct rw_error err = { { 0 } };

	return ASSERT_OK(parse("-n top --context=c get x", &c, &err)) &&
	       ASSERT_EQ(c.cmd, PLUGIN_GET) && ASSERT_STREQ(c.ns, "top") &&
	       ASSERT_STREQ(c.context, "c") && ASSERT_STREQ(c.name, "x") &&
	       ASSERT_OK(parse("--kubeconfig k -l a=b trace main.x", &c, &err)) &&
	       ASSERT_EQ(c.cmd, PLUGIN_TRACE) && ASSERT_STREQ(c.selector, "a=b") &&
	       ASSERT_STREQ(c.kubeconfig, "k") && ASSERT_EQ(c.npatterns, 1) &&
	       ASSERT_STREQ(c.patterns[0], "main.x") && ASSERT_OK(parse("--keep -h", &c, &err)) &&
	       ASSERT_EQ(c.cmd, PLUGIN_HELP);
}

TEST(plugin_cli_get)
{
	struct plugin_cli c;
	struct rw_error err = { { 0 } };

	return ASSERT_OK(parse("get probe-1 -o yaml", &c, &err)) && ASSERT_EQ(c.cmd, PLUGIN_GET) &&
	       ASSERT_STREQ(c.name, "probe-1") && ASSERT_EQ(c.output, PLUGIN_OUT_YAML) &&
	       ASSERT_OK(parse("top -n x", &c, &err)) && ASSERT_EQ(c.cmd, PLUGIN_TOP) &&
	       ASSERT_OK(parse("top -o wide", &c, &err)) && ASSERT_EQ(c.output, PLUGIN_OUT_WIDE) &&
	       ASSERT_OK(parse("trace pod/a main.x -o wide", &c, &err)) &&
	       ASSERT_EQ(c.output, PLUGIN_OUT_WIDE) &&
	       ASSERT_OK(parse("functions pod/a -o wide", &c, &err)) &&
	       ASSERT_EQ(c.output, PLUGIN_OUT_WIDE) && ASSERT_OK(parse("--help", &c, &err)) &&
	       ASSERT_EQ(c.cmd, PLUGIN_HELP);
}

/* The selector text parses to want (JSON) and formats back to back. */
static bool selector_round(const char *text, const char *want, const char *back)
{
	struct rw_error err = { { 0 } };
	cJSON *sel = NULL;
	char *json = NULL, buf[256];
	bool ok;

	if (!ASSERT_OK(selector__parse(text, &sel, &err)))
		return fprintf(stderr, "  %s: %s\n", text, err.msg), false;
	json = cJSON_PrintUnformatted(sel);
	ok = ASSERT_STREQ(json, want) && ASSERT_OK(selector__format(sel, buf, sizeof(buf))) &&
	     ASSERT_STREQ(buf, back);
	free(json);
	cJSON_Delete(sel);
	return ok;
}

TEST(plugin_selector_parse_and_format)
{
	return selector_round("app=web", "{\"matchLabels\":{\"app\":\"web\"}}", "app=web") &&
	       selector_round(" app == web , tier!=db,env in (a, b),!canary,app.kubernetes.io/x",
			      "{\"matchLabels\":{\"app\":\"web\"},\"matchExpressions\":["
			      "{\"key\":\"tier\",\"operator\":\"NotIn\",\"values\":[\"db\"]},"
			      "{\"key\":\"env\",\"operator\":\"In\",\"values\":[\"a\",\"b\"]},"
			      "{\"key\":\"canary\",\"operator\":\"DoesNotExist\"},"
			      "{\"key\":\"app.kubernetes.io/x\",\"operator\":\"Exists\"}]}",
			      "app=web,tier notin (db),env in (a,b),!canary,app.kubernetes.io/x") &&
	       selector_round("v notin (x)",
			      "{\"matchExpressions\":[{\"key\":\"v\",\"operator\":\"NotIn\","
			      "\"values\":[\"x\"]}]}",
			      "v notin (x)");
}

TEST(plugin_selector_parse_errors)
{
	static const struct {
		const char *text, *says;
	} bad[] = {
		{ "", "empty" },
		{ "app=web,app=api", "twice" },
		{ "app=we b", "one comma apart" },
		{ "env in a,b", "parentheses" },
		{ "env in (a", "parentheses" },
		{ "a b=c", "one comma apart" },
		{ "=web", "not a label key" },
		{ "app=w@b", "not a label value" },
		{ "a/b/c=1", "not a label key" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct rw_error err = { { 0 } };
		cJSON *sel = (cJSON *)1;

		if (!ASSERT_NEQ(selector__parse(bad[i].text, &sel, &err), 0) ||
		    !ASSERT_TRUE(sel == NULL) || !ASSERT_STRCONTAINS(err.msg, bad[i].says))
			return fprintf(stderr, "  selector '%s'\n", bad[i].text), false;
	}
	return true;
}

static int from_json_text(const char *text, cJSON **ret, struct rw_error *err)
{
	cJSON *in = cJSON_Parse(text);
	int e = selector__from_json(in, ret, err);

	cJSON_Delete(in);
	return e;
}

TEST(plugin_selector_of_a_workload)
{
	struct rw_error err = { { 0 } };
	cJSON *sel = NULL;
	char buf[256];
	bool ok;

	if (!ASSERT_OK(from_json_text("{\"matchLabels\":{\"app\":\"pay\"},\"matchExpressions\":"
				      "[{\"key\":\"t\",\"operator\":\"Exists\",\"values\":null}],"
				      "\"extra\":1}",
				      &sel, &err)))
		return false;
	ok = ASSERT_OK(selector__format(sel, buf, sizeof(buf))) && ASSERT_STREQ(buf, "app=pay,t") &&
	     ASSERT_TRUE(!cJSON_GetObjectItem(sel, "extra"));
	cJSON_Delete(sel);
	if (!ok)
		return false;
	/* hostile or odd selectors: errors, never a crash */
	static const char *const bad[] = {
		"null",
		"{}",
		"{\"matchLabels\":{}}",
		"{\"matchLabels\":[1]}",
		"{\"matchLabels\":{\"a\":1}}",
		"{\"matchExpressions\":{}}",
		"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Near\"}]}",
		"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\"}]}",
		"{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\",\"values\":[2]}]}",
		"{\"matchExpressions\":[1]}",
		"{\"matchLabels\":{\"a\":\"1\",\"a\":\"2\"}}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (!ASSERT_NEQ(from_json_text(bad[i], &sel, &err), 0) || !ASSERT_TRUE(!sel))
			return fprintf(stderr, "  selector %s\n", bad[i]), false;
	return true;
}

TEST(plugin_selector_of_a_pods_labels)
{
	struct rw_error err = { { 0 } };
	cJSON *labels = cJSON_Parse("{\"app\":\"web\",\"pod-template-hash\":\"5d9f\"}"), *sel;
	char buf[128];
	bool ok;

	ok = ASSERT_OK(selector__from_labels(labels, &sel, &err)) &&
	     ASSERT_OK(selector__format(sel, buf, sizeof(buf))) &&
	     ASSERT_STREQ(buf, "app=web,pod-template-hash=5d9f");
	cJSON_Delete(sel);
	cJSON_Delete(labels);
	return ok && ASSERT_NEQ(selector__from_labels(NULL, &sel, &err), 0) &&
	       ASSERT_STRCONTAINS(err.msg, "no labels");
}

TEST(plugin_probe_doc)
{
	struct plugin_cli c;
	struct rw_error err = { { 0 } };
	cJSON *sel = NULL, *doc;
	char *json;
	bool ok;

	if (!ASSERT_OK(parse("trace sts/Web_DB main.charge --for 45s --threshold 5ms", &c, &err)) ||
	    !ASSERT_OK(selector__parse("app=db", &sel, &err)))
		return false;
	doc = trace__probe_doc(&c, sel);
	json = cJSON_PrintUnformatted(doc);
	ok = ASSERT_STREQ(json,
			  "{\"apiVersion\":\"retwatch.io/v1alpha1\",\"kind\":\"FunctionProbe\","
			  "\"metadata\":{\"generateName\":\"retwatch-statefulset-web-db-\","
			  "\"labels\":{\"app.kubernetes.io/managed-by\":\"kubectl-retwatch\"}},"
			  "\"spec\":{\"selector\":{\"matchLabels\":{\"app\":\"db\"}},"
			  "\"functions\":[\"main.charge\"],\"lifetime\":\"45s\","
			  "\"reportInterval\":\"2s\",\"slowThreshold\":\"5ms\"}}");
	free(json);
	cJSON_Delete(doc);
	return ok;
}

TEST(plugin_cli_all_namespaces)
{
	struct plugin_cli c;
	struct rw_error err = { { 0 } };
	cJSON *sel = NULL, *doc;
	char *json;
	bool ok;

	if (!ASSERT_OK(parse("trace -A -l app=web main.charge", &c, &err)) ||
	    !ASSERT_TRUE(c.all_ns) || !ASSERT_OK(parse("get --all-namespaces", &c, &err)) ||
	    !ASSERT_TRUE(c.all_ns) || !ASSERT_OK(parse("top -A", &c, &err)) ||
	    !ASSERT_TRUE(c.all_ns))
		return false;
	/* a workload is one namespace's; -n and -A contradict */
	if (!ASSERT_EQ(parse("trace -A deploy/web main.charge", &c, &err), -EINVAL) ||
	    !ASSERT_STRCONTAINS(err.msg, "select the pods of every namespace with -l") ||
	    !ASSERT_EQ(parse("get -A -n shop", &c, &err), -EINVAL) ||
	    !ASSERT_STRCONTAINS(err.msg, "-A and -n: give one") ||
	    !ASSERT_EQ(parse("functions -A -l app=web", &c, &err), -EINVAL))
		return false;
	if (!ASSERT_OK(parse("trace -A -l app=web main.charge", &c, &err)) ||
	    !ASSERT_OK(selector__parse("app=web", &sel, &err)))
		return false;
	doc = trace__probe_doc(&c, sel);
	json = cJSON_PrintUnformatted(doc);
	ok = ASSERT_TRUE(json && strstr(json, "\"kind\":\"ClusterFunctionProbe\"")) &&
	     ASSERT_TRUE(strstr(json, "\"namespaceSelector\":{}"));
	free(json);
	cJSON_Delete(doc);
	return ok;
}

TEST(plugin_yaml)
{
	cJSON *obj = cJSON_Parse("{\"a\":{\"b\":[1,\"x y\",{\"c\":true,\"d\":null}],\"e\":{}},"
				 "\"f\":\"yes\",\"g\":\"main.(*S).H\",\"h\":[[\"q\"]],\"i\":2.5}");
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	bool ok;

	view__yaml(f, obj);
	fclose(f);
	ok = ASSERT_STREQ(out, "a:\n"
			       "  b:\n"
			       "    - 1\n"
			       "    - \"x y\"\n"
			       "    - c: true\n"
			       "      d: null\n"
			       "  e: {}\n"
			       "f: \"yes\"\n"
			       "g: \"main.(*S).H\"\n"
			       "h:\n"
			       "  - - q\n"
			       "i: 2.5\n");
	free(out);
	cJSON_Delete(obj);
	return ok;
}

/* What a view function prints of a JSON text. */
__attribute__((noinline)) static char *printed(void (*fn)(FILE *, const cJSON *), const char *json)
{
	cJSON *obj = cJSON_Parse(json);
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);

	fn(f, obj);
	fclose(f);
	cJSON_Delete(obj);
	return out;
}

#define FN(name, calls, p99)                                                               \
	"{\"name\":\"" name "\",\"calls\":" #calls ",\"p50\":\"1ms\",\"p99\":\"" p99 "\"," \
	"\"recent\":{\"calls\":2,\"p50\":\"1ms\",\"p99\":\"" p99 "\"},"                    \
	"\"slowestPods\":[{\"pod\":\"web-1\",\"p99\":\"" p99                               \
	"\"},{\"pod\":\"web-2\",\"p99\":\"1ms\"}]}"

TEST(plugin_view_table_rows_and_revisions)
{
	char *out = printed(
		view__table,
		"{\"metadata\":{\"name\":\"p\"},\"status\":{\"conditions\":[{\"type\":\"Attached\","
		"\"status\":\"True\",\"reason\":\"Attached\"}],\"summary\":{\"pods\":2,\"nodes\":1,"
		"\"processes\":2,\"lastUpdate\":\"T\",\"functions\":[" FN(
			"main.a", 7,
			"3ms") ","
			       "{\"name\":\"main.b\",\"calls\":\"bad\",\"revisions\":[{\"revision\":\"r1\",\"pods\":1,"
			       "\"calls\":5,\"p50\":\"1ms\",\"p99\":\"2ms\"},{\"revision\":\"r2\",\"pods\":1,"
			       "\"calls\":6,\"p50\":\"4ms\",\"p99\":\"9ms\"}]}]}}}");
	bool ok = ASSERT_STRCONTAINS(out,
				     "p: 2 pods, 2 processes on 1 nodes; updated T; Attached\n") &&
		  ASSERT_STRCONTAINS(out,
				     "main.a            7       1ms       3ms            2        "
				     "1ms        3ms  web-1 3ms, web-2 1ms\n") &&
		  /* a field of the wrong type prints as nothing, not a crash */
		  ASSERT_STRCONTAINS(out, "main.b            0         -         -            0") &&
		  ASSERT_STRCONTAINS(out, "  5       1ms       2ms   revision r1 (1 pods)\n") &&
		  ASSERT_STRCONTAINS(out, "  6       4ms       9ms   revision r2 (1 pods)\n");

	free(out);
	return ok;
}

TEST(plugin_view_top_slowest_first)
{
	char *out = printed(
		view__top,
		"{\"items\":[{\"metadata\":{\"name\":\"p1\"},\"status\":{"
		"\"summary\":{\"functions\":[" FN("main.fast", 1, "812ns") "," FN(
			"main.slow", 2,
			"1.5s") "]}}},{\"metadata\":{\"name\":"
				"\"p2\"},\"status\":{\"summary\":{\"functions\":[" FN(
					"main.mid", 3, "20.1ms") "]}}},{\"status\":7}]}");
	const char *slow = strstr(out, "main.slow"), *mid = strstr(out, "main.mid"),
		   *fast = strstr(out, "main.fast");
	bool ok = ASSERT_TRUE(slow && mid && fast && slow < mid && mid < fast) &&
		  ASSERT_STRCONTAINS(out, "p2 ");

	free(out);
	return ok;
}

TEST(plugin_view_slowest_calls_once_each)
{
	const char *probe =
		"{\"status\":{\"summary\":{\"functions\":[{\"name\":\"main.a\",\"slowestCalls\":["
		"{\"duration\":\"9ms\",\"durationNs\":9000000,\"pod\":\"web-1\",\"pid\":4,\"tid\":5,"
		"\"ended\":\"E1\",\"stack\":[\"main.a+0x1 (/app)\",\"main.b+0x2 (/app)\"]},"
		"{\"duration\":\"8ms\",\"durationNs\":8000000,\"pod\":\"web-1\",\"pid\":4,\"tid\":5,"
		"\"ended\":\"E2\",\"arguments\":[{\"name\":\"rdi\",\"type\":\"u64\",\"value\":\"7\"}],"
		"\"argumentsNote\":\"no DWARF: the argument registers\"}]}]}}}";
	cJSON *obj = cJSON_Parse(probe);
	struct view_seen *seen = calloc(1, sizeof(*seen));
	char *out = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&out, &len);
	bool ok = ASSERT_EQ(view__slow_calls(f, obj, seen), 2) &&
		  ASSERT_EQ(view__slow_calls(f, obj, seen), 0);

	fclose(f);
	ok = ok &&
	     ASSERT_STRCONTAINS(out, "slowest call: main.a 9ms in pod web-1 (container -, "
				     "node -, pid 4) ended E1: main.a+0x1 (/app) < main.b+0x2 "
				     "(/app)\n") &&
	     ASSERT_STRCONTAINS(out, "ended E2\n  arguments: rdi=7\n"
				     "  (no DWARF: the argument registers)\n");
	free(out);
	free(seen);
	cJSON_Delete(obj);
	return ok;
}

TEST(plugin_view_table_says_why)
{
	char *out = printed(view__table,
			    "{\"metadata\":{\"name\":\"p\"},\"status\":{\"conditions\":[{\"type\":"
			    "\"Attached\",\"status\":\"True\",\"reason\":\"OverheadLimited\","
			    "\"message\":\"main.hot detached from pid 7\"}],\"summary\":{"
			    "\"functionsOmitted\":3}}}");
	bool ok = ASSERT_STRCONTAINS(out, "OverheadLimited: main.hot detached from pid 7\n") &&
		  ASSERT_STRCONTAINS(out, "(no calls yet)\n(3 more functions left out");

	free(out);
	return ok;
}

/* A function whose calls left through a hook says how many are not timed. */
TEST(plugin_view_table_says_tail_exits)
{
	char *out = printed(view__table,
			    "{\"metadata\":{\"name\":\"p\"},\"status\":{\"summary\":{\"functions\":"
			    "[{\"name\":\"ExecutorRun\",\"calls\":1926,\"tailExits\":1926},"
			    "{\"name\":\"PortalRun\",\"calls\":1957}]}}}");
	bool ok = ASSERT_STRCONTAINS(out, "ExecutorRun: 1926 of its calls left through a jump to "
					  "code not probed (tailExits): in CALLS, not timed\n") &&
		  ASSERT_FALSE(strstr(out, "PortalRun: "));

	free(out);
	/* the summary writer's Timed condition says it instead, once */
	out = printed(view__table,
		      "{\"metadata\":{\"name\":\"p\"},\"status\":{\"conditions\":[{\"type\":"
		      "\"Timed\",\"status\":\"False\",\"reason\":\"CallsNotTimed\",\"message\":"
		      "\"ExecutorRun: 1926 of its 1926 calls left\"}],\"summary\":{\"functions\":"
		      "[{\"name\":\"ExecutorRun\",\"calls\":1926,\"tailExits\":1926}]}}}");
	ok = ok &&
	     ASSERT_STRCONTAINS(out,
				"\nCallsNotTimed: ExecutorRun: 1926 of its 1926 calls left\n") &&
	     ASSERT_FALSE(strstr(out, "(tailExits): in CALLS"));
	free(out);
	return ok;
}

/*
 * A name longer than its column is cut with "…", the next column where
 * every row has it; -o wide prints it whole, the column as wide; a wide
 * character takes two columns, an escaped byte four.
 */
TEST(plugin_view_long_names_keep_columns)
{
	char name[201], cut[48 + 3], json[1024], *out = NULL, *wide = NULL, *top = NULL;
	char want[512];
	bool ok;

	memset(name, 'x', sizeof(name) - 1);
	memcpy(name, "main.", 5);
	name[200] = '\0';
	snprintf(cut, sizeof(cut), "%.47s\xe2\x80\xa6", name); /* 48 columns */
	snprintf(json, sizeof(json),
		 "{\"metadata\":{\"name\":\"p\"},\"status\":{\"summary\":{\"functions\":["
		 "{\"name\":\"%s\",\"calls\":7},{\"name\":\"main.\\u001b\",\"calls\":8},"
		 "{\"name\":\"\xe6\x97\xa5\xe6\x9c\xac\",\"calls\":9}]}}}",
		 name);
	out = printed(view__table, json);
	wide = printed(view__table_wide, json);
	/* the name, padded to the column, then CALLS as %10 */
	snprintf(want, sizeof(want), "\n%s %10d ", cut, 7);
	ok = ASSERT_STRCONTAINS(out, want);
	snprintf(want, sizeof(want), "\nmain.\\x1b%*s %10d ", 48 - 9, "", 8);
	ok = ok && ASSERT_STRCONTAINS(out, want);
	snprintf(want, sizeof(want), "\n\xe6\x97\xa5\xe6\x9c\xac%*s %10d ", 48 - 4, "", 9);
	ok = ok && ASSERT_STRCONTAINS(out, want);
	snprintf(want, sizeof(want), "\n%s %10d ", name, 7);
	ok = ok && ASSERT_STRCONTAINS(wide, want);
	snprintf(want, sizeof(want), "\n\xe6\x97\xa5\xe6\x9c\xac%*s %10d ", 200 - 4, "", 9);
	ok = ok && ASSERT_STRCONTAINS(wide, want);
	/* top: the same function in its column, the probe's name before it */
	snprintf(json, sizeof(json),
		 "{\"items\":[{\"metadata\":{\"name\":\"p\"},\"status\":{\"summary\":{"
		 "\"functions\":[{\"name\":\"%s\",\"calls\":7}]}}}]}",
		 name);
	top = printed(view__top, json);
	snprintf(want, sizeof(want), "\np     %s %10d ", cut, 7);
	ok = ok && ASSERT_STRCONTAINS(top, want);
	free(out);
	free(wide);
	free(top);
	return ok;
}

TEST(plugin_cli_functions)
{
	struct plugin_cli c;
	struct rw_error err = { { 0 } };

	if (!ASSERT_OK(parse("functions pod/web-1 main.* libc.so.6:malloc -o json", &c, &err)))
		return false;
	if (!(ASSERT_EQ(c.cmd, PLUGIN_FUNCTIONS) && ASSERT_EQ(c.kind, PLUGIN_KIND_POD) &&
	      ASSERT_STREQ(c.name, "web-1") && ASSERT_EQ(c.npatterns, 2) &&
	      ASSERT_EQ(c.output, PLUGIN_OUT_JSON)))
		return false;
	/* no pattern: every function */
	return ASSERT_OK(parse("functions -l app=web", &c, &err)) && ASSERT_EQ(c.npatterns, 0) &&
	       ASSERT_NEQ(parse("functions", &c, &err), 0) &&
	       ASSERT_STRCONTAINS(err.msg, "functions: name the pods") &&
	       ASSERT_NEQ(parse("functions deploy/x -o yaml", &c, &err), 0) &&
	       ASSERT_STRCONTAINS(err.msg, "-o json");
}

/* The probe functions makes asks only for the list; with no pattern, for every function. */
TEST(plugin_functions_probe_doc)
{
	struct plugin_cli c;
	struct rw_error err = { { 0 } };
	cJSON *doc, *spec;
	bool ok;

	if (!ASSERT_OK(parse("functions deploy/web", &c, &err)))
		return false;
	doc = trace__probe_doc(&c, cJSON_CreateObject());
	spec = cJSON_GetObjectItem(doc, "spec");
	ok = ASSERT_TRUE(doc) &&
	     ASSERT_STREQ(cJSON_GetStringValue(cJSON_GetObjectItem(spec, "mode")), "List") &&
	     ASSERT_EQ(cJSON_GetArraySize(cJSON_GetObjectItem(spec, "functions")), 1) &&
	     ASSERT_STREQ(cJSON_GetStringValue(
				  cJSON_GetArrayItem(cJSON_GetObjectItem(spec, "functions"), 0)),
			  "*");
	cJSON_Delete(doc);
	return ok;
}

/*
 * Two nodes' reports of one image: listed once, naming both nodes; a node
 * still reading is not an answer; hostile types are passed over.
 */
TEST(plugin_functions_merge)
{
	static const char reports[] =
		"{\"items\":["
		"{\"node\":\"a\",\"status\":{\"functionListPending\":0,\"functionList\":["
		"{\"executable\":\"/app/x\",\"pods\":[{\"pod\":\"p1\",\"container\":\"c\"}],"
		"\"functions\":[{\"name\":\"main.f\",\"size\":10}],\"matched\":3,\"omitted\":2}]}},"
		"{\"node\":\"b\",\"status\":{\"functionListPending\":0,\"functionList\":["
		"{\"executable\":\"/app/x\",\"pods\":[{\"pod\":\"p2\",\"container\":\"c\"}],"
		"\"functions\":[{\"name\":\"main.f\",\"size\":10}],\"matched\":3,\"omitted\":2},"
		"{\"executable\":7,\"functions\":\"x\"},"
		"{\"executable\":\"/app/\\u001b[2Jevil\\u0085\",\"matched\":0}]}},"
		"{\"node\":\"c\",\"status\":{\"functionListPending\":1,\"functionList\":[]}}]}";
	cJSON *r = cJSON_Parse(reports), *ab = cJSON_Parse("[\"a\",\"b\"]"),
	      *abc = cJSON_Parse("[\"a\",\"b\",\"c\"]"), *m = functions__merge(r), *exes;
	char *text = NULL;
	size_t len = 0, total;
	FILE *out = open_memstream(&text, &len);
	bool ok;

	exes = cJSON_GetObjectItem(m, "executables");
	total = functions__print(out, m);
	fclose(out);
	ok = ASSERT_TRUE(functions__answered(r, ab)) && ASSERT_FALSE(functions__answered(r, abc)) &&
	     ASSERT_TRUE(functions__answered(r, NULL)) &&
	     ASSERT_EQ(
		     cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetArrayItem(exes, 0), "nodes")),
		     2) &&
	     ASSERT_EQ(cJSON_GetArraySize(exes), 2) && ASSERT_EQ(total, 3) &&
	     /* escaped as stdout would show it (test_termsafe.c) */
	     ASSERT_STRCONTAINS(text, "/app/\\x1b[2Jevil\\xc2\\x85 in ") &&
	     ASSERT_STRCONTAINS(text, "/app/x in p1 (c), p2 (c) on node a, b") &&
	     ASSERT_STRCONTAINS(text, "main.f") && ASSERT_STRCONTAINS(text, "... and 2 more");
	free(text);
	cJSON_Delete(m);
	cJSON_Delete(r);
	cJSON_Delete(ab);
	cJSON_Delete(abc);
	return ok;
}
