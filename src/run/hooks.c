/* Lifecycle hooks (hooks.h). A store op reads new events, picks the ones
 * this node runs a hook for and renders their JSON; the loop queues the
 * runs and spawns them, at most [hooks] concurrency at once. */
#include "run/hooks.h"

#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "core/event.h"
#include "core/job.h"
#include "error.h"
#include "log.h"

extern char **environ;

#define SYS "hooks"
#define LEASE_NAME "hooks"
#define LEASE_TTL_MS 5000
#define TICK_MS 1000
#define READ_BATCH 256
#define MAX_WAITING 10000  /* runs queued behind the concurrency limit */
#define OUTPUT_KEPT 1024   /* bytes of a hook's output kept for the log */
#define EXIT_GRACE_MS 1000 /* after the exit, what is left of the output */

/* ---- pure helpers ---- */

const char *hooks_name(int hook) { return metrics_hook_name(hook); }

int hooks_wants(int hook, const char *type) {
  static const char *const own[METRICS_NHOOKS] = {
      "job.queued", "job.started", "job.finished", "job.failed", "job.cancelled", "job.lost",
      NULL, "job.degraded", "job.broken"};
  if (!type || hook < 0 || hook >= METRICS_NHOOKS) return 0;
  if (hook == METRICS_HOOK_ENDED)
    return !strcmp(type, "job.finished") || !strcmp(type, "job.failed") ||
           !strcmp(type, "job.cancelled") || !strcmp(type, "job.lost");
  return !strcmp(type, own[hook]);
}

/* ---- state ---- */

/* One command to run for one event. */
typedef struct run {
  struct run *next;
  struct hooks *h;
  int hook;
  int64_t event_id;
  char *type, *project, *spider, *jobid;
  char *body;
  size_t len;

  uv_process_t proc;
  uv_pipe_t in, out;
  uv_timer_t timer;
  uv_write_t wr;
  int open;      /* handles not yet closed */
  int exited, eof, timed_out, killed;
  int64_t status;
  int signal;
  uint64_t started;
  char output[OUTPUT_KEPT + 1];
  size_t outlen;
} run_t;

struct hooks {
  uv_loop_t *loop;
  const config_t *cfg;
  store_pool_t *store;
  metrics_t *metrics;
  const char *cmd[METRICS_NHOOKS]; /* "" = none */
  uint64_t timeout_ms;
  unsigned concurrency;

  uv_timer_t tick, deadline;
  int closing;
  int busy, again, stopping, final_read, deadline_passed;
  void (*stopped)(void *ud);
  void *stopped_ud;

  int64_t since;  /* wall clock at the start: events older run no hook */
  int64_t cursor; /* -1 until the first read found where to start */
  int64_t token;
  int leader;

  run_t *whead, *wtail; /* waiting, in event order */
  size_t nwaiting;
  run_t *running;
  unsigned nrunning;
};

typedef struct op {
  hooks_t *h;
  int64_t since; /* the first read starts at the first event this recent */
  int64_t after, last_id, token;
  int leader, full;
  run_t *head, *tail; /* rendered runs, in event order */
} op_t;

static void run_free(run_t *r) {
  free(r->type);
  free(r->project);
  free(r->spider);
  free(r->jobid);
  free(r->body);
  free(r);
}

static void runs_free(run_t *r) {
  while (r) {
    run_t *next = r->next;
    run_free(r);
    r = next;
  }
}

/* ---- the store side ---- */

/* Where an event's hooks run: on the node that ran its job, or, for what
 * no node ran (a job queued, cancelled before it started, lost with its
 * node, or ended without a start), on the lease holder. The type decides
 * before the job row does: by the time a job.queued is read, its job may
 * already run somewhere. */
static int event_is_ours(const op_t *o, const event_t *e, const job_t *j) {
  const char *node = o->h->cfg->node_name;
  if (!strcmp(e->type, "job.queued") || !strcmp(e->type, "job.lost")) return o->leader;
  if (!strcmp(e->type, "job.cancelled")) {
    json_t *started = e->data ? json_object_get(e->data, "started") : NULL;
    if (started && json_is_false(started)) return o->leader;
  }
  if (!j || !j->node || !j->node[0]) return o->leader;
  return !strcmp(j->node, node);
}

static const char *data_str(const event_t *e, const job_t *j, const char *key) {
  const char *v = e->data ? json_string_value(json_object_get(e->data, key)) : NULL;
  if (v) return v;
  if (!j) return "";
  if (!strcmp(key, "project")) return j->project ? j->project : "";
  if (!strcmp(key, "spider")) return j->spider ? j->spider : "";
  return j->jobid ? j->jobid : "";
}

static char *render(const event_t *e, const job_t *j, const char *node) {
  json_t *o = json_pack("{s:I, s:s, s:o, s:I, s:I, s:I, s:o, s:s}", "id", (json_int_t)e->id,
                        "type", e->type, "ts", job_time_json(e->ts_ms), "ts_ms",
                        (json_int_t)e->ts_ms, "schedule_id", (json_int_t)e->schedule_id,
                        "job_id", (json_int_t)e->job_id, "data",
                        e->data ? json_incref(e->data) : json_object(), "node", node);
  json_t *job = o && j ? job_event_json(j) : NULL;
  if (o) json_object_set_new(o, "job", job ? job : json_null());
  char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  return body;
}

/* The runs one event starts here, appended to o's list. */
static int event_runs(store_t *s, op_t *o, const event_t *e) {
  const hooks_t *h = o->h;
  int any = 0;
  for (int k = 0; k < METRICS_NHOOKS && !any; k++) any = h->cmd[k][0] && hooks_wants(k, e->type);
  if (!any) return 0;
  job_t j;
  job_init(&j);
  int rc = e->job_id ? store_job_get(s, e->job_id, &j) : -ENOENT;
  const job_t *jp = rc ? NULL : &j;
  if (rc && rc != -ENOENT) goto out;
  rc = 0;
  if (!event_is_ours(o, e, jp)) goto out;
  char *body = render(e, jp, h->cfg->node_name);
  if (!body) rc = -ENOMEM;
  for (int k = 0; k < METRICS_NHOOKS && !rc; k++) {
    if (!h->cmd[k][0] || !hooks_wants(k, e->type)) continue;
    run_t *r = calloc(1, sizeof(*r));
    if (!r) {
      rc = -ENOMEM;
      break;
    }
    r->hook = k;
    r->event_id = e->id;
    r->type = strdup(e->type);
    r->project = strdup(data_str(e, jp, "project"));
    r->spider = strdup(data_str(e, jp, "spider"));
    r->jobid = strdup(data_str(e, jp, "jobid"));
    r->body = strdup(body);
    r->len = strlen(body);
    if (o->tail) o->tail->next = r;
    else o->head = r;
    o->tail = r;
    if (!r->type || !r->project || !r->spider || !r->jobid || !r->body) rc = -ENOMEM;
  }
  free(body);
out:
  job_release(&j);
  return rc;
}

/* Renews (or takes) the lease, then reads the events after o->after. The
 * first read only finds where the log ends: history is not replayed. */
static int read_fn(store_t *s, void *arg) {
  op_t *o = arg;
  const char *node = o->h->cfg->node_name;
  int rc = store_lease_acquire(s, LEASE_NAME, node, clock_wall_ms(), LEASE_TTL_MS, &o->token);
  o->leader = rc == 0;
  if (rc && rc != -EBUSY) return rc;
  if (o->after < 0) return store_events_head(s, &o->last_id);
  event_list_t l = {0};
  event_filter_t f = {.after_id = o->after, .type_prefix = "job.", .limit = READ_BATCH};
  o->last_id = o->after;
  if ((rc = store_events_list(s, &f, &l))) return rc;
  for (size_t i = 0; i < l.n && !rc; i++) {
    rc = event_runs(s, o, &l.v[i]);
    if (!rc) o->last_id = l.v[i].id;
  }
  o->full = l.n == READ_BATCH;
  event_list_release(&l);
  return rc;
}

/* ---- the loop side: processes ---- */

static void pump(hooks_t *h);
static void maybe_stopped(hooks_t *h);

static void run_closed(uv_handle_t *hd) {
  run_t *r = hd->data;
  hooks_t *h = r->h;
  if (--r->open) return;
  run_free(r);
  h->nrunning--;
  pump(h);
  maybe_stopped(h);
}

/* One log line: the output's line breaks and other control bytes become
 * spaces, its trailing ones go. */
static void output_tidy(run_t *r) {
  while (r->outlen && (unsigned char)r->output[r->outlen - 1] <= ' ') r->outlen--;
  for (size_t i = 0; i < r->outlen; i++)
    if ((unsigned char)r->output[i] < ' ' || r->output[i] == 0x7f) r->output[i] = ' ';
  r->output[r->outlen] = '\0';
}

/* The exit is known (and the output read, or its grace over): log,
 * count, and close the run's handles. */
static void run_finish(run_t *r) {
  hooks_t *h = r->h;
  double secs = (double)(uv_now(h->loop) - r->started) / 1000.0;
  int result;
  output_tidy(r);
  const char *out = r->outlen ? r->output : "(no output)";
  const char *name = hooks_name(r->hook);
  if (r->timed_out) {
    result = METRICS_HOOK_TIMEOUT;
    log_warn(SYS, "%s for job '%s' (event %" PRId64 ") killed after %.1f s (%s): %s", name,
             r->jobid, r->event_id, secs,
             h->deadline_passed ? "the daemon stops" : "[hooks] timeout", out);
  } else if (r->status || r->signal) {
    result = METRICS_HOOK_NONZERO;
    log_warn(SYS, "%s for job '%s' (event %" PRId64 ") failed: %s %d after %.1f s: %s", name,
             r->jobid, r->event_id, r->signal ? "signal" : "exit status",
             r->signal ? r->signal : (int)r->status, secs, out);
  } else {
    result = METRICS_HOOK_OK;
    log_info(SYS, "%s for job '%s' (event %" PRId64 ") ran in %.1f s", name, r->jobid,
             r->event_id, secs);
    if (r->outlen) log_debug(SYS, "%s output: %s", name, r->output);
  }
  metrics_hook(h->metrics, r->hook, result);
  for (run_t **p = &h->running; *p; p = &(*p)->next)
    if (*p == r) {
      *p = r->next;
      break;
    }
  uv_timer_stop(&r->timer);
  uv_close((uv_handle_t *)&r->timer, run_closed);
  uv_close((uv_handle_t *)&r->proc, run_closed);
  uv_close((uv_handle_t *)&r->out, run_closed);
  /* Closing stdin with its write pending cancels the write. */
  if (!uv_is_closing((uv_handle_t *)&r->in)) uv_close((uv_handle_t *)&r->in, run_closed);
}

static void run_kill(run_t *r) {
  /* The shell leads its own group (UV_PROCESS_DETACHED): -pid reaches
   * what it started too, so no orphan keeps the output pipe open. */
  if (r->exited || r->killed) return;
  r->killed = 1;
  if (kill(-r->proc.pid, SIGKILL)) kill(r->proc.pid, SIGKILL);
}

static void on_timer(uv_timer_t *t) {
  run_t *r = t->data;
  if (r->exited) { /* the output's grace is over */
    run_finish(r);
    return;
  }
  r->timed_out = 1;
  run_kill(r);
}

static void on_proc_exit(uv_process_t *p, int64_t status, int sig) {
  run_t *r = p->data;
  r->exited = 1;
  r->status = status;
  r->signal = sig;
  if (r->eof) {
    run_finish(r);
    return;
  }
  uv_timer_start(&r->timer, on_timer, EXIT_GRACE_MS, 0);
}

static void on_alloc(uv_handle_t *hd, size_t want, uv_buf_t *buf) {
  static char scratch[4096];
  (void)hd;
  (void)want;
  /* The loop thread reads one pipe at a time: one buffer serves all. */
  *buf = uv_buf_init(scratch, sizeof(scratch));
}

static void on_read(uv_stream_t *s, ssize_t n, const uv_buf_t *buf) {
  run_t *r = s->data;
  if (n > 0) {
    size_t room = OUTPUT_KEPT - r->outlen, take = (size_t)n < room ? (size_t)n : room;
    memcpy(r->output + r->outlen, buf->base, take);
    r->outlen += take;
    return;
  }
  if (n == 0) return;
  uv_read_stop(s);
  r->eof = 1;
  if (r->exited) run_finish(r);
}

static void on_written(uv_write_t *w, int status) {
  run_t *r = w->data;
  /* EPIPE: the hook did not read its input, which is its business. */
  (void)status;
  if (!uv_is_closing((uv_handle_t *)&r->in)) uv_close((uv_handle_t *)&r->in, run_closed);
}

static char *env_pair(const char *name, const char *value) {
  size_t n = strlen(name) + strlen(value) + 2;
  char *p = malloc(n);
  if (p) snprintf(p, n, "%s=%s", name, value);
  return p;
}

/* SPIDERD_* of this run over the daemon's environment, whose own SPIDERD_*
 * (its configuration, a store URL) stay with the daemon. */
static char **run_env(const run_t *r, const char *node) {
  size_t n = 0;
  while (environ[n]) n++;
  char **env = calloc(n + 7, sizeof(*env));
  if (!env) return NULL;
  const char *ours[6][2] = {
      {"SPIDERD_EVENT", r->type},      {"SPIDERD_HOOK", hooks_name(r->hook)},
      {"SPIDERD_PROJECT", r->project}, {"SPIDERD_SPIDER", r->spider},
      {"SPIDERD_JOB", r->jobid},       {"SPIDERD_NODE", node}};
  size_t k = 0;
  for (; k < 6; k++)
    if (!(env[k] = env_pair(ours[k][0], ours[k][1]))) {
      while (k) free(env[--k]);
      free(env);
      return NULL;
    }
  for (size_t i = 0; i < n; i++)
    if (strncmp(environ[i], "SPIDERD_", 8)) env[k++] = environ[i];
  return env;
}

static void env_free(char **env) {
  for (size_t i = 0; i < 6; i++) free(env[i]);
  free(env);
}

/* stdout and stderr share one pipe: the log shows them as the hook
 * wrote them. */
static int run_spawn(hooks_t *h, run_t *r) {
  uv_file fds[2] = {-1, -1};
  char **env = run_env(r, h->cfg->node_name);
  char *argv[] = {"/bin/sh", "-c", (char *)h->cmd[r->hook], NULL};
  uv_pipe_init(h->loop, &r->in, 0);
  uv_pipe_init(h->loop, &r->out, 0);
  uv_timer_init(h->loop, &r->timer);
  r->in.data = r->out.data = r->timer.data = r->proc.data = r->wr.data = r;
  r->open = 3; /* 4 once uv_spawn initialised the process handle */
  r->started = uv_now(h->loop);
  r->next = h->running;
  h->running = r;
  h->nrunning++;
  /* From here on the handles are open: on failure the caller closes them. */
  int rc = env ? uv_pipe(fds, UV_NONBLOCK_PIPE, 0) : UV_ENOMEM;
  if (!rc && (rc = uv_pipe_open(&r->out, fds[0]))) close(fds[0]);
  if (rc) {
    if (fds[1] >= 0) close(fds[1]);
    if (env) env_free(env);
    return rc;
  }
  uv_stdio_container_t stdio[3] = {
      {.flags = UV_CREATE_PIPE | UV_READABLE_PIPE, .data.stream = (uv_stream_t *)&r->in},
      {.flags = UV_INHERIT_FD, .data.fd = fds[1]},
      {.flags = UV_INHERIT_FD, .data.fd = fds[1]}};
  uv_process_options_t opts = {.exit_cb = on_proc_exit, .file = argv[0], .args = argv,
                               .env = env, .flags = UV_PROCESS_DETACHED, .stdio_count = 3,
                               .stdio = stdio};
  r->open = 4; /* a failed uv_spawn still initialised the handle */
  rc = uv_spawn(h->loop, &r->proc, &opts);
  close(fds[1]); /* the child's end: EOF once the hook and its children exit */
  env_free(env);
  if (rc) return rc;
  uv_buf_t buf = uv_buf_init(r->body, (unsigned)r->len);
  if (uv_write(&r->wr, (uv_stream_t *)&r->in, &buf, 1, on_written))
    uv_close((uv_handle_t *)&r->in, run_closed);
  uv_read_start((uv_stream_t *)&r->out, on_alloc, on_read);
  uv_timer_start(&r->timer, on_timer, h->timeout_ms, 0);
  log_debug(SYS, "%s for job '%s' (event %" PRId64 ") started: pid %d", hooks_name(r->hook),
            r->jobid, r->event_id, r->proc.pid);
  return 0;
}

/* Starts waiting runs while there is room. */
static void pump(hooks_t *h) {
  while (h->whead && h->nrunning < h->concurrency && !h->deadline_passed) {
    run_t *r = h->whead;
    h->whead = r->next;
    if (!h->whead) h->wtail = NULL;
    h->nwaiting--;
    r->next = NULL;
    r->h = h;
    int rc = run_spawn(h, r);
    if (rc) {
      log_error(SYS, "cannot start %s for job '%s': %s", hooks_name(r->hook), r->jobid,
                uv_strerror(rc));
      r->exited = r->eof = 1;
      r->status = -1;
      metrics_hook(h->metrics, r->hook, METRICS_HOOK_ERROR);
      /* Counted as an error, not as a failure: run_finish must not count it. */
      for (run_t **p = &h->running; *p; p = &(*p)->next)
        if (*p == r) {
          *p = r->next;
          break;
        }
      uv_close((uv_handle_t *)&r->timer, run_closed);
      if (r->open == 4) uv_close((uv_handle_t *)&r->proc, run_closed);
      uv_close((uv_handle_t *)&r->out, run_closed);
      uv_close((uv_handle_t *)&r->in, run_closed);
    }
  }
}

static void drop_waiting(hooks_t *h, const char *why) {
  if (!h->nwaiting) return;
  log_warn(SYS, "%zu hook run(s) not started: %s", h->nwaiting, why);
  for (run_t *r = h->whead; r; r = r->next) metrics_hook(h->metrics, r->hook, METRICS_HOOK_DROPPED);
  runs_free(h->whead);
  h->whead = h->wtail = NULL;
  h->nwaiting = 0;
}

static void take(hooks_t *h, op_t *o) {
  while (o->head) {
    run_t *r = o->head;
    o->head = r->next;
    r->next = NULL;
    if (h->nwaiting >= MAX_WAITING) {
      log_warn(SYS, "%s for job '%s' not run: %d runs already wait", hooks_name(r->hook),
               r->jobid, MAX_WAITING);
      metrics_hook(h->metrics, r->hook, METRICS_HOOK_DROPPED);
      run_free(r);
      continue;
    }
    if (h->wtail) h->wtail->next = r;
    else h->whead = r;
    h->wtail = r;
    h->nwaiting++;
  }
  o->tail = NULL;
  pump(h);
}

/* ---- the loop side: ticks ---- */

static void tick_start(hooks_t *h);
static void on_tick(uv_timer_t *t) { tick_start(t->data); }

static void read_done(void *arg, int rc) {
  op_t *o = arg;
  hooks_t *h = o->h;
  h->busy = 0;
  if (rc) {
    log_error(SYS, "cannot read events: %s", spd_strerror(rc));
  } else {
    if (o->leader && !h->leader)
      log_info(SYS, "this node runs the hooks of events no node ran (lease token %" PRId64 ")",
               o->token);
    h->leader = o->leader;
    h->token = o->token;
    h->cursor = o->last_id;
    take(h, o);
    if (o->full) h->again = 1;
  }
  runs_free(o->head);
  free(o);
  if (h->stopping) {
    /* One read more after the stop began, for the last jobs' events. */
    if (h->again && !rc && h->final_read < 8) tick_start(h);
    else h->final_read = -1, maybe_stopped(h);
    return;
  }
  uv_timer_start(&h->tick, on_tick, h->again ? 0 : TICK_MS, 0);
  h->again = 0;
}

static void tick_start(hooks_t *h) {
  if (h->busy) {
    h->again = 1;
    return;
  }
  op_t *o = calloc(1, sizeof(*o));
  if (!o) {
    if (!h->stopping) uv_timer_start(&h->tick, on_tick, TICK_MS, 0);
    return;
  }
  o->h = h;
  o->after = h->cursor;
  o->since = h->since;
  h->again = 0;
  if (h->stopping) h->final_read++;
  h->busy = 1;
  if (store_submit(h->store, STORE_WRITE, read_fn, o, read_done)) {
    h->busy = 0;
    free(o);
    if (h->stopping) h->final_read = -1;
    else uv_timer_start(&h->tick, on_tick, TICK_MS, 0);
  }
}

/* ---- life ---- */

int hooks_init(hooks_t **out, uv_loop_t *loop, const config_t *cfg, store_pool_t *store,
               metrics_t *metrics) {
  const char *cmd[METRICS_NHOOKS] = {cfg->hook_job_queued,    cfg->hook_job_started,
                                     cfg->hook_job_finished,  cfg->hook_job_failed,
                                     cfg->hook_job_cancelled, cfg->hook_job_lost,
                                     cfg->hook_job_ended,     cfg->hook_job_degraded,
                                     cfg->hook_job_broken};
  int any = 0;
  *out = NULL;
  for (int k = 0; k < METRICS_NHOOKS; k++) any |= cmd[k] && cmd[k][0];
  if (!any) return 0;
  hooks_t *h = calloc(1, sizeof(*h));
  if (!h) return -ENOMEM;
  h->loop = loop;
  h->cfg = cfg;
  h->store = store;
  h->metrics = metrics;
  for (int k = 0; k < METRICS_NHOOKS; k++) h->cmd[k] = cmd[k] ? cmd[k] : "";
  h->timeout_ms = (uint64_t)(cfg->hook_timeout * 1000.0);
  if (h->timeout_ms < 1) h->timeout_ms = 1;
  h->concurrency = cfg->hook_concurrency > 0 ? (unsigned)cfg->hook_concurrency : 1;
  h->cursor = -1;
  h->since = clock_wall_ms();
  uv_timer_init(loop, &h->tick);
  uv_timer_init(loop, &h->deadline);
  h->tick.data = h->deadline.data = h;
  char names[160] = "";
  for (int k = 0; k < METRICS_NHOOKS; k++)
    if (h->cmd[k][0])
      snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s%s", names[0] ? ", " : "",
               hooks_name(k));
  log_info(SYS, "running %s (timeout %g s, %u at once)", names, cfg->hook_timeout,
           h->concurrency);
  uv_timer_start(&h->tick, on_tick, 0, 0);
  *out = h;
  return 0;
}

void hooks_kick(hooks_t *h) {
  if (!h || h->stopping) return;
  if (h->busy) h->again = 1;
  else uv_timer_start(&h->tick, on_tick, 0, 0);
}

static void maybe_stopped(hooks_t *h) {
  if (h->deadline_passed) drop_waiting(h, "the daemon stops ([spiderd] shutdown_grace is over)");
  if (!h->stopping || h->busy || h->final_read >= 0 || h->nrunning || h->nwaiting) return;
  uv_timer_stop(&h->deadline);
  void (*done)(void *) = h->stopped;
  h->stopped = NULL;
  if (done) done(h->stopped_ud);
}

static void on_deadline(uv_timer_t *t) {
  hooks_t *h = t->data;
  h->deadline_passed = 1;
  drop_waiting(h, "the daemon stops ([spiderd] shutdown_grace is over)");
  for (run_t *r = h->running; r; r = r->next) {
    r->timed_out = 1;
    run_kill(r);
  }
  maybe_stopped(h);
}

void hooks_stop(hooks_t *h, void (*done)(void *ud), void *ud) {
  if (!h) {
    if (done) done(ud);
    return;
  }
  h->stopping = 1;
  h->stopped = done;
  h->stopped_ud = ud;
  uv_timer_stop(&h->tick);
  if (h->nrunning || h->nwaiting)
    log_info(SYS, "stopping: waiting for %u running and %zu waiting hook(s)", h->nrunning,
             h->nwaiting);
  uint64_t grace = (uint64_t)(h->cfg->shutdown_grace * 1000.0);
  uv_timer_start(&h->deadline, on_deadline, grace, 0);
  if (h->cursor >= 0) {
    h->final_read = 0;
    tick_start(h); /* queued behind a read in flight when busy */
  } else {
    h->final_read = -1;
  }
  maybe_stopped(h);
}

static void handle_closed(uv_handle_t *hd) {
  hooks_t *h = hd->data;
  if (--h->closing == 0) free(h);
}

void hooks_free(hooks_t *h) {
  if (!h) return;
  drop_waiting(h, "the daemon stopped");
  /* hooks_stop waited for every run: none is left to close. */
  h->closing = 2;
  uv_close((uv_handle_t *)&h->tick, handle_closed);
  uv_close((uv_handle_t *)&h->deadline, handle_closed);
}
