/* Command-line options of the client sub-commands: a small table-driven
 * parser (getopt_long keeps global state and permutes argv, which makes
 * it awkward to test and to run twice in one process).
 *
 * Ownership: cli_args_parse() fills a caller-owned cli_args_t whose arrays
 * it allocates; the strings in them point into argv. cli_args_release()
 * frees the arrays.
 */
#ifndef SPIDERD_CLI_ARGS_H
#define SPIDERD_CLI_ARGS_H

#include <stddef.h>

typedef struct cli_opt {
  const char *name; /* long name without "--"; NULL ends a table */
  char short_name;  /* 0: none */
  int has_arg;
  int id;           /* what the command switches on; need not be unique */
} cli_opt_t;

typedef struct cli_optval {
  int id;
  const char *value; /* the argument, or NULL for a flag */
} cli_optval_t;

typedef struct cli_args {
  cli_optval_t *opts; /* every option given, in command-line order */
  size_t nopts;
  const char **pos;   /* the positional arguments, in order */
  size_t npos;
} cli_args_t;

/* Parses argv[0..argc) against table. Accepts "--name value",
 * "--name=value", "-x value", "-xvalue", "-x"; "--" ends the options and
 * a lone "-" is positional. Options and positionals may be mixed.
 * Returns 0, -EINVAL with a message in err (unknown option, missing or
 * unexpected argument), or -ENOMEM. On failure *a holds nothing. */
int cli_args_parse(const cli_opt_t *table, int argc, char **argv, cli_args_t *a, char *err,
                   size_t errlen);

void cli_args_release(cli_args_t *a);

/* The value of the last occurrence of option id (a flag's is ""), or NULL. */
const char *cli_args_get(const cli_args_t *a, int id);

/* Strict number parsing: the whole string, finite, no leading blanks.
 * Return 0 or -EINVAL. */
int cli_parse_double(const char *s, double *out);
int cli_parse_long(const char *s, long long min, long long max, long long *out);

#endif
