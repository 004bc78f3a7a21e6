/* The account commands: account list|show|add|set|remove, account
 * assign|unassign (a project, user or token) and account upcoming (its
 * schedules' next runs). An admin's, but for list, show and upcoming,
 * which a member may call for its own account. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_int.h"
#include "cli/format.h"

/* A JSON array of strings as "a,b" ("-" when empty). */
static void list_field(const json_t *o, const char *key, char *buf, size_t n) {
  const json_t *list = json_object_get(o, key), *v;
  size_t i, len = 0;
  snprintf(buf, n, "-");
  json_array_foreach(list, i, v) {
    int w = snprintf(buf + len, n - len, "%s%s", i ? "," : "", json_string_value(v));
    if (w < 0 || (size_t)w >= n - len) break;
    len += (size_t)w;
  }
}

/* max_running, with 0 spelt out. */
static void cap_field(const json_t *o, const char *key, char *buf, size_t n) {
  json_int_t v = json_integer_value(json_object_get(o, key));
  if (v > 0) snprintf(buf, n, "%lld", (long long)v);
  else snprintf(buf, n, "none");
}

static const fmt_col_t account_cols[] = {
    {"NAME", "name", fmt_field},           {"MAX RUNNING", "max_running", cap_field},
    {"RUNNING", "running", fmt_field},     {"PENDING", "pending", fmt_field},
    {"PROJECTS", "projects", list_field},  {"USERS", "users", list_field},
    {"TOKENS", "tokens", list_field},      {"DESCRIPTION", "description", fmt_field}};
#define NCOLS (sizeof(account_cols) / sizeof(account_cols[0]))

static void print_accounts(const json_t *r) {
  fmt_json_table(stdout, json_object_get(r, "accounts"), 0, account_cols, NCOLS, NULL);
}

static void print_account(const json_t *r) {
  static const fmt_col_t rows[] = {
      {"name:", "name", fmt_field},         {"description:", "description", fmt_field},
      {"max running:", "max_running", cap_field}, {"running:", "running", fmt_field},
      {"pending:", "pending", fmt_field},   {"projects:", "projects", list_field},
      {"users:", "users", list_field},      {"tokens:", "tokens", list_field},
      {"created:", "created", fmt_iso_field}};
  fmt_json_fields(stdout, r, rows, sizeof(rows) / sizeof(rows[0]), 13);
}

static int cmd_list(cli_ctx_t *ctx, const cli_args_t *a) {
  (void)a;
  return cli_show(ctx, (const char *[]){"accounts"}, 1, NULL, print_accounts);
}

static int cmd_show(cli_ctx_t *ctx, const cli_args_t *a) {
  return cli_show(ctx, (const char *[]){"accounts", a->pos[0]}, 2, NULL, print_account);
}

/* The body of account add (the name too) and account set. */
static int fields_body(const cli_args_t *a, int add, json_t **body, char *err, size_t n) {
  const char *desc = cli_args_get(a, O_DESCRIPTION), *cap = cli_args_get(a, O_MAX_RUNNING);
  long long num = 0;
  json_t *b = add ? json_pack("{s:s}", "name", a->pos[0]) : json_object();
  int rc = 0;
  if (cap && cli_parse_long(cap, 0, 1000000, &num)) {
    snprintf(err, n, "--max-running '%s': expected a number from 0 (no cap) to 1000000", cap);
    rc = -1;
  }
  if (!rc && !add && !desc && !cap) {
    snprintf(err, n, "nothing to change: give --description or --max-running");
    rc = -1;
  }
  if (b && !rc && desc) json_object_set_new(b, "description", json_string(desc));
  if (b && !rc && cap) json_object_set_new(b, "max_running", json_integer(num));
  return cli_body_done(b, b ? rc : -ENOMEM, body, err, n);
}

static int account_write(cli_ctx_t *ctx, const cli_args_t *a, int add) {
  json_t *body = NULL, *r = NULL;
  char err[512];
  if (fields_body(a, add, &body, err, sizeof(err))) return cli_usage_error(ctx, "%s", err);
  int rc = add ? cli_call(ctx, "POST", (const char *[]){"accounts"}, 1, NULL, body, &r)
               : cli_call(ctx, "PATCH", (const char *[]){"accounts", a->pos[0]}, 2, NULL, body,
                          &r);
  json_decref(body);
  return rc ? rc : cli_answer(ctx, r, print_account);
}

static int cmd_add(cli_ctx_t *ctx, const cli_args_t *a) { return account_write(ctx, a, 1); }
static int cmd_set(cli_ctx_t *ctx, const cli_args_t *a) { return account_write(ctx, a, 0); }

static int cmd_remove(cli_ctx_t *ctx, const cli_args_t *a) {
  char done[512];
  snprintf(done, sizeof(done), "removed account %s", a->pos[0]);
  return cli_delete(ctx, (const char *[]){"accounts", a->pos[0]}, 2, done);
}

/* account assign|unassign NAME project|user|token VALUE */
static int member(cli_ctx_t *ctx, const cli_args_t *a, const char *verb) {
  const char *kind = a->pos[1];
  if (strcmp(kind, "project") && strcmp(kind, "user") && strcmp(kind, "token"))
    return cli_usage_error(ctx, "'%s': expected project, user or token", kind);
  json_t *body = json_pack("{s:s}", kind, a->pos[2]), *r = NULL;
  int rc = cli_call(ctx, "POST", (const char *[]){"accounts", a->pos[0], verb}, 3, NULL, body,
                    &r);
  json_decref(body);
  if (rc) return rc;
  if (ctx->json)
    cli_print_json(r);
  else
    printf("%s %s %s %s account %s\n", strcmp(verb, "assign") ? "took" : "put", kind,
           a->pos[2], strcmp(verb, "assign") ? "out of" : "in", a->pos[0]);
  json_decref(r);
  return CLI_OK;
}

static int cmd_assign(cli_ctx_t *ctx, const cli_args_t *a) { return member(ctx, a, "assign"); }
static int cmd_unassign(cli_ctx_t *ctx, const cli_args_t *a) {
  return member(ctx, a, "unassign");
}

static void print_upcoming(const json_t *r) {
  static const fmt_col_t cols[] = {{"DUE", "due", fmt_field},
                                   {"SCHEDULE", "schedule", fmt_field},
                                   {"ID", "schedule_id", fmt_field}};
  fmt_json_table(stdout, json_object_get(r, "runs"), 0, cols, sizeof(cols) / sizeof(cols[0]),
                 NULL);
  if (!json_is_null(json_object_get(r, "next_cursor")))
    fprintf(stderr, "(more runs: raise --limit)\n");
}

static int cmd_upcoming(cli_ctx_t *ctx, const cli_args_t *a) {
  const char *limit = cli_args_get(a, O_LIMIT);
  long long num = 0;
  if (limit && cli_parse_long(limit, 1, 1000, &num))
    return cli_usage_error(ctx, "--limit '%s': expected a number from 1 to 1000", limit);
  const char *q[] = {"limit", limit, NULL};
  return cli_show(ctx, (const char *[]){"accounts", a->pos[0], "upcoming"}, 3,
                  limit ? q : NULL, print_upcoming);
}

static const cli_opt_t common_opts[] = {CLI_COMMON_OPTS};
static const cli_opt_t write_opts[] = {{"description", 0, 1, O_DESCRIPTION},
                                       {"max-running", 0, 1, O_MAX_RUNNING}, CLI_COMMON_OPTS};
static const cli_opt_t upcoming_opts[] = {{"limit", 'n', 1, O_LIMIT}, CLI_COMMON_OPTS};

#define WRITE_HELP                                                                   \
  "  --description D    what the account is (a customer, a team)\n"                 \
  "  --max-running N    at most N of its jobs run at once, across the cluster;\n"    \
  "                     the others wait pending (0: no cap)\n"

const cli_cmd_t cli_account_cmds[] = {
    {"account list", cmd_list, common_opts, 0, 0, "account list",
     "Lists accounts (a member sees its own): NAME, MAX RUNNING, RUNNING, PENDING,\n"
     "PROJECTS, USERS, TOKENS, DESCRIPTION.\n"},
    {"account show", cmd_show, common_opts, 1, 1, "account show NAME",
     "Shows one account, with its running and pending jobs.\n"},
    {"account add", cmd_add, write_opts, 1, 1,
     "account add NAME [--description D] [--max-running N]",
     "Creates an account. Its projects, users and tokens see and touch only its\n"
     "projects; admins see everything.\n" WRITE_HELP},
    {"account set", cmd_set, write_opts, 1, 1,
     "account set NAME [--description D] [--max-running N]",
     "Changes an account; only what is given changes.\n" WRITE_HELP},
    {"account remove", cmd_remove, common_opts, 1, 1, "account remove NAME",
     "Deletes an account without users or tokens; its projects are of no account\n"
     "after (admins' only).\n"},
    {"account assign", cmd_assign, common_opts, 3, 3,
     "account assign NAME project|user|token VALUE",
     "Puts a project (deployed or not yet), a user (its name) or a token (its id)\n"
     "in the account, out of any other. A user's tokens follow the user.\n"},
    {"account unassign", cmd_unassign, common_opts, 3, 3,
     "account unassign NAME project|user|token VALUE",
     "Takes a project, user or token out of the account.\n"},
    {"account upcoming", cmd_upcoming, upcoming_opts, 1, 1, "account upcoming NAME [-n N]",
     "The next runs of the account's schedules, in time order (DUE in the\n"
     "schedule's time zone), within the schedule horizon.\n"
     "  -n, --limit N      at most N runs (1-1000, default 100)\n"},
};
const size_t cli_naccount_cmds = sizeof(cli_account_cmds) / sizeof(cli_account_cmds[0]);
