// SPDX-License-Identifier: MIT
/* A ClusterFunctionProbe as the agent reads it: its namespaceSelector checked
 * and trimmed, and its expansion into a probe per selected namespace. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/cfprobe.h"
#include "kube/kobj.h"
#include "test.h"

#define NAMESPACES                                                                              \
	"[{\"metadata\":{\"name\":\"shop-a\",\"labels\":{\"team\":\"shop\"}}},"                 \
	"{\"metadata\":{\"name\":\"shop-b\",\"labels\":{\"team\":\"shop\",\"tier\":\"dev\"}}}," \
	"{\"metadata\":{\"name\":\"bank\",\"labels\":{\"team\":\"bank\"}}},"                    \
	"{\"metadata\":{\"name\":\"bad/name\",\"labels\":{\"team\":\"shop\"}}}]"

/* The probe (its namespaceSelector as JSON) listed with the namespaces:
 * the namespaces it expands into, comma-separated, into buf; its error. */
static bool expand(const char *nssel, char *buf, size_t len, char *err, size_t errlen)
{
	char json[1024];
	cJSON *objs, *nss = cJSON_Parse(NAMESPACES), *out;
	struct cfprobe *list = NULL;
	const cJSON *o;
	size_t n = 0;

	snprintf(json, sizeof(json),
		 "[{\"metadata\":{\"uid\":\"u-1\",\"name\":\"every\",\"generation\":3},"
		 "\"spec\":{\"namespaceSelector\":%s,\"selector\":{\"matchLabels\":{\"app\":"
		 "\"web\"}},\"functions\":[\"main.f\"]},\"status\":{\"reportInterval\":\"4s\"}}]",
		 nssel);
	objs = cJSON_Parse(json);
	if (!objs || !nss)
		return false;
	cfprobe__trim(cJSON_GetArrayItem(objs, 0));
	cfprobes__sync(&list, objs, NULL, NULL);
	out = cfprobes__expand(list, objs, nss);
	buf[0] = '\0';
	snprintf(err, errlen, "%s", list ? list->spec_err : "no probe");
	cJSON_ArrayForEach(o, out)
	{
		n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "," : "", kobj_namespace(o));
		/* each as a FunctionProbe of that namespace would be */
		if (strcmp(kobj_str(o, CFPROBE_UID_FIELD), "u-1") ||
		    kobj_get(kobj_get(o, "spec"), "namespaceSelector") || kobj_generation(o) != 3 ||
		    strcmp(kobj_str(kobj_get(o, "status"), "reportInterval"), "4s"))
			n += (size_t)snprintf(buf + n, len - n, "(odd)");
	}
	cJSON_Delete(out);
	cfprobes__free(list);
	cJSON_Delete(objs);
	cJSON_Delete(nss);
	return true;
}

TEST(cfprobe_expands_per_selected_namespace)
{
	char got[256], err[512];

	return ASSERT_TRUE(expand("{\"matchLabels\":{\"team\":\"shop\"}}", got, sizeof(got), err,
				  sizeof(err))) &&
	       ASSERT_STREQ(got, "shop-a,shop-b") && ASSERT_STREQ(err, "") &&
	       ASSERT_TRUE(expand("{}", got, sizeof(got), err, sizeof(err))) &&
	       ASSERT_STREQ(got, "shop-a,shop-b,bank") &&
	       ASSERT_TRUE(expand("{\"matchLabels\":{\"team\":\"shop\"},\"matchExpressions\":[{"
				  "\"key\":\"tier\",\"operator\":\"DoesNotExist\"}]}",
				  got, sizeof(got), err, sizeof(err))) &&
	       ASSERT_STREQ(got, "shop-a");
}

TEST(cfprobe_bad_namespace_selector_says_what_to_change)
{
	char got[256], err[512], many[8192];
	size_t n = 0;

	if (!ASSERT_TRUE(expand("{\"matchExpressions\":[{\"key\":\"team\",\"operator\":"
				"\"Near\",\"values\":[\"a\"]}]}",
				got, sizeof(got), err, sizeof(err))) ||
	    !ASSERT_STREQ(got, "") ||
	    !ASSERT_STREQ(err, "spec.namespaceSelector.matchExpressions[0].operator must be In, "
			       "NotIn, Exists or DoesNotExist") ||
	    !ASSERT_TRUE(expand("null", got, sizeof(got), err, sizeof(err))) ||
	    !ASSERT_STRCONTAINS(err, "spec.namespaceSelector is required") ||
	    !ASSERT_TRUE(expand("{\"matchLabels\":\"team=shop\"}", got, sizeof(got), err,
				sizeof(err))) ||
	    !ASSERT_STREQ(err, "spec.namespaceSelector.matchLabels must map keys to values"))
		return false;
	/* over the bounds: the trim keeps only why, and a second trim keeps that */
	n += (size_t)snprintf(many, sizeof(many), "{\"matchLabels\":{");
	for (int i = 0; i < 65; i++)
		n += (size_t)snprintf(many + n, sizeof(many) - n, "%s\"k%d\":\"v\"", i ? "," : "",
				      i);
	snprintf(many + n, sizeof(many) - n, "}}");
	return ASSERT_TRUE(expand(many, got, sizeof(got), err, sizeof(err))) &&
	       ASSERT_STREQ(got, "") &&
	       ASSERT_STRCONTAINS(err,
				  "spec.namespaceSelector.matchLabels has more than 64 entries");
}
