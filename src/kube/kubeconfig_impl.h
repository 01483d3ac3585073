/* SPDX-License-Identifier: MIT */
/* kubeconfig.c's helpers that incluster.c shares. */
#ifndef RETWATCH_KUBECONFIG_IMPL_H
#define RETWATCH_KUBECONFIG_IMPL_H

#include <stdbool.h>
#include <stddef.h>

/* Up to max bytes of a file into *ret (NUL-terminated); -EFBIG when it holds more. */
int kubeconfig__read_file(const char *path, size_t max, char **ret, size_t *ret_len);
/* A DNS-1123 label, as Kubernetes names namespaces: it goes into URL paths. */
bool kubeconfig__is_namespace(const char *s, size_t len);

#endif
