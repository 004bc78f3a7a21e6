/* The backfill and calendar commands of the client: schedule backfill,
 * backfills, backfill show|pause|resume|cancel, calendars and calendar
 * show|add|edit|rm. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli_int.h"
#include "cli/format.h"

/* ---- request builders ---- */

/* Every value of option id as a JSON array in b[key] (none given: unset). */
static int list_option(const cli_args_t *a, int id, json_t *b, const char *key) {
  json_t *arr = NULL;
  for (size_t i = 0; i < a->nopts; i++) {
    if (a->opts[i].id != id) continue;
    if (!arr && !(arr = json_array())) return -ENOMEM;
    if (json_array_append_new(arr, json_string(a->opts[i].value))) {
      json_decref(arr);
      return -ENOMEM;
    }
  }
  return arr && json_object_set_new(b, key, arr) ? -ENOMEM : 0;
}

static int str_option(const cli_args_t *a, int id, json_t *b, const char *key) {
  const char *v = cli_args_get(a, id);
  return v && json_object_set_new(b, key, json_string(v)) ? -ENOMEM : 0;
}

int cli_calendar_body(const cli_args_t *a, json_t **body, char *err, size_t errlen) {
  json_t *b = json_pack("{s:s}", "name", a->pos[0]);
  int rc = b ? 0 : -ENOMEM;
  if (!rc) rc = str_option(a, O_TZ, b, "tz");
  if (!rc) rc = list_option(a, O_DATE, b, "dates");
  if (!rc) rc = list_option(a, O_WEEKDAY, b, "weekdays");
  if (!rc) rc = list_option(a, O_HOURS, b, "hours");
  if (!rc) rc = str_option(a, O_NOTE, b, "note");
  if (!rc && !json_object_get(b, "dates") && !json_object_get(b, "weekdays") &&
      !json_object_get(b, "hours")) {
    snprintf(err, errlen, "what to leave out: --date D, --weekday DAY or --hours HH:MM-HH:MM");
    rc = -EINVAL;
  }
  return cli_body_done(b, rc, body, err, errlen);
}

int cli_backfill_body(const cli_args_t *a, json_t **body, char *err, size_t errlen) {
  json_t *b = json_object();
  int rc = b ? 0 : -ENOMEM;
  const char *m = cli_args_get(a, O_MAX_RUNNING);
  long long n = 1;
  if (!rc && (!cli_args_get(a, O_FROM) || !cli_args_get(a, O_TO))) {
    snprintf(err, errlen, "the window: --from TIME and --to TIME");
    rc = -EINVAL;
  }
  if (!rc && m && cli_parse_long(m, 1, 1000, &n)) {
    snprintf(err, errlen, "--max-running '%s': expected a whole number from 1 to 1000", m);
    rc = -EINVAL;
  }
  if (!rc) rc = str_option(a, O_FROM, b, "from");
  if (!rc) rc = str_option(a, O_TO, b, "to");
  if (!rc) rc = str_option(a, O_SLOT_ARG, b, "slot_arg");
  if (!rc && json_object_set_new(b, "max_running", json_integer(n))) rc = -ENOMEM;
  if (!rc && cli_args_get(a, O_REDO_FAILED)) json_object_set_new(b, "redo", json_string("failed"));
  if (!rc && cli_args_get(a, O_NEWEST)) json_object_set_new(b, "order", json_string("newest"));
  if (!rc && cli_args_get(a, O_DRY_RUN)) json_object_set_new(b, "dry_run", json_true());
  if (!rc && cli_args_get(a, O_SLOT_DATE))
    json_object_set_new(b, "slot_format", json_string("date"));
  return cli_body_done(b, rc, body, err, errlen);
}

/* ---- backfills ---- */

static void print_slots(const json_t *r) {
  const json_t *left = json_object_get(r, "left_out");
  char id[32];
  if (json_is_object(json_object_get(r, "backfill"))) {
    fmt_field(json_object_get(r, "backfill"), "id", id, sizeof(id));
    printf("started backfill %s: %lld runs\n", id,
           (long long)json_integer_value(json_object_get(r, "count")));
  } else {
    printf("%lld slots to run\n", (long long)json_integer_value(json_object_get(r, "count")));
    static const fmt_col_t cols[] = {{"DUE", "due_ms", fmt_ms_field}};
    fmt_json_table(stdout, json_object_get(r, "slots"), 0, cols, 1, "  ");
  }
  printf("left out: %lld that ran already, %lld in calendars\n",
         (long long)json_integer_value(json_object_get(left, "ran")),
         (long long)json_integer_value(json_object_get(left, "calendar")));
}

static int cmd_backfill(cli_ctx_t *ctx, const cli_args_t *a) {
  json_t *body = NULL, *r = NULL;
  char err[512];
  if (cli_backfill_body(a, &body, err, sizeof(err))) return cli_usage_error(ctx, "%s", err);
  int rc = cli_call(ctx, "POST", (const char *[]){"schedules", a->pos[0], "backfill"}, 3, NULL,
                    body, &r);
  json_decref(body);
  return rc ? rc : cli_answer(ctx, r, print_slots);
}

static const fmt_col_t backfill_cols[] = {
    {"ID", "id", fmt_field},         {"SCHEDULE", "schedule", fmt_field},
    {"FROM", "from", fmt_iso_field}, {"TO", "to", fmt_iso_field},
    {"RUNS", "slots", fmt_field},    {"RELEASED", "released", fmt_field},
    {"AT ONCE", "max_running", fmt_field}, {"STATE", "state", fmt_field},
    {"PAUSED", "paused", fmt_field}};

static void print_backfills(const json_t *r) {
  fmt_json_table(stdout, json_object_get(r, "backfills"), 0, backfill_cols,
                 sizeof(backfill_cols) / sizeof(backfill_cols[0]), NULL);
}

static int cmd_backfills(cli_ctx_t *ctx, const cli_args_t *a) {
  (void)a;
  return cli_show(ctx, (const char *[]){"backfills"}, 1, NULL, print_backfills);
}

static void print_backfill(const json_t *r) {
  static const fmt_col_t rows[] = {
      {"id:", "id", fmt_auto_field},          {"job:", "jobid", fmt_auto_field},
      {"schedule:", "schedule", fmt_auto_field}, {"from:", "from", fmt_iso_field},
      {"to:", "to", fmt_iso_field},           {"runs:", "slots", fmt_auto_field},
      {"released:", "released", fmt_auto_field}, {"at once:", "max_running", fmt_auto_field},
      {"redo:", "redo", fmt_auto_field},       {"order:", "order", fmt_auto_field},
      {"slot arg:", "slot_arg", fmt_auto_field}, {"state:", "state", fmt_auto_field},
      {"paused:", "paused", fmt_auto_field},   {"children:", "children", fmt_auto_field},
      {"created:", "created_at", fmt_auto_field}, {"ended:", "ended_at", fmt_auto_field}};
  fmt_json_fields(stdout, r, rows, sizeof(rows) / sizeof(rows[0]), 10);
}

static int cmd_backfill_show(cli_ctx_t *ctx, const cli_args_t *a) {
  return cli_show(ctx, (const char *[]){"backfills", a->pos[0]}, 2, NULL, print_backfill);
}

static int backfill_verb(cli_ctx_t *ctx, const cli_args_t *a, const char *verb) {
  json_t *r = NULL;
  int rc = cli_call(ctx, "POST", (const char *[]){"backfills", a->pos[0], verb}, 3, NULL, NULL,
                    &r);
  return rc ? rc : cli_answer(ctx, r, print_backfill);
}

static int cmd_backfill_pause(cli_ctx_t *ctx, const cli_args_t *a) {
  return backfill_verb(ctx, a, "pause");
}
static int cmd_backfill_resume(cli_ctx_t *ctx, const cli_args_t *a) {
  return backfill_verb(ctx, a, "resume");
}
static int cmd_backfill_cancel(cli_ctx_t *ctx, const cli_args_t *a) {
  return backfill_verb(ctx, a, "cancel");
}

/* ---- calendars ---- */

static void list_text(const json_t *o, const char *key, char *buf, size_t n) {
  const json_t *v = json_object_get(o, key);
  size_t i, len = 0;
  const json_t *x;
  buf[0] = '\0';
  json_array_foreach(v, i, x) {
    char one[64];
    if (json_is_string(x)) snprintf(one, sizeof(one), "%s", json_string_value(x));
    else snprintf(one, sizeof(one), "%lld", (long long)json_integer_value(x));
    int w = snprintf(buf + len, n - len, "%s%s", i ? "," : "", one);
    if (w < 0 || (size_t)w >= n - len) break;
    len += (size_t)w;
  }
}

static const fmt_col_t calendar_cols[] = {
    {"NAME", "name", fmt_field},        {"TZ", "tz", fmt_field},
    {"DATES", "dates", list_text},      {"WEEKDAYS", "weekdays", list_text},
    {"HOURS", "hours", list_text},      {"SCHEDULES", "schedules", list_text}};

static void print_calendars(const json_t *r) {
  fmt_json_table(stdout, json_object_get(r, "calendars"), 0, calendar_cols,
                 sizeof(calendar_cols) / sizeof(calendar_cols[0]), NULL);
}

static int cmd_calendars(cli_ctx_t *ctx, const cli_args_t *a) {
  (void)a;
  return cli_show(ctx, (const char *[]){"calendars"}, 1, NULL, print_calendars);
}

static void print_calendar(const json_t *r) {
  static const fmt_col_t rows[] = {
      {"name:", "name", fmt_auto_field},      {"tz:", "tz", fmt_auto_field},
      {"dates:", "dates", list_text},         {"weekdays:", "weekdays", list_text},
      {"hours:", "hours", list_text},         {"note:", "note", fmt_auto_field},
      {"schedules:", "schedules", list_text}};
  fmt_json_fields(stdout, r, rows, sizeof(rows) / sizeof(rows[0]), 10);
}

static int cmd_calendar_show(cli_ctx_t *ctx, const cli_args_t *a) {
  return cli_show(ctx, (const char *[]){"calendars", a->pos[0]}, 2, NULL, print_calendar);
}

static int calendar_write(cli_ctx_t *ctx, const cli_args_t *a, int edit) {
  json_t *body = NULL, *r = NULL;
  char err[512];
  if (cli_calendar_body(a, &body, err, sizeof(err))) return cli_usage_error(ctx, "%s", err);
  int rc = edit ? cli_call(ctx, "PUT", (const char *[]){"calendars", a->pos[0]}, 2, NULL, body, &r)
                : cli_call(ctx, "POST", (const char *[]){"calendars"}, 1, NULL, body, &r);
  json_decref(body);
  return rc ? rc : cli_answer(ctx, r, print_calendar);
}

static int cmd_calendar_add(cli_ctx_t *ctx, const cli_args_t *a) {
  return calendar_write(ctx, a, 0);
}
static int cmd_calendar_edit(cli_ctx_t *ctx, const cli_args_t *a) {
  return calendar_write(ctx, a, 1);
}

static int cmd_calendar_rm(cli_ctx_t *ctx, const cli_args_t *a) {
  char done[512];
  snprintf(done, sizeof(done), "deleted calendar %s", a->pos[0]);
  return cli_delete(ctx, (const char *[]){"calendars", a->pos[0]}, 2, done);
}

static const cli_opt_t common_opts[] = {CLI_COMMON_OPTS};
static const cli_opt_t backfill_opts[] = {
    {"from", 0, 1, O_FROM},          {"to", 0, 1, O_TO},
    {"redo-failed", 0, 0, O_REDO_FAILED}, {"newest-first", 0, 0, O_NEWEST},
    {"max-running", 'm', 1, O_MAX_RUNNING}, {"dry-run", 'n', 0, O_DRY_RUN},
    {"slot-arg", 0, 1, O_SLOT_ARG},  {"slot-date", 0, 0, O_SLOT_DATE},
    CLI_COMMON_OPTS};
static const cli_opt_t calendar_opts[] = {{"tz", 0, 1, O_TZ},        {"date", 'd', 1, O_DATE},
                                          {"weekday", 'w', 1, O_WEEKDAY},
                                          {"hours", 0, 1, O_HOURS},  {"note", 0, 1, O_NOTE},
                                          CLI_COMMON_OPTS};

#define CALENDAR_HELP                                                                 \
  "  --tz ZONE           IANA zone of the dates and hours (default UTC)\n"            \
  "  -d, --date D        a local date YYYY-MM-DD left out whole (repeatable)\n"       \
  "  -w, --weekday DAY   sun, mon, ... sat (repeatable): whole days, or with\n"       \
  "                      --hours those hours of those days\n"                         \
  "  --hours HH:MM-HH:MM local time left out (repeatable; past midnight when the\n"   \
  "                      end is before the start), every day or on --weekday\n"       \
  "  --note TEXT\n"

const cli_cmd_t cli_cal_cmds[] = {
    {"schedule backfill", cmd_backfill, backfill_opts, 1, 1,
     "schedule backfill NAME|ID --from TIME --to TIME [options]",
     "Runs the schedule again over a past window: one run per due time (slot) that\n"
     "never ran, each crawl told its slot's time (SCHEDULED_TIME). Prints the\n"
     "backfill's id, or with --dry-run the slots.\n"
     "  --from T --to T     the window, both included (ISO 8601 or ms)\n"
     "  --redo-failed       also the slots whose run failed or was lost\n"
     "  --newest-first      the latest slot first\n"
     "  -m, --max-running N at most N runs at once (default 1)\n"
     "  -n, --dry-run       list the slots, start nothing\n"
     "  --slot-arg NAME     the spider argument NAME gets the slot's time too\n"
     "  --slot-date         ... its date (YYYY-MM-DD) instead\n"},
    {"backfills", cmd_backfills, common_opts, 0, 0, "backfills",
     "Lists the latest backfills, the newest first.\n"},
    {"backfill show", cmd_backfill_show, common_opts, 1, 1, "backfill show ID",
     "A backfill's window, progress and its runs by state.\n"},
    {"backfill pause", cmd_backfill_pause, common_opts, 1, 1, "backfill pause ID",
     "Starts no new run of the backfill until resumed (the running ones go on).\n"},
    {"backfill resume", cmd_backfill_resume, common_opts, 1, 1, "backfill resume ID",
     "Starts its runs again.\n"},
    {"backfill cancel", cmd_backfill_cancel, common_opts, 1, 1, "backfill cancel ID",
     "Cancels the backfill and every run of it still pending or running.\n"},
    {"calendars", cmd_calendars, common_opts, 0, 0, "calendars",
     "Lists the exclusion calendars and the schedules that refer to each.\n"},
    {"calendar show", cmd_calendar_show, common_opts, 1, 1, "calendar show NAME",
     "A calendar's definition.\n"},
    {"calendar add", cmd_calendar_add, calendar_opts, 1, 1,
     "calendar add NAME (--date D | --weekday DAY | --hours HH:MM-HH:MM)... [options]",
     "Creates an exclusion calendar: a schedule that refers to it (schedule add|edit\n"
     "--calendar NAME) skips the runs due in it.\n" CALENDAR_HELP},
    {"calendar edit", cmd_calendar_edit, calendar_opts, 1, 1,
     "calendar edit NAME (--date D | --weekday DAY | --hours HH:MM-HH:MM)... [options]",
     "Replaces a calendar's whole definition.\n" CALENDAR_HELP},
    {"calendar rm", cmd_calendar_rm, common_opts, 1, 1, "calendar rm NAME",
     "Deletes a calendar no schedule refers to.\n"},
};
const size_t cli_ncal_cmds = sizeof(cli_cal_cmds) / sizeof(cli_cal_cmds[0]);
