/* SPDX-License-Identifier: MIT */
/*
 * The process's open descriptors and its limit of them. Each traced
 * (process, function) pair holds uprobe links, so an agent over many pods
 * holds thousands: this says how close it is to RLIMIT_NOFILE.
 */
#ifndef RETWATCH_OPENFILES_H
#define RETWATCH_OPENFILES_H

#include <stddef.h>
#include <stdint.h>

struct open_files {
	size_t open;	     /* entries of /proc/self/fd */
	uint64_t soft, hard; /* RLIMIT_NOFILE */
};

/* Counts this process's descriptors and reads its limit. 0 or -errno. */
int open_files__read(struct open_files *ret);

#endif
