/* The schedule commands of the client: list, show, add, edit, rm, pause,
 * resume, run. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_int.h"
#include "cli/format.h"

/* Runs shown by `schedule show`: the plan ahead and what was lost. */
#define SHOW_UPCOMING "10"
#define SHOW_MISSED 10

enum kind { K_STR, K_REAL, K_INT };

/* The flags that map one-to-one onto a schedule's fields. */
static const struct field {
  int id;
  const char *flag, *key;
  enum kind kind;
  long long min, max;
} fields[] = {
    {O_NAME, "--name", "name", K_STR, 0, 0},
    {O_PROJECT, "--project", "project", K_STR, 0, 0},
    {O_SPIDER, "--spider", "spider", K_STR, 0, 0},
    {O_VERSION, "--version", "version", K_STR, 0, 0},
    {O_CRON, "--cron", "cron", K_STR, 0, 0},
    {O_EVERY, "--every", "interval", K_REAL, 0, 0},
    {O_AT, "--at", "at", K_STR, 0, 0},
    {O_TZ, "--tz", "tz", K_STR, 0, 0},
    {O_START, "--start", "start", K_STR, 0, 0},
    {O_END, "--end", "end", K_STR, 0, 0},
    {O_JITTER, "--jitter", "jitter", K_REAL, 0, 0},
    {O_OVERLAP, "--overlap", "overlap", K_STR, 0, 0},
    {O_MISSED, "--missed", "missed", K_STR, 0, 0},
    {O_CATCHUP, "--catchup-max", "catchup_max", K_INT, 1, 1000},
    {O_PRIORITY, "--priority", "priority", K_REAL, 0, 0},
    {O_TIMEOUT, "--timeout", "timeout", K_REAL, 0, 0},
    {O_RETRIES, "--retries", "retries", K_INT, 0, 100},
    {O_BACKOFF, "--retry-backoff", "retry_backoff", K_REAL, 0, 0},
};

static int set_field(json_t *b, const struct field *f, const char *v, char *err, size_t errlen) {
  double d;
  long long n;
  switch (f->kind) {
  case K_STR:
    return json_object_set_new(b, f->key, json_string(v)) ? -ENOMEM : 0;
  case K_REAL:
    if (cli_parse_double(v, &d)) {
      snprintf(err, errlen, "%s '%s': expected a number", f->flag, v);
      return -EINVAL;
    }
    return json_object_set_new(b, f->key, json_real(d)) ? -ENOMEM : 0;
  case K_INT:
    if (cli_parse_long(v, f->min, f->max, &n)) {
      snprintf(err, errlen, "%s '%s': expected a whole number from %lld to %lld", f->flag, v,
               f->min, f->max);
      return -EINVAL;
    }
    return json_object_set_new(b, f->key, json_integer(n)) ? -ENOMEM : 0;
  }
  return -EINVAL;
}

int cli_schedule_body(const cli_args_t *a, int edit, json_t **body, char *err, size_t errlen) {
  json_t *b = json_object();
  int rc = b ? 0 : -ENOMEM;
  if (!rc && !edit) rc = json_object_set_new(b, "name", json_string(a->pos[0])) ? -ENOMEM : 0;
  for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]) && !rc; i++) {
    const char *v = cli_args_get(a, fields[i].id);
    if (v) rc = set_field(b, &fields[i], v, err, errlen);
  }
  if (!rc) rc = cli_pairs_option(a, O_ARG, "--arg", b, "args", err, errlen);
  if (!rc) rc = cli_pairs_option(a, O_SET, "--set", b, "settings", err, errlen);
  json_t *hooks = NULL;
  for (size_t i = 0; i < a->nopts && !rc; i++) {
    if (a->opts[i].id != O_WEBHOOK) continue;
    if (!hooks && !(hooks = json_array())) rc = -ENOMEM;
    if (!rc) json_array_append_new(hooks, json_string(a->opts[i].value));
  }
  if (hooks) json_object_set_new(b, "webhooks", hooks);
  json_t *cals = NULL;
  for (size_t i = 0; i < a->nopts && !rc; i++) {
    if (a->opts[i].id != O_CALENDAR) continue;
    if (!cals && !(cals = json_array())) rc = -ENOMEM;
    /* --calendar "" takes every calendar out of the schedule */
    if (!rc && a->opts[i].value[0]) json_array_append_new(cals, json_string(a->opts[i].value));
  }
  if (cals) json_object_set_new(b, "calendars", cals);
  if (!rc && cli_args_get(a, O_PAUSED)) json_object_set_new(b, "paused", json_true());
  if (!rc) {
    int whens = !!json_object_get(b, "cron") + !!json_object_get(b, "interval") +
                !!json_object_get(b, "at");
    if (whens > 1) {
      snprintf(err, errlen, "give one of --cron, --every and --at");
      rc = -EINVAL;
    } else if (!edit && whens == 0) {
      snprintf(err, errlen, "when to run: --cron EXPR, --every SECONDS or --at TIME");
      rc = -EINVAL;
    } else if (!edit && (!json_object_get(b, "project") || !json_object_get(b, "spider"))) {
      snprintf(err, errlen, "--project and --spider are required");
      rc = -EINVAL;
    } else if (edit && json_object_size(b) == 0) {
      snprintf(err, errlen, "nothing to change");
      rc = -EINVAL;
    }
  }
  return cli_body_done(b, rc, body, err, errlen);
}

/* One cell for every kind: "cron EXPR", "every 300s", "at LOCAL-TIME". */
static void when_text(const json_t *s, const char *key, char *buf, size_t n) {
  (void)key;
  char v[256];
  const char *kind = json_string_value(json_object_get(s, "kind"));
  if (kind && !strcmp(kind, "interval")) {
    fmt_field(s, "interval", v, sizeof(v));
    snprintf(buf, n, "every %ss", v);
  } else if (kind && !strcmp(kind, "once")) {
    fmt_iso_field(s, "at", v, sizeof(v));
    snprintf(buf, n, "at %s", v);
  } else {
    fmt_field(s, "cron", v, sizeof(v));
    snprintf(buf, n, "cron %s", v);
  }
}

/* The first of the times in key ("next_runs"), in local time. */
static void next_run_text(const json_t *s, const char *key, char *buf, size_t n) {
  const json_t *next = json_object_get(s, key);
  json_t *wrap = json_pack("{s:O}", "t", json_array_get(next, 0));
  buf[0] = '\0';
  if (wrap && json_array_size(next)) fmt_iso_field(wrap, "t", buf, n);
  json_decref(wrap);
}

/* "project/spider" */
static void spider_text(const json_t *s, const char *key, char *buf, size_t n) {
  (void)key;
  char p[256], sp[256];
  fmt_field(s, "project", p, sizeof(p));
  fmt_field(s, "spider", sp, sizeof(sp));
  snprintf(buf, n, "%s/%s", p, sp);
}

static int cmd_list(cli_ctx_t *ctx, const cli_args_t *a) {
  /* Every page, so the table is the whole set whatever its size. */
  json_t *all = json_array(), *r = NULL;
  char cursor[128] = "";
  int rc = all ? CLI_OK : CLI_EAPI;
  while (rc == CLI_OK) {
    const char *q[] = {"limit", "1000", "cursor", cursor[0] ? cursor : NULL, NULL};
    rc = cli_call(ctx, "GET", (const char *[]){"schedules"}, 1, q, NULL, &r);
    if (rc) break;
    json_array_extend(all, json_object_get(r, "schedules"));
    const char *next = json_string_value(json_object_get(r, "next_cursor"));
    snprintf(cursor, sizeof(cursor), "%s", next ? next : "");
    json_decref(r);
    if (!cursor[0]) break;
  }
  if (rc == CLI_OK && ctx->json) {
    json_t *page = json_pack("{s:O,s:n}", "schedules", all, "next_cursor");
    cli_print_json(page);
    json_decref(page);
  } else if (rc == CLI_OK) {
    static const fmt_col_t cols[] = {
        {"ID", "id", fmt_field},          {"NAME", "name", fmt_field},
        {"SPIDER", NULL, spider_text},    {"WHEN", NULL, when_text},
        {"TZ", "tz", fmt_field},          {"PAUSED", "paused", fmt_field},
        {"NEXT RUN", "next_runs", next_run_text}, {"OVERLAP", "overlap", fmt_field},
        {"MISSED", "missed", fmt_field}};
    fmt_json_table(stdout, all, 0, cols, sizeof(cols) / sizeof(cols[0]), NULL);
  }
  json_decref(all);
  return rc;
}

static void print_runs(const char *title, const json_t *runs, size_t from) {
  size_t n = json_array_size(runs);
  if (from >= n) {
    printf("%s: none\n", title);
    return;
  }
  printf("%s:\n", title);
  static const fmt_col_t cols[] = {{"DUE", "due_ms", fmt_ms_field},
                                   {"FIRES", "fire_ms", fmt_ms_field},
                                   {"STATE", "state", fmt_field},
                                   {"JOB", "job_id", fmt_field},
                                   {"REASON", "reason", fmt_field}};
  fmt_json_table(stdout, runs, from, cols, sizeof(cols) / sizeof(cols[0]), "  ");
}

/* A pause's note: "why (by WHO, at TIME)", or nothing. */
static void pause_note_text(const json_t *s, const char *key, char *buf, size_t n) {
  const json_t *note = json_object_get(s, key);
  const char *why = json_string_value(json_object_get(note, "why"));
  const char *by = json_string_value(json_object_get(note, "by"));
  const char *at = json_string_value(json_object_get(note, "at"));
  if (!json_is_object(note)) snprintf(buf, n, "-");
  else snprintf(buf, n, "%s (by %s, at %s)", why ? why : "no reason given", by ? by : "?",
                at ? at : "?");
}

static void print_schedule(const json_t *s) {
  /* the reader's order; a time or an object reads as one */
  static const fmt_col_t rows[] = {
      {"id", "id", fmt_auto_field}, {"name", "name", fmt_auto_field},
      {"project", "project", fmt_auto_field}, {"spider", "spider", fmt_auto_field},
      {"version", "version", fmt_auto_field}, {"when", NULL, when_text},
      {"tz", "tz", fmt_auto_field}, {"start", "start", fmt_iso_field},
      {"end", "end", fmt_iso_field}, {"jitter", "jitter", fmt_auto_field},
      {"overlap", "overlap", fmt_auto_field}, {"missed", "missed", fmt_auto_field},
      {"catchup max", "catchup_max", fmt_auto_field}, {"paused", "paused", fmt_auto_field},
      {"pause note", "pause_note", pause_note_text}, {"args", "args", fmt_auto_field}, {"settings", "settings", fmt_auto_field},
      {"priority", "priority", fmt_auto_field}, {"timeout", "timeout", fmt_auto_field},
      {"retries", "retries", fmt_auto_field}, {"retry backoff", "retry_backoff", fmt_auto_field},
      {"webhooks", "webhooks", fmt_auto_field}, {"created", "created_at", fmt_auto_field},
      {"updated", "updated_at", fmt_auto_field}, {"last due", "last_due_at", fmt_auto_field}};
  fmt_json_fields(stdout, s, rows, sizeof(rows) / sizeof(rows[0]), 14);
}

static int cmd_show(cli_ctx_t *ctx, const cli_args_t *a) {
  const char *id = a->pos[0];
  json_t *s = NULL, *up = NULL, *missed = NULL;
  const char *qu[] = {"state", "upcoming", "limit", SHOW_UPCOMING, NULL};
  const char *qm[] = {"state", "missed", "limit", "1000", NULL};
  int rc = cli_call(ctx, "GET", (const char *[]){"schedules", id}, 2, NULL, NULL, &s);
  if (!rc) rc = cli_call(ctx, "GET", (const char *[]){"schedules", id, "runs"}, 3, qu, NULL, &up);
  if (!rc) rc = cli_call(ctx, "GET", (const char *[]){"schedules", id, "runs"}, 3, qm, NULL, &missed);
  if (rc) goto out;
  /* Runs come oldest first: the recent missed ones are at the end. */
  const json_t *mr = json_object_get(missed, "runs");
  size_t nm = json_array_size(mr), from = nm > SHOW_MISSED ? nm - SHOW_MISSED : 0;
  if (ctx->json) {
    json_t *recent = json_array();
    for (size_t i = from; i < nm; i++) json_array_append(recent, json_array_get(mr, i));
    json_t *o = json_pack("{s:O,s:O,s:o}", "schedule", s, "upcoming", json_object_get(up, "runs"),
                          "missed", recent);
    cli_print_json(o);
    json_decref(o);
  } else {
    print_schedule(s);
    print_runs("upcoming runs", json_object_get(up, "runs"), 0);
    char title[64];
    if (nm > SHOW_MISSED)
      snprintf(title, sizeof(title), "missed runs (%zu in all, latest %d)", nm, SHOW_MISSED);
    else
      snprintf(title, sizeof(title), "missed runs");
    print_runs(title, mr, from);
  }
out:
  json_decref(s);
  json_decref(up);
  json_decref(missed);
  return rc;
}

/* "created|updated schedule NAME (id N), next run: TIME" */
static void print_written(const char *verb, const json_t *r) {
  char id[32], name[256], next[64];
  fmt_field(r, "id", id, sizeof(id));
  fmt_field(r, "name", name, sizeof(name));
  next_run_text(r, "next_runs", next, sizeof(next));
  printf("%s schedule %s (id %s), next run: %s\n", verb, name, id, next[0] ? next : "none");
}

static void print_created(const json_t *r) { print_written("created", r); }
static void print_updated(const json_t *r) { print_written("updated", r); }

static int write_cmd(cli_ctx_t *ctx, const cli_args_t *a, int edit) {
  json_t *body = NULL, *r = NULL;
  char err[512];
  if (cli_schedule_body(a, edit, &body, err, sizeof(err))) return cli_usage_error(ctx, "%s", err);
  int rc = edit ? cli_call(ctx, "PATCH", (const char *[]){"schedules", a->pos[0]}, 2, NULL, body, &r)
                : cli_call(ctx, "POST", (const char *[]){"schedules"}, 1, NULL, body, &r);
  json_decref(body);
  return rc ? rc : cli_answer(ctx, r, edit ? print_updated : print_created);
}

static int cmd_add(cli_ctx_t *ctx, const cli_args_t *a) { return write_cmd(ctx, a, 0); }
static int cmd_edit(cli_ctx_t *ctx, const cli_args_t *a) { return write_cmd(ctx, a, 1); }

static int cmd_rm(cli_ctx_t *ctx, const cli_args_t *a) {
  char done[512];
  snprintf(done, sizeof(done), "deleted schedule %s", a->pos[0]);
  return cli_delete(ctx, (const char *[]){"schedules", a->pos[0]}, 2, done);
}

/* The fired job's id alone, for scripts. */
static void print_id(const json_t *r) {
  char id[32];
  fmt_field(r, "id", id, sizeof(id));
  printf("%s\n", id);
}

static void print_paused(const json_t *r) {
  char name[256];
  fmt_field(r, "name", name, sizeof(name));
  printf("paused schedule %s\n", name);
}

static void print_resumed(const json_t *r) {
  char name[256];
  fmt_field(r, "name", name, sizeof(name));
  printf("resumed schedule %s\n", name);
}

/* pause, resume and run share a shape: POST /schedules/{s}/VERB. */
static int verb_cmd(cli_ctx_t *ctx, const cli_args_t *a, const char *verb,
                    void (*print)(const json_t *r)) {
  json_t *body = NULL, *r = NULL;
  const char *prio = cli_args_get(a, O_PRIORITY), *note = cli_args_get(a, O_NOTE);
  double d;
  if (note) body = json_pack("{s:s}", "note", note);
  if (prio) {
    if (cli_parse_double(prio, &d)) return cli_usage_error(ctx, "--priority '%s': expected a number", prio);
    body = json_pack("{s:f}", "priority", d);
  }
  int rc = cli_call(ctx, "POST", (const char *[]){"schedules", a->pos[0], verb}, 3, NULL, body, &r);
  json_decref(body);
  return rc ? rc : cli_answer(ctx, r, print);
}

static int cmd_pause(cli_ctx_t *ctx, const cli_args_t *a) { return verb_cmd(ctx, a, "pause", print_paused); }
static int cmd_resume(cli_ctx_t *ctx, const cli_args_t *a) { return verb_cmd(ctx, a, "resume", print_resumed); }
static int cmd_run(cli_ctx_t *ctx, const cli_args_t *a) { return verb_cmd(ctx, a, "run", print_id); }

static const cli_opt_t common_opts[] = {CLI_COMMON_OPTS};
static const cli_opt_t run_opts[] = {{"priority", 0, 1, O_PRIORITY}, CLI_COMMON_OPTS};
static const cli_opt_t pause_opts[] = {{"note", 0, 1, O_NOTE}, CLI_COMMON_OPTS};
/* add and edit take the same flags; --name renames in edit only. */
#define SCHEDULE_FIELD_OPTS                                                                    \
  {"project", 'p', 1, O_PROJECT}, {"spider", 's', 1, O_SPIDER}, {"version", 0, 1, O_VERSION},  \
      {"cron", 0, 1, O_CRON}, {"every", 0, 1, O_EVERY}, {"at", 0, 1, O_AT}, {"tz", 0, 1, O_TZ}, \
      {"start", 0, 1, O_START}, {"end", 0, 1, O_END}, {"jitter", 0, 1, O_JITTER},              \
      {"overlap", 0, 1, O_OVERLAP}, {"missed", 0, 1, O_MISSED},                                \
      {"catchup-max", 0, 1, O_CATCHUP}, {"arg", 'a', 1, O_ARG}, {"set", 0, 1, O_SET},          \
      {"priority", 0, 1, O_PRIORITY}, {"timeout", 0, 1, O_TIMEOUT},                            \
      {"retries", 0, 1, O_RETRIES}, {"retry-backoff", 0, 1, O_BACKOFF},                        \
      {"webhook", 0, 1, O_WEBHOOK}, {"paused", 0, 0, O_PAUSED}, {"calendar", 0, 1, O_CALENDAR}
static const cli_opt_t add_opts[] = {SCHEDULE_FIELD_OPTS, CLI_COMMON_OPTS};
static const cli_opt_t edit_opts[] = {SCHEDULE_FIELD_OPTS, {"name", 0, 1, O_NAME}, CLI_COMMON_OPTS};

#define SCHEDULE_FIELD_HELP                                                          \
  "  -p, --project P  -s, --spider S  --version V (default: the latest at each run)\n" \
  "  --cron EXPR        5 fields, or 6 with seconds first, or @hourly/@daily/...\n"  \
  "  --every SECONDS    interval, counted from --start (or creation)\n"              \
  "  --at TIME          one run (ISO 8601; without an offset: wall time in --tz)\n"  \
  "  --tz ZONE          IANA zone for cron, at, start, end (default UTC)\n"          \
  "  --start T --end T  the window in which runs happen\n"                           \
  "  --jitter S         delay each run by a random amount below S seconds\n"         \
  "  --overlap P        allow (default), skip, queue, replace\n"                     \
  "  --missed P         skip (default), once, catchup  [--catchup-max N]\n"          \
  "  -a, --arg K=V      spider argument (repeatable)\n"                              \
  "  --set K=V          Scrapy setting (repeatable)\n"                               \
  "  --priority N  --timeout S  --retries N  --retry-backoff S\n"                    \
  "  --webhook URL      receives the schedule's job events (repeatable)\n"           \
  "  --paused           do not fire until resumed\n"                               \
  "  --calendar NAME    skip runs due in this calendar (repeatable; \"\" = none)\n"

const cli_cmd_t cli_sched_cmds[] = {
    {"schedules", cmd_list, common_opts, 0, 0, "schedules",
     "Lists schedules: when they run, in which zone, the next run (local time),\n"
     "and their overlap and missed-run policies.\n"},
    {"schedule list", cmd_list, common_opts, 0, 0, "schedule list", "The same as `spiderd schedules`.\n"},
    {"schedule show", cmd_show, common_opts, 1, 1, "schedule show NAME|ID",
     "A schedule's details, its next " SHOW_UPCOMING " runs and its latest missed runs.\n"
     "With --json: {\"schedule\", \"upcoming\", \"missed\"}.\n"},
    {"schedule add", cmd_add, add_opts, 1, 1,
     "schedule add NAME --project P --spider S (--cron EXPR | --every SECONDS | --at TIME) "
     "[options]",
     "Creates a schedule.\n" SCHEDULE_FIELD_HELP},
    {"schedule edit", cmd_edit, edit_opts, 1, 1, "schedule edit NAME|ID [options]",
     "Changes only the fields given (--arg and --set replace the whole set).\n"
     "  --name NEW         rename\n" SCHEDULE_FIELD_HELP},
    {"schedule rm", cmd_rm, common_opts, 1, 1, "schedule rm NAME|ID", "Deletes a schedule.\n"},
    {"schedule pause", cmd_pause, pause_opts, 1, 1, "schedule pause NAME|ID [--note TEXT]",
     "Stops firing until resumed.\n"
     "  --note TEXT        why: kept with who paused it and when, until it is resumed\n"},
    {"schedule resume", cmd_resume, common_opts, 1, 1, "schedule resume NAME|ID",
     "Fires again.\n"},
    {"schedule run", cmd_run, run_opts, 1, 1, "schedule run NAME|ID [--priority N]",
     "Queues a job from the schedule now and prints its integer id.\n"},
};
const size_t cli_nsched_cmds = sizeof(cli_sched_cmds) / sizeof(cli_sched_cmds[0]);
