/* The client sub-commands' plumbing (finding the daemon, calling it,
 * printing) and the commands about the daemon, jobs, logs and events;
 * the schedule commands are in cli_sched.c. */
#include "net/curl_lazy.h"
#include "cli/cli.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli_int.h"
#include "cli/format.h"
#include "config.h"

/* The API's own cap on a log piece: fewer round trips while catching up. */
#define LOG_CHUNK "1048576"
#define LOG_POLL_MS 250
#define EVENTS_POLL_MS 1000

/* A signal handler can only talk to the loop through a global. */
static volatile sig_atomic_t interrupted;

static void on_interrupt(int sig) {
  (void)sig;
  interrupted = 1;
}

int cli_sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  if (!interrupted) nanosleep(&ts, NULL);
  return interrupted;
}

/* ---- output helpers ---- */

int cli_call(cli_ctx_t *ctx, const char *method, const char *const *segs, size_t nsegs,
             const char *const *query, json_t *body, json_t **out) {
  char err[1024];
  if (client_call(&ctx->client, method, segs, nsegs, query, body, out, err, sizeof(err))) {
    fprintf(stderr, "spiderd: %s\n", err);
    return CLI_EAPI;
  }
  return CLI_OK;
}

static void print_usage(const cli_cmd_t *cmd, FILE *out) {
  fprintf(out, "usage: spiderd %s\n%s", cmd->synopsis, cmd->help);
  fprintf(out,
          "common options:\n"
          "  --url URL          the daemon (default $SPIDERD_URL, else bind_address and\n"
          "                     http_port from scrapyd.conf as `serve` reads it)\n"
          "  --token TOKEN      API token, sent as a Bearer token (default $SPIDERD_TOKEN)\n"
          "  --token-file FILE  the token is the first line of FILE (kept out of `ps`)\n"
          "  -u, --user U:P     basic auth (default $SPIDERD_USER[:$SPIDERD_PASSWORD], else\n"
          "                     username/password from scrapyd.conf when the URL comes from\n"
          "                     it and no token is given); not with --token\n"
          "  --cacert FILE      CA certificates (PEM) to check an https:// daemon against\n"
          "                     (default $CURL_CA_BUNDLE, else $SSL_CERT_FILE, else the\n"
          "                     system's)\n"
          "  --json             print the API's JSON instead of a table\n"
          "  -h, --help         this help\n");
}

int cli_usage_error(const cli_ctx_t *ctx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "spiderd %s: ", ctx->cmd->name);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  print_usage(ctx->cmd, stderr);
  return CLI_EUSAGE;
}

void cli_print_json(const json_t *j) {
  json_dumpf(j, stdout, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  fputc('\n', stdout);
}

int cli_answer(cli_ctx_t *ctx, json_t *r, void (*print)(const json_t *r)) {
  if (ctx->json)
    cli_print_json(r);
  else
    print(r);
  json_decref(r);
  return CLI_OK;
}

int cli_show(cli_ctx_t *ctx, const char *const *segs, size_t nsegs, const char *const *q,
             void (*print)(const json_t *r)) {
  json_t *r = NULL;
  int rc = cli_call(ctx, "GET", segs, nsegs, q, NULL, &r);
  return rc ? rc : cli_answer(ctx, r, print);
}

int cli_delete(cli_ctx_t *ctx, const char *const *segs, size_t nsegs, const char *done) {
  json_t *r = NULL;
  int rc = cli_call(ctx, "DELETE", segs, nsegs, NULL, NULL, &r);
  json_decref(r);
  if (!rc && !ctx->json) printf("%s\n", done);
  return rc;
}

int cli_pairs_option(const cli_args_t *a, int id, const char *flag, json_t *obj, const char *key,
                     char *err, size_t errlen) {
  json_t *pairs = NULL;
  for (size_t i = 0; i < a->nopts; i++) {
    if (a->opts[i].id != id) continue;
    const char *s = a->opts[i].value, *eq = strchr(s, '=');
    if (!eq || eq == s) {
      snprintf(err, errlen, "%s '%s': expected NAME=VALUE", flag, s);
      json_decref(pairs);
      return -EINVAL;
    }
    if (!pairs && !(pairs = json_object())) return -ENOMEM;
    char name[256];
    snprintf(name, sizeof(name), "%.*s", (int)(eq - s), s);
    json_object_set_new(pairs, name, json_string(eq + 1));
  }
  if (pairs) json_object_set_new(obj, key, pairs);
  return 0;
}

int cli_body_done(json_t *b, int rc, json_t **body, char *err, size_t errlen) {
  if (rc == -ENOMEM) snprintf(err, errlen, "out of memory");
  if (rc) {
    json_decref(b);
    b = NULL;
  }
  *body = b;
  return rc;
}

/* ---- finding the daemon ---- */

/* --url, $SPIDERD_URL, or the config `serve` would read; credentials
 * from the command line or the environment (cli_credentials), or that
 * config, but the config's only for the config's own URL: a password for
 * this daemon must not travel to whatever host --url names. */
static int connect_ctx(cli_ctx_t *ctx, const cli_args_t *a) {
  const char *url = cli_args_get(a, O_URL);
  char *own_url = NULL, *user = NULL, *token = NULL, *sock = NULL;
  char err[1024];
  int rc = CLI_OK;
  if (!url || !*url) url = getenv("SPIDERD_URL");
  if (url && !*url) url = NULL;
  int crc = cli_credentials(a, &user, &token, err, sizeof(err));
  if (crc == -ENOMEM) {
    fprintf(stderr, "spiderd: out of memory\n");
    return CLI_EAPI;
  }
  if (crc) return cli_usage_error(ctx, "%s", err);
  if (!url) {
    config_t cfg;
    if (config_load(&cfg, 0, NULL, err, sizeof(err))) {
      fprintf(stderr, "spiderd: %s\n(give the daemon's address with --url or SPIDERD_URL)\n", err);
      free(user);
      free(token);
      return CLI_EUSAGE;
    }
    if (cfg.http_port == 0 && cfg.unix_socket_path[0]) {
      own_url = strdup("http://localhost/");
      sock = strdup(cfg.unix_socket_path);
    } else {
      own_url = client_target_url(cfg.bind_address, cfg.http_port);
      char *https = NULL; /* the daemon serves HTTPS on its port */
      if (own_url && cfg.https_cert[0] && asprintf(&https, "https%s", own_url + 4) >= 0) {
        free(own_url);
        own_url = https;
      }
    }
    if (!user && !token && cfg.username[0] && cfg.password[0] &&
        asprintf(&user, "%s:%s", cfg.username, cfg.password) < 0)
      user = NULL;
    config_release(&cfg);
    url = own_url;
  }
  if (!url) {
    fprintf(stderr, "spiderd: out of memory\n");
    rc = CLI_EAPI;
  } else if (client_init(&ctx->client, url, user, token, sock, err, sizeof(err))) {
    rc = cli_usage_error(ctx, "--url: %s", err);
  } else if (cli_args_get(a, O_CACERT) &&
             !(ctx->client.cainfo = strdup(cli_args_get(a, O_CACERT)))) {
    fprintf(stderr, "spiderd: out of memory\n");
    rc = CLI_EAPI;
  }
  free(own_url);
  free(user);
  free(token);
  free(sock);
  return rc;
}

/* ---- status ---- */

static int cmd_status(cli_ctx_t *ctx, const cli_args_t *a) {
  json_t *r = NULL;
  int rc = cli_call(ctx, "GET", (const char *[]){"status"}, 1, NULL, NULL, &r);
  if (rc) return rc;
  if (ctx->json) {
    cli_print_json(r);
  } else {
    char started[64], up[64], v[3][32];
    fmt_iso_field(r, "started_at", started, sizeof(started));
    fmt_duration(json_integer_value(json_object_get(r, "uptime")), up, sizeof(up));
    fmt_field(r, "pending", v[0], sizeof(v[0]));
    fmt_field(r, "running", v[1], sizeof(v[1]));
    fmt_field(r, "finished", v[2], sizeof(v[2]));
    printf("daemon:    %s (node %s)\n", ctx->client.base,
           json_string_value(json_object_get(r, "node_name")));
    printf("version:   %s\n", json_string_value(json_object_get(r, "version")));
    printf("started:   %s (up %s)%s%s\n", started, up,
           json_is_true(json_object_get(r, "stopping")) ? ", stopping" : "",
           json_is_true(json_object_get(r, "draining")) ? ", draining" : "");
    printf("jobs:      %s pending, %s running, %s finished\n", v[0], v[1], v[2]);
  }
  json_decref(r);
  return CLI_OK;
}

/* ---- drain ---- */

/* The node that answers --url drains (or, with --cancel, claims again). */
static void print_drain(const json_t *r) {
  char running[32];
  fmt_field(r, "running", running, sizeof(running));
  if (json_is_true(json_object_get(r, "draining")))
    printf("node %s is draining: it claims no jobs; %s crawl(s) still running%s\n",
           json_string_value(json_object_get(r, "name")), running,
           json_is_true(json_object_get(r, "stopping")) ? " (stopping)" : "");
  else
    printf("node %s claims jobs again\n", json_string_value(json_object_get(r, "name")));
}

static int cmd_drain(cli_ctx_t *ctx, const cli_args_t *a) {
  int cancel = cli_args_get(a, O_CANCEL) != NULL;
  json_t *r = NULL;
  int rc = cli_call(ctx, "POST", (const char *[]){"nodes", "self", cancel ? "undrain" : "drain"},
                    3, NULL, NULL, &r);
  return rc ? rc : cli_answer(ctx, r, print_drain);
}

/* ---- jobs ---- */

int cli_jobs_query(const cli_args_t *a, const char **q, char *statebuf, size_t n, char *err,
                   size_t errlen) {
  size_t k = 0, len = 0;
  long long num;
  statebuf[0] = '\0';
  for (size_t i = 0; i < a->nopts; i++) {
    if (a->opts[i].id != O_STATE) continue;
    int w = snprintf(statebuf + len, n - len, "%s%s", len ? "," : "", a->opts[i].value);
    if (w < 0 || (size_t)w >= n - len) {
      snprintf(err, errlen, "--state: too many states");
      return -EINVAL;
    }
    len += (size_t)w;
  }
  const char *limit = cli_args_get(a, O_LIMIT), *sched = cli_args_get(a, O_SCHEDULE);
  if (limit && cli_parse_long(limit, 1, 1000, &num)) {
    snprintf(err, errlen, "--limit '%s': expected a number from 1 to 1000", limit);
    return -EINVAL;
  }
  if (sched && cli_parse_long(sched, 1, INT64_MAX, &num)) {
    snprintf(err, errlen, "--schedule '%s': expected a schedule id", sched);
    return -EINVAL;
  }
  const char *pairs[][2] = {{"state", len ? statebuf : NULL},
                            {"project", cli_args_get(a, O_PROJECT)},
                            {"spider", cli_args_get(a, O_SPIDER)},
                            {"schedule", sched},
                            {"limit", limit},
                            {"health", cli_args_get(a, O_HEALTH)}};
  for (size_t i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++)
    if (pairs[i][1]) {
      q[k++] = pairs[i][0];
      q[k++] = pairs[i][1];
    }
  q[k] = NULL;
  return 0;
}

/* "signal N" when one ended it, else the exit code (key). */
static void exit_text(const json_t *j, const char *key, char *buf, size_t n) {
  const json_t *sig = json_object_get(j, "signal");
  if (json_is_integer(sig))
    snprintf(buf, n, "signal %lld", (long long)json_integer_value(sig));
  else
    fmt_field(j, key, buf, n);
}

static void print_jobs(const json_t *r) {
  static const fmt_col_t cols[] = {
      {"ID", "id", fmt_field},           {"JOB", "job", fmt_field},
      {"PROJECT", "project", fmt_field}, {"SPIDER", "spider", fmt_field},
      {"STATE", "state", fmt_field},     {"CREATED", "created_ms", fmt_ms_field},
      {"STARTED", "started_ms", fmt_ms_field}, {"ENDED", "ended_ms", fmt_ms_field},
      {"EXIT", "exit_code", exit_text}};
  fmt_json_table(stdout, json_object_get(r, "jobs"), 0, cols, sizeof(cols) / sizeof(cols[0]), NULL);
  if (!json_is_null(json_object_get(r, "next_cursor")))
    fprintf(stderr, "(more jobs: raise --limit or narrow the filters)\n");
}

static int cmd_jobs(cli_ctx_t *ctx, const cli_args_t *a) {
  const char *q[17];
  char states[512], err[256];
  if (cli_jobs_query(a, q, states, sizeof(states), err, sizeof(err)))
    return cli_usage_error(ctx, "%s", err);
  return cli_show(ctx, (const char *[]){"jobs"}, 1, q, print_jobs);
}

static void print_job(const json_t *r) {
  /* the reader's order, not the API's */
  static const fmt_col_t rows[] = {
      {"id:", "id", fmt_auto_field}, {"job:", "job", fmt_auto_field},
      {"project:", "project", fmt_auto_field}, {"spider:", "spider", fmt_auto_field},
      {"version:", "version", fmt_auto_field}, {"state:", "state", fmt_auto_field},
      {"priority:", "priority", fmt_auto_field}, {"args:", "args", fmt_auto_field},
      {"settings:", "settings", fmt_auto_field}, {"node:", "node", fmt_auto_field},
      {"pid:", "pid", fmt_auto_field}, {"created:", "created_ms", fmt_auto_field},
      {"started:", "started_ms", fmt_auto_field}, {"ended:", "ended_ms", fmt_auto_field},
      {"exit code:", "exit_code", fmt_auto_field}, {"signal:", "signal", fmt_auto_field},
      {"schedule:", "schedule_id", fmt_auto_field}, {"parent:", "parent_id", fmt_auto_field},
      {"retry of:", "retry_of", fmt_auto_field}, {"attempt:", "attempt", fmt_auto_field},
      {"max retries:", "max_retries", fmt_auto_field}, {"timeout:", "timeout", fmt_auto_field},
      {"heartbeat:", "heartbeat_at", fmt_auto_field},
      {"unique key:", "unique_key", fmt_auto_field}, {"test:", "test", fmt_auto_field},
      {"meta:", "meta", fmt_auto_field}, {"health:", "health", fmt_auto_field},
      {"health reasons:", "health_reasons", fmt_auto_field}};
  fmt_json_fields(stdout, r, rows, sizeof(rows) / sizeof(rows[0]), 13);
  const json_t *stats = json_object_get(r, "stats");
  if (json_object_size(stats)) {
    printf("stats:\n");
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)stats, k, v) {
      char val[1024];
      fmt_field(stats, k, val, sizeof(val));
      printf("  %s: %s\n", k, val);
    }
  }
}

static int cmd_job_show(cli_ctx_t *ctx, const cli_args_t *a) {
  return cli_show(ctx, (const char *[]){"jobs", a->pos[0]}, 2, NULL, print_job);
}

int cli_job_body(const cli_args_t *a, json_t **body, char *err, size_t errlen) {
  json_t *b = json_pack("{s:s,s:s}", "project", a->pos[0], "spider", a->pos[1]);
  const char *version = cli_args_get(a, O_VERSION), *jobid = cli_args_get(a, O_JOBID);
  const char *prio = cli_args_get(a, O_PRIORITY), *ukey = cli_args_get(a, O_UNIQUE_KEY);
  double d;
  int rc = b ? 0 : -ENOMEM;
  if (!rc && version) json_object_set_new(b, "version", json_string(version));
  if (!rc && jobid) json_object_set_new(b, "jobid", json_string(jobid));
  if (!rc && ukey) json_object_set_new(b, "unique_key", json_string(ukey));
  if (!rc && prio) {
    if (cli_parse_double(prio, &d)) {
      snprintf(err, errlen, "--priority '%s': expected a number", prio);
      rc = -EINVAL;
    } else {
      json_object_set_new(b, "priority", json_real(d));
    }
  }
  if (!rc) rc = cli_pairs_option(a, O_ARG, "--arg", b, "args", err, errlen);
  if (!rc) rc = cli_pairs_option(a, O_SET, "--set", b, "settings", err, errlen);
  return cli_body_done(b, rc, body, err, errlen);
}

/* The new job's id alone, for scripts: ID=$(spiderd run ...). */
static void print_id(const json_t *r) {
  char id[64];
  fmt_field(r, "id", id, sizeof(id));
  printf("%s\n", id);
}

/* --test and its limits: a test run (jobs.test_run) instead of a job. */
static int run_test_body(const cli_args_t *a, json_t *b, char *err, size_t errlen) {
  static const struct {
    int opt;
    const char *flag, *field;
  } lim[] = {{O_MAX_ITEMS, "--max-items", "items"},
             {O_MAX_PAGES, "--max-pages", "pages"},
             {O_MAX_SECONDS, "--max-seconds", "seconds"}};
  int test = cli_args_get(a, O_TEST) != NULL;
  for (size_t i = 0; i < sizeof(lim) / sizeof(lim[0]); i++) {
    const char *v = cli_args_get(a, lim[i].opt);
    long long n;
    double d;
    if (!v) continue;
    if (!test) {
      snprintf(err, errlen, "%s limits a test run: give --test too", lim[i].flag);
      return -EINVAL;
    }
    if (lim[i].opt == O_MAX_SECONDS ? cli_parse_double(v, &d) || !(d > 0)
                                    : cli_parse_long(v, 1, 1000000000, &n)) {
      snprintf(err, errlen, "%s '%s': expected a number > 0", lim[i].flag, v);
      return -EINVAL;
    }
    json_object_set_new(b, lim[i].field, lim[i].opt == O_MAX_SECONDS ? json_real(d)
                                                                      : json_integer(n));
  }
  if (test && cli_args_get(a, O_UNIQUE_KEY)) {
    snprintf(err, errlen, "--unique-key does not apply to a test run");
    return -EINVAL;
  }
  return 0;
}

static int cmd_run(cli_ctx_t *ctx, const cli_args_t *a) {
  json_t *body = NULL, *r = NULL;
  char err[512];
  if (cli_job_body(a, &body, err, sizeof(err))) return cli_usage_error(ctx, "%s", err);
  if (run_test_body(a, body, err, sizeof(err))) {
    json_decref(body);
    return cli_usage_error(ctx, "%s", err);
  }
  int test = cli_args_get(a, O_TEST) != NULL;
  int rc = cli_call(ctx, "POST", (const char *[]){"jobs", "test"}, test ? 2 : 1, NULL, body, &r);
  json_decref(body);
  return rc ? rc : cli_answer(ctx, r, print_id);
}

/* spiderd multiprocess: the run's body is a job's (cli_job_body, without
 * --jobid and --unique-key, which it does not take) plus the processes and
 * the URLs after PROJECT and SPIDER. */
static int cmd_multiprocess(cli_ctx_t *ctx, const cli_args_t *a) {
  json_t *body = NULL, *r = NULL;
  char err[512];
  long long n = 0;
  const char *procs = cli_args_get(a, O_PROCESSES);
  if (!procs || cli_parse_long(procs, 1, 64, &n))
    return cli_usage_error(ctx, "--processes N: expected a number from 1 to 64");
  if (cli_job_body(a, &body, err, sizeof(err))) return cli_usage_error(ctx, "%s", err);
  json_t *urls = json_array();
  for (size_t i = 2; urls && i < a->npos; i++) json_array_append_new(urls, json_string(a->pos[i]));
  json_object_set_new(body, "urls", urls ? urls : json_null());
  json_object_set_new(body, "processes", json_integer(n));
  int rc = cli_call(ctx, "POST", (const char *[]){"jobs", "multiprocess"}, 2, NULL, body, &r);
  json_decref(body);
  return rc ? rc : cli_answer(ctx, r, print_id);
}

static void print_added(const json_t *r) {
  char id[64], n[32], added[32];
  fmt_field(r, "id", id, sizeof(id));
  fmt_field(r, "urls", n, sizeof(n));
  fmt_field(r, "added", added, sizeof(added));
  printf("run %s: %s URL(s) given, %s new to its frontier\n", id, n, added);
}

static int cmd_add_urls(cli_ctx_t *ctx, const cli_args_t *a) {
  json_t *urls = json_array(), *r = NULL;
  for (size_t i = 1; urls && i < a->npos; i++) json_array_append_new(urls, json_string(a->pos[i]));
  json_t *body = urls ? json_pack("{s:o}", "urls", urls) : NULL;
  if (!body) return cli_usage_error(ctx, "out of memory");
  int rc = cli_call(ctx, "POST", (const char *[]){"jobs", a->pos[0], "urls"}, 3, NULL, body, &r);
  json_decref(body);
  return rc ? rc : cli_answer(ctx, r, print_added);
}

static void print_cancelled(const json_t *r) {
  char id[64], prev[64], state[64];
  const json_t *job = json_object_get(r, "job");
  fmt_field(job, "id", id, sizeof(id));
  fmt_field(r, "prevstate", prev, sizeof(prev));
  fmt_field(job, "state", state, sizeof(state));
  printf("cancelled job %s (was %s, now %s)\n", id, prev[0] ? prev : "-", state);
}

static int cmd_cancel(cli_ctx_t *ctx, const cli_args_t *a) {
  const char *sig = cli_args_get(a, O_SIGNAL);
  json_t *body = sig ? json_pack("{s:s}", "signal", sig) : NULL, *r = NULL;
  int rc = cli_call(ctx, "POST", (const char *[]){"jobs", a->pos[0], "cancel"}, 3, NULL, body, &r);
  json_decref(body);
  return rc ? rc : cli_answer(ctx, r, print_cancelled);
}

static void print_paused(const json_t *r) {
  char id[64], state[64];
  fmt_field(json_object_get(r, "job"), "id", id, sizeof(id));
  fmt_field(r, "state", state, sizeof(state));
  printf("job %s: %s\n", id, state);
}

/* spiderd pause ID / spiderd resume ID: POST /jobs/ID/pause or /resume. */
static int cmd_pause(cli_ctx_t *ctx, const cli_args_t *a, const char *verb) {
  json_t *r = NULL;
  int rc = cli_call(ctx, "POST", (const char *[]){"jobs", a->pos[0], verb}, 3, NULL, NULL, &r);
  return rc ? rc : cli_answer(ctx, r, print_paused);
}

static int cmd_pause_job(cli_ctx_t *ctx, const cli_args_t *a) { return cmd_pause(ctx, a, "pause"); }

static int cmd_resume_job(cli_ctx_t *ctx, const cli_args_t *a) {
  return cmd_pause(ctx, a, "resume");
}

/* ---- logs ---- */

/* Reads from next_offset to next_offset, so each byte is printed once
 * however the pieces fall; the job's state comes from before the file is
 * read, so "not running" plus eof means the log is complete. */
static int cmd_logs(cli_ctx_t *ctx, const cli_args_t *a) {
  int follow = cli_args_get(a, O_FOLLOW) != NULL;
  const char *tail = cli_args_get(a, O_TAIL);
  long long n = 0;
  if (tail && cli_args_get(a, O_FROM_START))
    return cli_usage_error(ctx, "--tail and --from-start exclude each other");
  if (tail && cli_parse_long(tail, 1, INT64_MAX / 2, &n))
    return cli_usage_error(ctx, "--tail '%s': expected a positive number of bytes", tail);
  if (ctx->json && follow) return cli_usage_error(ctx, "--json and --follow exclude each other");
  long long offset = -n;
  char state[32] = "", code[64] = "";
  int rc = CLI_OK;
  signal(SIGINT, on_interrupt);
  signal(SIGTERM, on_interrupt);
  while (!interrupted) {
    char off[32];
    snprintf(off, sizeof(off), "%lld", offset);
    const char *q[] = {"offset", off, "limit", LOG_CHUNK, NULL};
    json_t *r = NULL;
    rc = cli_call(ctx, "GET", (const char *[]){"jobs", a->pos[0], "log"}, 3, q, NULL, &r);
    if (rc) break;
    if (ctx->json) {
      cli_print_json(r);
      json_decref(r);
      break;
    }
    const json_t *text = json_object_get(r, "text");
    fwrite(json_string_value(text), 1, json_string_length(text), stdout);
    fflush(stdout);
    offset = json_integer_value(json_object_get(r, "next_offset"));
    int eof = json_is_true(json_object_get(r, "eof"));
    int running = json_is_true(json_object_get(r, "running"));
    fmt_field(r, "state", state, sizeof(state));
    json_decref(r);
    if (!eof) continue;
    if (!follow || !running) break;
    cli_sleep_ms(LOG_POLL_MS);
  }
  if (rc || !follow || interrupted || !strcmp(state, "finished")) return rc;
  /* Scripts that follow a job want its outcome, as `wait` gives. */
  json_t *j = NULL;
  if (cli_call(ctx, "GET", (const char *[]){"jobs", a->pos[0]}, 2, NULL, NULL, &j) == CLI_OK)
    exit_text(j, "exit_code", code, sizeof(code));
  json_decref(j);
  fprintf(stderr, "spiderd: job %s ended %s%s%s%s\n", a->pos[0], state, code[0] ? " (exit " : "",
          code, code[0] ? ")" : "");
  return CLI_EAPI;
}

/* ---- events ---- */

static void print_event(const json_t *e) {
  char id[32], when[64], type[128], sched[32], job[32], data[2048];
  fmt_field(e, "id", id, sizeof(id));
  fmt_ms_field(e, "ts_ms", when, sizeof(when));
  fmt_field(e, "type", type, sizeof(type));
  fmt_field(e, "schedule_id", sched, sizeof(sched));
  fmt_field(e, "job_id", job, sizeof(job));
  fmt_field(e, "data", data, sizeof(data));
  printf("%-6s %s  %-18s schedule=%-4s job=%-5s %s\n", id, when, type, sched[0] ? sched : "-",
         job[0] ? job : "-", data);
}

static int cmd_events(cli_ctx_t *ctx, const cli_args_t *a) {
  int follow = cli_args_get(a, O_FOLLOW) != NULL;
  const char *after = cli_args_get(a, O_AFTER), *limit = cli_args_get(a, O_LIMIT);
  const char *sched = cli_args_get(a, O_SCHEDULE), *job = cli_args_get(a, O_JOB);
  long long next = 0, num, page = 1000;
  if (after && cli_parse_long(after, 0, INT64_MAX, &next))
    return cli_usage_error(ctx, "--after '%s': expected an event id", after);
  if (limit && cli_parse_long(limit, 1, 1000, &page))
    return cli_usage_error(ctx, "--limit '%s': expected a number from 1 to 1000", limit);
  if (sched && cli_parse_long(sched, 1, INT64_MAX, &num))
    return cli_usage_error(ctx, "--schedule '%s': expected a schedule id", sched);
  if (job && cli_parse_long(job, 1, INT64_MAX, &num))
    return cli_usage_error(ctx, "--job '%s': expected a job's integer id", job);
  int rc = CLI_OK;
  signal(SIGINT, on_interrupt);
  signal(SIGTERM, on_interrupt);
  while (!interrupted) {
    char aft[32];
    snprintf(aft, sizeof(aft), "%lld", next);
    const char *q[] = {"after", aft, "type", cli_args_get(a, O_TYPE), "schedule", sched,
                       "job", job, "limit", limit ? limit : "1000", NULL};
    json_t *r = NULL;
    rc = cli_call(ctx, "GET", (const char *[]){"events"}, 1, q, NULL, &r);
    if (rc) break;
    const json_t *evs = json_object_get(r, "events");
    size_t i, n = json_array_size(evs);
    json_t *e;
    if (ctx->json && !follow) {
      cli_print_json(r);
    } else {
      json_array_foreach(evs, i, e) {
        if (ctx->json) { /* one object a line, so a pipe can read them as they come */
          json_dumpf(e, stdout, JSON_COMPACT | JSON_PRESERVE_ORDER);
          fputc('\n', stdout);
        } else {
          print_event(e);
        }
      }
    }
    fflush(stdout);
    const json_t *na = json_object_get(r, "next_after");
    if (json_is_integer(na)) next = json_integer_value(na);
    json_decref(r);
    /* Without -f, one listing: a full page is the caller's cue for --after. */
    if (!follow) break;
    if ((long long)n < page) cli_sleep_ms(EVENTS_POLL_MS);
  }
  return rc;
}

/* ---- the command table ---- */

static const cli_opt_t common_opts[] = {CLI_COMMON_OPTS};
static const cli_opt_t jobs_opts[] = {{"state", 0, 1, O_STATE}, {"project", 'p', 1, O_PROJECT},
                                      {"spider", 's', 1, O_SPIDER}, {"schedule", 0, 1, O_SCHEDULE},
                                      {"limit", 'n', 1, O_LIMIT}, {"health", 0, 1, O_HEALTH},
                                      CLI_COMMON_OPTS};
static const cli_opt_t run_opts[] = {{"arg", 'a', 1, O_ARG}, {"set", 's', 1, O_SET},
                                     {"priority", 0, 1, O_PRIORITY}, {"version", 0, 1, O_VERSION},
                                     {"jobid", 0, 1, O_JOBID}, {"unique-key", 0, 1, O_UNIQUE_KEY},
                                     {"test", 0, 0, O_TEST}, {"max-items", 0, 1, O_MAX_ITEMS},
                                     {"max-pages", 0, 1, O_MAX_PAGES},
                                     {"max-seconds", 0, 1, O_MAX_SECONDS}, CLI_COMMON_OPTS};
static const cli_opt_t multiprocess_opts[] = {{"processes", 'n', 1, O_PROCESSES},
                                              {"arg", 'a', 1, O_ARG}, {"set", 's', 1, O_SET},
                                              {"priority", 0, 1, O_PRIORITY},
                                              {"version", 0, 1, O_VERSION}, CLI_COMMON_OPTS};
static const cli_opt_t cancel_opts[] = {{"signal", 0, 1, O_SIGNAL}, CLI_COMMON_OPTS};
static const cli_opt_t drain_opts[] = {{"cancel", 0, 0, O_CANCEL}, CLI_COMMON_OPTS};
static const cli_opt_t logs_opts[] = {{"follow", 'f', 0, O_FOLLOW}, {"from-start", 0, 0, O_FROM_START},
                                      {"tail", 0, 1, O_TAIL}, CLI_COMMON_OPTS};
static const cli_opt_t events_opts[] = {{"type", 't', 1, O_TYPE}, {"schedule", 0, 1, O_SCHEDULE},
                                        {"job", 0, 1, O_JOB}, {"after", 0, 1, O_AFTER},
                                        {"limit", 'n', 1, O_LIMIT}, {"follow", 'f', 0, O_FOLLOW},
                                        CLI_COMMON_OPTS};

static const cli_cmd_t cmds[] = {
    {"status", cmd_status, common_opts, 0, 0, "status [options]",
     "The daemon's node, version, uptime and job counts.\n"},
    {"drain", cmd_drain, drain_opts, 0, 0, "drain [--cancel]",
     "Drains the daemon's node: it claims no more jobs (they stay pending for\n"
     "other nodes) while its running crawls go on; /readyz answers 503. The\n"
     "daemon keeps serving; SIGTERM drains the same way before it stops.\n"
     "  --cancel           end the drain: the node claims jobs again\n"},
    {"jobs", cmd_jobs, jobs_opts, 0, 0, "jobs [--state S]... [--project P] [--spider S] "
     "[--schedule ID] [--limit N] [--health H]",
     "Lists jobs, newest first (at most --limit, default 100).\n"
     "  --state S          pending, running, finished, failed, cancelled, lost,\n"
     "                     paused\n"
     "                     (repeat or comma-separate for several)\n"
     "  -p, --project P    -s, --spider S    --schedule ID    -n, --limit N (1-1000)\n"
     "  --health H         ok, degraded, broken, or none (not rated)\n"},
    {"job show", cmd_job_show, common_opts, 1, 1, "job show ID",
     "A job's details; ID is its integer id or its Scrapyd job id.\n"},
    {"run", cmd_run, run_opts, 2, 2,
     "run PROJECT SPIDER [--arg K=V]... [--set K=V]... [--priority N] [--version V] [--jobid J] "
     "[--unique-key K] [--test [--max-items N] [--max-pages N] [--max-seconds S]]",
     "Queues a job now and prints its integer id.\n"
     "  -a, --arg K=V      spider argument (repeatable)\n"
     "  -s, --set K=V      Scrapy setting (repeatable)\n"
     "  --unique-key K     while a pending or running job of the project holds K,\n"
     "                     queue nothing and print that job's id\n"
     "  --test             a test run: flagged test, counted in no statistics\n"
     "  --max-items N  --max-pages N  --max-seconds S\n"
     "                     where a test run stops (Scrapy's CLOSESPIDER_ITEMCOUNT,\n"
     "                     _PAGECOUNT, _TIMEOUT; a command spider's hard timeout)\n"},
    {"multiprocess", cmd_multiprocess, multiprocess_opts, 3, 10002,
     "multiprocess PROJECT SPIDER URL... -n N [--arg K=V]... [--set K=V]... [--priority N] "
     "[--version V]",
     "Starts N processes of the spider as children of one parent job, sharing\n"
     "one frontier queue seeded with the URLs, and prints the parent's id.\n"
     "  -n, --processes N  how many processes (1-64)\n"
     "  -a, --arg K=V      spider argument (repeatable)\n"
     "  -s, --set K=V      Scrapy setting (repeatable)\n"},
    {"add-urls", cmd_add_urls, common_opts, 2, 10001, "add-urls ID URL...",
     "Adds URLs to the frontier of a running multi-process run (ID: its parent).\n"},
    {"cancel", cmd_cancel, cancel_opts, 1, 1, "cancel ID [--signal SIG]",
     "Cancels a pending or running job.\n"
     "  --signal SIG       TERM, INT (default), KILL, HUP, STOP or a number\n"},
    {"pause", cmd_pause_job, common_opts, 1, 1, "pause ID",
     "Pauses a running job: its crawl stops gracefully with its state kept\n"
     "(Scrapy's JOBDIR), and the job waits, paused, until it is resumed.\n"},
    {"resume", cmd_resume_job, common_opts, 1, 1, "resume ID",
     "Queues a paused job again: it goes on from where it stopped, on any node.\n"},
    {"logs", cmd_logs, logs_opts, 1, 1, "logs JOB [-f] [--from-start | --tail BYTES]",
     "Prints a job's log.\n"
     "  -f, --follow       keep printing until the job has ended and its log is\n"
     "                     drained; then exit 0 if it finished, 1 if it failed,\n"
     "                     was cancelled or was lost\n"
     "  --from-start       from the first byte (the default)\n"
     "  --tail BYTES       start BYTES before the end\n"},
    {"events", cmd_events, events_opts, 0, 0,
     "events [--type PREFIX] [--schedule ID] [--job ID] [--after N] [--limit N] [-f]",
     "Lists events, oldest first (one page; continue with --after N).\n"
     "  -t, --type PREFIX  only types starting with it (job., schedule.paused)\n"
     "  -f, --follow       keep polling for new events until interrupted\n"
     "                     (with --json: one JSON object a line)\n"},
};

/* Every command table, in the order `spiderd help` lists them. */
static const struct {
  const cli_cmd_t *v;
  const size_t *n;
} tables[] = {{cmds, NULL}, {cli_sched_cmds, &cli_nsched_cmds}, {cli_auth_cmds, &cli_nauth_cmds},
               {cli_account_cmds, &cli_naccount_cmds}, {cli_cal_cmds, &cli_ncal_cmds}};

static size_t table_len(size_t t) {
  return tables[t].n ? *tables[t].n : sizeof(cmds) / sizeof(cmds[0]);
}

const cli_cmd_t *cli_find(const char *name) {
  for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
    for (size_t i = 0; i < table_len(t); i++)
      if (!strcmp(tables[t].v[i].name, name)) return &tables[t].v[i];
  return NULL;
}

/* "job", "schedule", "token", "user" and "account" take a verb; everything
 * else is one word. */
static int is_group(const char *name) {
  return !strcmp(name, "job") || !strcmp(name, "schedule") || !strcmp(name, "token") ||
         !strcmp(name, "user") || !strcmp(name, "account") || !strcmp(name, "calendar") ||
         !strcmp(name, "backfill");
}

int cli_is_command(const char *name) {
  if (is_group(name)) return 1;
  const cli_cmd_t *c = cli_find(name);
  return c != NULL && !strchr(c->name, ' ');
}

static void group_usage(const char *group, FILE *out) {
  fprintf(out, "usage:\n");
  size_t n = strlen(group);
  for (size_t t = 0; t < sizeof(tables) / sizeof(tables[0]); t++)
    for (size_t i = 0; i < table_len(t); i++) {
      const cli_cmd_t *c = &tables[t].v[i];
      if (!strncmp(c->name, group, n) && c->name[n] == ' ')
        fprintf(out, "  spiderd %s\n", c->synopsis);
    }
  fprintf(out, "`spiderd %s VERB --help` describes each.\n", group);
}

void cli_usage(FILE *out) {
  fprintf(out, "client commands (talk to a running daemon; `spiderd CMD --help`):\n");
  for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++)
    if (strcmp(cmds[i].name, "job show"))
      fprintf(out, "  spiderd %s\n", cmds[i].synopsis);
  fprintf(out, "  spiderd job show ID\n");
  for (size_t t = 1; t < sizeof(tables) / sizeof(tables[0]); t++)
    for (size_t i = 0; i < table_len(t); i++)
      fprintf(out, "  spiderd %s\n", tables[t].v[i].synopsis);
}

/* Splits "schedule add ..." into the command and its arguments. */
static const cli_cmd_t *lookup(int argc, char **argv, int *used) {
  *used = 1;
  if (argc >= 2 && is_group(argv[0])) {
    char name[64];
    snprintf(name, sizeof(name), "%s %s", argv[0], argv[1]);
    *used = 2;
    return cli_find(name);
  }
  return is_group(argv[0]) ? NULL : cli_find(argv[0]);
}

int cli_help(int argc, char **argv, FILE *out) {
  if (argc == 0) {
    cli_usage(out);
    return CLI_OK;
  }
  int used;
  const cli_cmd_t *c = lookup(argc, argv, &used);
  if (c) {
    print_usage(c, out);
    return CLI_OK;
  }
  if (is_group(argv[0])) {
    group_usage(argv[0], out);
    return CLI_OK;
  }
  fprintf(stderr, "spiderd: unknown command '%s'\n", argv[0]);
  return CLI_EUSAGE;
}

int cli_main(int argc, char **argv) {
  int used;
  const cli_cmd_t *cmd = lookup(argc, argv, &used);
  if (!cmd) {
    int help = argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"));
    if (is_group(argv[0]) && (argc < 2 || help || argv[1][0] == '-')) {
      group_usage(argv[0], help ? stdout : stderr);
      return help ? CLI_OK : CLI_EUSAGE;
    }
    fprintf(stderr, "spiderd: unknown command '%s%s%s'\n", argv[0], argc >= 2 ? " " : "",
            argc >= 2 ? argv[1] : "");
    group_usage(argv[0], stderr);
    return CLI_EUSAGE;
  }
  cli_ctx_t ctx = {.cmd = cmd};
  cli_args_t a;
  char err[512];
  if (cli_args_parse(cmd->opts, argc - used, argv + used, &a, err, sizeof(err)))
    return cli_usage_error(&ctx, "%s", err);
  int rc;
  if (cli_args_get(&a, O_HELP)) {
    print_usage(cmd, stdout);
    rc = CLI_OK;
  } else if (a.npos < cmd->min_pos || a.npos > cmd->max_pos) {
    rc = a.npos < cmd->min_pos ? cli_usage_error(&ctx, "missing argument")
                               : cli_usage_error(&ctx, "unexpected argument '%s'", a.pos[cmd->max_pos]);
  } else {
    ctx.json = cli_args_get(&a, O_JSON) != NULL;
    char why[256] = "";
    if (curl_lazy_load(why, sizeof(why)) || curl_global_init(CURL_GLOBAL_DEFAULT)) {
      fprintf(stderr, "spiderd: %s\n", why[0] ? why : "cannot initialise libcurl");
      rc = CLI_EAPI;
    } else {
      rc = connect_ctx(&ctx, &a);
      if (rc == CLI_OK) rc = cmd->run(&ctx, &a);
      client_release(&ctx.client);
      curl_global_cleanup();
    }
  }
  cli_args_release(&a);
  return rc;
}
