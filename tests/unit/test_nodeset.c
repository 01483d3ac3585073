// SPDX-License-Identifier: MIT
/* The cluster's nodes the summary writer checks reports against (nodeset.h). */
#include <cjson/cJSON.h>

#include "agent/nodeset.h"
#include "test.h"

TEST(nodeset_checks_only_when_listed)
{
	struct nodeset ns = { 0 };
	cJSON *page1 = cJSON_Parse("{\"items\":[{\"metadata\":{\"name\":\"node-b\"}},"
				   "{\"metadata\":{}},{\"metadata\":{\"name\":\"node-a\"}}]}");
	cJSON *page2 = cJSON_Parse("{\"items\":[{\"metadata\":{\"name\":\"node-c\"}}]}");
	cJSON *none = cJSON_Parse("{\"items\":[]}");
	bool ok = ASSERT_TRUE(page1 && page2 && none) &&
		  /* nothing listed: every name passes */
		  ASSERT_TRUE(nodeset__has(&ns, "ghost"));

	ok = ok && ASSERT_OK(nodeset__add_page(&ns, page1)) &&
	     ASSERT_OK(nodeset__add_page(&ns, page2));
	nodeset__done(&ns);
	ok = ok && ASSERT_TRUE(ns.usable) && ASSERT_EQ(ns.n, 3) &&
	     ASSERT_TRUE(nodeset__has(&ns, "node-a")) && ASSERT_TRUE(nodeset__has(&ns, "node-c")) &&
	     ASSERT_FALSE(nodeset__has(&ns, "ghost")) && ASSERT_FALSE(nodeset__has(&ns, NULL));
	/* a list of none checks nothing */
	nodeset__clear(&ns);
	ok = ok && ASSERT_OK(nodeset__add_page(&ns, none));
	nodeset__done(&ns);
	ok = ok && ASSERT_FALSE(ns.usable) && ASSERT_TRUE(nodeset__has(&ns, "ghost"));
	nodeset__clear(&ns);
	cJSON_Delete(page1);
	cJSON_Delete(page2);
	cJSON_Delete(none);
	return ok;
}
