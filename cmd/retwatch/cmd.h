/* SPDX-License-Identifier: MIT */
/* The subcommands of retwatch. */
#ifndef RETWATCH_CMD_H
#define RETWATCH_CMD_H

int cmd_trace(int argc, char **argv);

#endif
