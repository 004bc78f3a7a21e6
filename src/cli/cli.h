/* spiderd's client sub-commands (status, schedules, jobs, logs, events),
 * which talk to a running daemon over its native REST API. */
#ifndef SPIDERD_CLI_H
#define SPIDERD_CLI_H

#include <stdio.h>

/* Is name a client sub-command ("status", "schedule", "jobs", ...)? */
int cli_is_command(const char *name);

/* Runs the sub-command argv[0] with its arguments; returns the process's
 * exit status: 0 success, 1 the API or the connection failed (the reason
 * is on stderr), 2 bad usage (with the command's usage on stderr). */
int cli_main(int argc, char **argv);

/* `spiderd help [CMD...]`: the usage of CMD, or the list of client
 * commands when argc is 0. Returns the exit status. */
int cli_help(int argc, char **argv, FILE *out);

/* The client commands' part of `spiderd help`. */
void cli_usage(FILE *out);

#endif
