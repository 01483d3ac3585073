// SPDX-License-Identifier: MIT
/* The FunctionProbe spec as the agent reads it, selectors, and latency in a status. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "probe.h"
#include "test.h"

static int parse(const char *json, struct probe_spec *s, struct rw_error *err)
{
	cJSON *doc = cJSON_Parse(json);
	int e = probe_spec__parse(doc, s, err);

	cJSON_Delete(doc);
	return e;
}

TEST(probe_spec_defaults)
{
	struct rw_error err = { "" };
	struct probe_spec s;
	bool ok;

	if (!ASSERT_OK(parse("{\"selector\":{\"matchLabels\":{\"app\":\"web\"}},"
			     "\"functions\":[\"main.*\"]}",
			     &s, &err)))
		return false;
	ok = ASSERT_EQ(s.nfunctions, 1) && ASSERT_STREQ(s.functions[0], "main.*") &&
	     ASSERT_EQ(s.lifetime_ns, PROBE_DEFAULT_LIFETIME_NS) &&
	     ASSERT_EQ(s.interval_ns, PROBE_DEFAULT_INTERVAL_NS) && ASSERT_EQ(s.threshold_ns, 0) &&
	     ASSERT_TRUE(s.executable == NULL) && ASSERT_EQ(s.ncontainers, 0) &&
	     ASSERT_TRUE(probe_spec__wants_container(&s, "anything"));
	probe_spec__free(&s);
	return ok;
}

TEST(probe_spec_fields)
{
	struct rw_error err = { "" };
	struct probe_spec s;
	bool ok;

	if (!ASSERT_OK(
		    parse("{\"selector\":{},\"functions\":[\"a\",\"b\"],\"containers\":[\"app\"],"
			  "\"executable\":\"/app/server\",\"slowThreshold\":\"100ms\","
			  "\"lifetime\":\"1h30m\",\"reportInterval\":\"2s\"}",
			  &s, &err)))
		return CHECK(false, "%s", err.msg);
	ok = ASSERT_EQ(s.threshold_ns, 100000000ULL) &&
	     ASSERT_EQ(s.lifetime_ns, 5400ULL * 1000000000ULL) &&
	     ASSERT_EQ(s.interval_ns, 2000000000ULL) && ASSERT_STREQ(s.executable, "/app/server") &&
	     ASSERT_TRUE(probe_spec__wants_container(&s, "app")) &&
	     ASSERT_FALSE(probe_spec__wants_container(&s, "sidecar"));
	probe_spec__free(&s);
	return ok;
}

/* Each bad spec is refused with a message naming the field. */
TEST(probe_spec_errors)
{
	static const struct {
		const char *json, *msg;
	} cases[] = {
		{ "{\"functions\":[\"a\"]}", "spec.selector is required" },
		{ "{\"selector\":{}}", "spec.functions is required" },
		{ "{\"selector\":{},\"functions\":[]}", "spec.functions must have 1 to 64" },
		{ "{\"selector\":{},\"functions\":[\"\"]}",
		  "spec.functions[0] must be a non-empty" },
		{ "{\"selector\":{},\"functions\":[1]}", "spec.functions[0]" },
		{ "{\"selector\":{},\"functions\":[\"a\"],\"reportInterval\":\"1s\"}",
		  "spec.reportInterval must be at least 2s" },
		{ "{\"selector\":{},\"functions\":[\"a\"],\"lifetime\":\"0\"}",
		  "spec.lifetime must be longer than 0" },
		{ "{\"selector\":{},\"functions\":[\"a\"],\"slowThreshold\":\"fast\"}",
		  "spec.slowThreshold must be a duration" },
		{ "{\"selector\":{},\"functions\":[\"a\"],\"executable\":\"app\"}",
		  "spec.executable must be an absolute path" },
		{ "{\"selector\":{\"matchLabels\":{\"a\":1}},\"functions\":[\"a\"]}",
		  "spec.selector.matchLabels[a]" },
		{ "{\"selector\":{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Is\"}]},"
		  "\"functions\":[\"a\"]}",
		  "matchExpressions[0].operator must be In, NotIn" },
		{ "{\"selector\":{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"In\"}]},"
		  "\"functions\":[\"a\"]}",
		  "matchExpressions[0].values is required" },
		{ "{\"selector\":{\"matchExpressions\":[{\"key\":\"a\",\"operator\":\"Exists\","
		  "\"values\":[\"x\"]}]},\"functions\":[\"a\"]}",
		  "values must be empty with Exists" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rw_error err = { "" };
		struct probe_spec s;

		if (!ASSERT_NEQ(parse(cases[i].json, &s, &err), 0) ||
		    !ASSERT_STRCONTAINS(err.msg, cases[i].msg))
			return false;
	}
	return true;
}

static bool selects(const struct probe_spec *s, const char *labels)
{
	cJSON *l = cJSON_Parse(labels);
	bool r = probe_spec__selects(s, l);

	cJSON_Delete(l);
	return r;
}

TEST(probe_selector)
{
	struct rw_error err = { "" };
	struct probe_spec s;
	bool ok;

	if (!ASSERT_OK(
		    parse("{\"selector\":{\"matchLabels\":{\"app\":\"web\"},\"matchExpressions\":["
			  "{\"key\":\"tier\",\"operator\":\"In\",\"values\":[\"a\",\"b\"]},"
			  "{\"key\":\"canary\",\"operator\":\"DoesNotExist\"},"
			  "{\"key\":\"zone\",\"operator\":\"NotIn\",\"values\":[\"x\"]},"
			  "{\"key\":\"team\",\"operator\":\"Exists\"}]},\"functions\":[\"f\"]}",
			  &s, &err)))
		return CHECK(false, "%s", err.msg);
	ok = ASSERT_TRUE(selects(&s, "{\"app\":\"web\",\"tier\":\"b\",\"team\":\"t\"}")) &&
	     ASSERT_TRUE(selects(
		     &s, "{\"app\":\"web\",\"tier\":\"a\",\"team\":\"t\",\"zone\":\"y\"}")) &&
	     ASSERT_FALSE(selects(&s, "{\"app\":\"db\",\"tier\":\"a\",\"team\":\"t\"}")) &&
	     ASSERT_FALSE(selects(&s, "{\"app\":\"web\",\"tier\":\"c\",\"team\":\"t\"}")) &&
	     ASSERT_FALSE(selects(
		     &s, "{\"app\":\"web\",\"tier\":\"a\",\"team\":\"t\",\"canary\":\"1\"}")) &&
	     ASSERT_FALSE(selects(
		     &s, "{\"app\":\"web\",\"tier\":\"a\",\"team\":\"t\",\"zone\":\"x\"}")) &&
	     ASSERT_FALSE(selects(&s, "{\"app\":\"web\",\"tier\":\"a\"}")) &&
	     ASSERT_FALSE(selects(&s, "null"));
	probe_spec__free(&s);
	if (!ok)
		return false;
	/* an empty selector selects every pod of the namespace */
	if (!ASSERT_OK(parse("{\"selector\":{},\"functions\":[\"f\"]}", &s, &err)))
		return false;
	ok = ASSERT_TRUE(selects(&s, "{}")) && ASSERT_TRUE(selects(&s, "null"));
	probe_spec__free(&s);
	return ok;
}

TEST(probe_spec_library_patterns)
{
	char json[1024], lib[400];
	struct rw_error err = { "" };
	struct probe_spec s;
	bool ok;

	if (!ASSERT_OK(parse("{\"selector\":{},\"functions\":[\"libssl*:SSL_write\","
			     "\"libc.so.6:malloc\",\"shop::Cart::total\"]}",
			     &s, &err)))
		return false;
	ok = ASSERT_EQ(s.nfunctions, 3) && ASSERT_STREQ(s.functions[0], "libssl*:SSL_write");
	probe_spec__free(&s);
	memset(lib, 'a', 300);
	lib[300] = '\0';
	snprintf(json, sizeof(json), "{\"selector\":{},\"functions\":[\"main.x\",\"%s.so:f\"]}",
		 lib);
	return ok && ASSERT_EQ(parse(json, &s, &err), -EINVAL) &&
	       ASSERT_STRCONTAINS(err.msg, "spec.functions[1]: the library part");
}
