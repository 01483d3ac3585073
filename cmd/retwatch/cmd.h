/* SPDX-License-Identifier: MIT */
/* The subcommands of retwatch. */
#ifndef RETWATCH_CMD_H
#define RETWATCH_CMD_H

#include <stdio.h>

/* Prints the usage of every subcommand to f (main.c): inspect shares it. */
void cmd_usage(FILE *f);

/* --debug-dir DIR (debugfile.h): 0, or 2 (a usage error) with a message said. */
int cmd_debug_dir(const char *dir);

/* Each returns the exit code: 0, 1 when the command failed, 2 for a usage error. */
int cmd_inspect(int argc, char **argv);
int cmd_trace(int argc, char **argv);

#endif
