/* Shared by the client sub-commands' files (cli.c, cli_sched.c,
 * cli_auth.c) and their unit tests; not part of the CLI's interface.
 *
 * Ownership: request builders hand back new JSON references (json_decref)
 * and strings that point into the parsed arguments.
 */
#ifndef SPIDERD_CLI_INT_H
#define SPIDERD_CLI_INT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "cli/args.h"
#include "cli/client.h"

enum { CLI_OK = 0, CLI_EAPI = 1, CLI_EUSAGE = 2 };

enum cli_opt_id {
  O_URL = 1, O_USER, O_JSON, O_HELP,
  O_PROJECT, O_SPIDER, O_VERSION, O_NAME, O_CRON, O_EVERY, O_AT, O_TZ, O_START, O_END,
  O_JITTER, O_OVERLAP, O_MISSED, O_CATCHUP, O_ARG, O_SET, O_PRIORITY, O_TIMEOUT,
  O_RETRIES, O_BACKOFF, O_WEBHOOK, O_PAUSED, O_STATE, O_SCHEDULE, O_LIMIT, O_SIGNAL,
  O_FOLLOW, O_FROM_START, O_TAIL, O_TYPE, O_AFTER, O_JOB, O_JOBID, O_UNIQUE_KEY, O_CACERT,
  O_TOKEN, O_TOKEN_FILE, O_ROLE, O_EXPIRES, O_PASSWORD_FILE, O_ALL_PROJECTS,
  O_CANCEL,
  O_PROCESSES,
  O_TEST, O_MAX_ITEMS, O_MAX_PAGES, O_MAX_SECONDS,
  O_DESCRIPTION, O_MAX_RUNNING,
  O_FROM, O_TO, O_REDO_FAILED, O_NEWEST, O_DRY_RUN, O_SLOT_ARG, O_SLOT_DATE,
  O_DATE, O_WEEKDAY, O_HOURS, O_NOTE, O_CALENDAR,
  O_HEALTH,
};

/* Every client command takes these (listed last in each command's table). */
#define CLI_COMMON_OPTS                                                              \
  {"url", 0, 1, O_URL}, {"user", 'u', 1, O_USER}, {"token", 0, 1, O_TOKEN},         \
      {"token-file", 0, 1, O_TOKEN_FILE}, {"json", 0, 0, O_JSON},                   \
      {"cacert", 0, 1, O_CACERT}, {"help", 'h', 0, O_HELP}, { NULL, 0, 0, 0 }

typedef struct cli_ctx cli_ctx_t;

typedef struct cli_cmd {
  const char *name;     /* "status", "schedule add" */
  int (*run)(cli_ctx_t *ctx, const cli_args_t *a);
  const cli_opt_t *opts;
  size_t min_pos, max_pos;
  const char *synopsis; /* after "spiderd " */
  const char *help;     /* what it does and its own options */
} cli_cmd_t;

struct cli_ctx {
  const cli_cmd_t *cmd;
  client_t client;
  int json; /* --json: print the API's JSON, not a table */
};

/* ---- cli.c: plumbing for every command ---- */

/* Performs a call; on failure prints "spiderd: <reason>" to stderr.
 * Returns CLI_OK with *out (may be NULL) or CLI_EAPI. */
int cli_call(cli_ctx_t *ctx, const char *method, const char *const *segs, size_t nsegs,
             const char *const *query, json_t *body, json_t **out);

/* Prints "spiderd CMD: <message>" and the command's usage to stderr;
 * returns CLI_EUSAGE. */
int cli_usage_error(const cli_ctx_t *ctx, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

void cli_print_json(const json_t *j);

/* Prints the API's answer r: its JSON with --json, else what print makes
 * of it; takes r (json_decref). Returns CLI_OK. */
int cli_answer(cli_ctx_t *ctx, json_t *r, void (*print)(const json_t *r));

/* GET segs (with query q, may be NULL) and cli_answer with print. Returns
 * what cli_call or cli_answer returns. */
int cli_show(cli_ctx_t *ctx, const char *const *segs, size_t nsegs, const char *const *q,
             void (*print)(const json_t *r));

/* DELETE segs; unless --json, prints done (one line) when it worked.
 * Returns what cli_call returns. */
int cli_delete(cli_ctx_t *ctx, const char *const *segs, size_t nsegs, const char *done);

/* Adds "--arg k=v"-style options of id to obj[key] (created when needed).
 * Returns 0 or -EINVAL with a message in err. */
int cli_pairs_option(const cli_args_t *a, int id, const char *flag, json_t *obj, const char *key,
                     char *err, size_t errlen);

/* ---- request builders (pure; unit-tested) ---- */

/* The end of every builder below: on success hands b over in *body; on
 * failure frees it, *body = NULL, and an out-of-memory rc gets its message
 * in err (the others wrote theirs). Returns rc. */
int cli_body_done(json_t *b, int rc, json_t **body, char *err, size_t errlen);

/* The body of POST /schedules (edit = 0; the name is a.pos[0]) or of
 * PATCH /schedules/{s} (edit = 1; only what is given). Returns 0 with
 * *body, or -EINVAL with a message in err. */
int cli_schedule_body(const cli_args_t *a, int edit, json_t **body, char *err, size_t errlen);

/* The body of POST /jobs from `run PROJECT SPIDER [options]`. */
int cli_job_body(const cli_args_t *a, json_t **body, char *err, size_t errlen);

/* The query of GET /jobs: NULL-terminated k, v pairs in q (room for 16
 * entries); state values are joined into statebuf. */
int cli_jobs_query(const cli_args_t *a, const char **q, char *statebuf, size_t n, char *err,
                   size_t errlen);

/* ---- credentials and the auth commands' pieces (cli_auth.c; pure but
 * for the environment and files they read; unit-tested) ---- */

/* The credentials given on the command line or in the environment:
 * --token, else --token-file (its first line, trailing blanks stripped),
 * else --user; with none of them, $SPIDERD_TOKEN, else $SPIDERD_USER
 * ("user:password", or "user" with $SPIDERD_PASSWORD). --user with --token
 * or --token-file, or --token with --token-file, is an error. Sets *userpwd
 * or *token (malloc'd; the caller frees) or neither: then the caller may
 * take the config's. Returns 0, -EINVAL (a usage error, or an unreadable
 * token file) or -ENOMEM, with a message in err. */
int cli_credentials(const cli_args_t *a, char **userpwd, char **token, char *err, size_t errlen);

/* The first line of the file at path (at most 4 KiB), without its line
 * end; strip_blanks also drops trailing spaces and tabs (a token has none;
 * a password may end with one). An empty line is an error. Returns 0 with
 * *out (malloc'd) or a negative errno with a message naming path in err. */
int cli_read_first_line(const char *path, int strip_blanks, char **out, char *err,
                        size_t errlen);

/* "3600" (seconds), "90m", "12h", "30d", "2w" (also "45s") as seconds:
 * a whole number above 0. Returns 0 or -EINVAL. */
int cli_parse_duration(const char *s, long long *secs);

/* The body of POST /tokens from `token create [options]`. */
int cli_token_body(const cli_args_t *a, json_t **body, char *err, size_t errlen);

/* The body of POST /users (edit = 0: `user add NAME`, a.pos[0], with
 * password) or of PATCH /users/{name} (edit = 1: `user set` or `user
 * passwd`: only --role, --project/--all-projects and password when not
 * NULL). Returns 0 with *body, or -EINVAL with a message in err. */
int cli_user_body(const cli_args_t *a, int edit, const char *password, json_t **body, char *err,
                  size_t errlen);

/* Looks a command up by name ("schedule add"); NULL when unknown. */
const cli_cmd_t *cli_find(const char *name);

/* ---- the commands ---- */
extern const cli_cmd_t cli_sched_cmds[];
extern const size_t cli_nsched_cmds;
extern const cli_cmd_t cli_auth_cmds[];
/* cli_cal.c: schedule backfill, backfill(s), calendar(s) */
extern const cli_cmd_t cli_cal_cmds[];
extern const size_t cli_ncal_cmds;
/* The body of POST /calendars (or PUT /calendars/{name}): a.pos[0] is the
 * name; --tz, --date, --weekday, --hours, --note. */
int cli_calendar_body(const cli_args_t *a, json_t **body, char *err, size_t errlen);
/* The body of POST /schedules/{s}/backfill from `schedule backfill`. */
int cli_backfill_body(const cli_args_t *a, json_t **body, char *err, size_t errlen);
extern const size_t cli_nauth_cmds;
extern const cli_cmd_t cli_account_cmds[];
extern const size_t cli_naccount_cmds;

/* ---- interruption: -f loops stop cleanly on SIGINT/SIGTERM ---- */
/* Sleeps ms milliseconds or until a signal; 1 when one came. */
int cli_sleep_ms(int ms);

#endif
