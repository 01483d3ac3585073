// SPDX-License-Identifier: MIT
/*
 * /proc/PID/cgroup text, whose paths a process with a delegated cgroup can
 * name, and Pod status container ids, which the API server relays: any id
 * found is 64 lowercase hex digits taken from the input, any pod uid is made
 * of a uid's characters.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/cgroup.h"

static bool is_id(const char *id)
{
	if (strlen(id) != CGROUP_ID_LEN)
		return false;
	for (const char *p = id; *p; p++)
		if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
			return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char id[CGROUP_ID_LEN + 1], uid[CGROUP_UID_MAX + 1], *s;
	int ret = cgroup__parse_container_id((const char *)data, size, id);

	if (ret && ret != -ENOENT && ret != -EINVAL)
		__builtin_trap();
	if (!ret && (!is_id(id) || !memmem(data, size, id, CGROUP_ID_LEN)))
		__builtin_trap();
	/* the pod reading: an id of the input, a uid of uid characters */
	ret = cgroup__parse_pod((const char *)data, size, uid, id);
	if (ret && ret != -ENOENT && ret != -EINVAL)
		__builtin_trap();
	if (!ret &&
	    (!is_id(id) || !memmem(data, size, id, CGROUP_ID_LEN) || !uid[0] ||
	     strlen(uid) > CGROUP_UID_MAX || strspn(uid, "0123456789abcdefABCDEF-") != strlen(uid)))
		__builtin_trap();
	s = malloc(size + 1);
	if (!s)
		return 0;
	memcpy(s, data, size);
	s[size] = '\0';
	ret = cgroup__status_container_id(s, id);
	if (ret && ret != -EINVAL)
		__builtin_trap();
	if (!ret && (!is_id(id) || strcmp(id, s + strlen(s) - CGROUP_ID_LEN)))
		__builtin_trap();
	free(s);
	return 0;
}
