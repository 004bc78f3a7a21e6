/* Nodes sharing a store (cluster.h). */
#include "run/cluster.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"
#include "log.h"
#include "run/done.h"
#include "flow/eggsync.h"
#include "flow/jobs.h"

#define CANCELS_SEEN 64   /* jobs whose cancel request was acted on (once each: the
                           * crawl's own cancel_grace escalates to KILL) */
#define WATCH_RETRY_MS 1000


/* A kind of store op of which at most one is in flight; asked for again
 * meanwhile, it runs once more when the one in flight is over. */
typedef struct flight {
  int busy, again;
} flight_t;

struct cluster {
  uv_loop_t *loop;
  const config_t *cfg;
  store_pool_t *store;
  launcher_t *launcher;
  cluster_hooks_t hooks;
  int shared;
  char *url;
  int64_t started_ms;
  uv_timer_t beat_timer;
  uv_timer_t watch_timer; /* reconnects the watch while it is down */
  uv_poll_t poll;
  int poll_fd;            /* the fd `poll` watches; -1 = none */
  store_watch_t *watch;
  int ops;                /* store ops in flight */
  /* beating.again: the drain state changed while a beat was in flight */
  flight_t beating, syncing, cancel_checking;
  int pushed_once;        /* this node's own eggs went into the store */
  int stopping, handles;
  run_done_t stopped;
  uint64_t rng;
  int64_t cancels[CANCELS_SEEN];
  unsigned cancel_next;
  int64_t last_beat_ms; /* the last heartbeat written; 0 = none yet (readiness) */
  int64_t beating_since_ms; /* the first of this node's beats since which none was
                             * missed for long; 0 = none yet (reaping waits on it) */
  int draining;         /* written with each beat (cluster_set_draining) */
};

static void maybe_stopped(cluster_t *c) {
  if (!c->stopping || c->ops || c->handles) return;
  run_done_fire(&c->stopped);
}

/* Is one of f in flight? Then it is asked for again. */
static int flight_defer(flight_t *f) {
  if (f->busy) f->again = 1;
  return f->busy;
}

/* Submits f's op; on failure (returned) the caller still owns arg. */
static int flight_submit(cluster_t *c, flight_t *f, int kind, store_fn fn, void *arg,
                         store_done_cb done) {
  f->busy = 1;
  c->ops++;
  int rc = store_submit(c->store, kind, fn, arg, done);
  if (rc) {
    c->ops--;
    f->busy = 0;
  }
  return rc;
}

/* First thing in f's done callback. */
static void flight_landed(cluster_t *c, flight_t *f) {
  c->ops--;
  f->busy = 0;
}

/* Last thing in f's done callback (its op freed): starts f again when it
 * was asked for meanwhile, or ends a stop that waited on it. */
static void flight_over(cluster_t *c, flight_t *f, void (*start)(cluster_t *c)) {
  if (f->again && !c->stopping) {
    f->again = 0;
    start(c);
  }
  maybe_stopped(c);
}

/* ---- cancels asked on another node ---- */

typedef struct cancel_op {
  cluster_t *c;
  job_list_t jobs;
} cancel_op_t;

static int cancels_fn(store_t *s, void *arg) {
  cancel_op_t *op = arg;
  return store_jobs_cancel_requested(s, op->c->cfg->node_name, &op->jobs);
}

static int cancel_seen(cluster_t *c, int64_t id) {
  for (unsigned i = 0; i < CANCELS_SEEN; i++)
    if (c->cancels[i] == id) return 1;
  c->cancels[c->cancel_next] = id;
  c->cancel_next = (c->cancel_next + 1) % CANCELS_SEEN;
  return 0;
}

static void check_cancels(cluster_t *c);

static void cancels_done(void *arg, int rc) {
  cancel_op_t *op = arg;
  cluster_t *c = op->c;
  flight_landed(c, &c->cancel_checking);
  for (size_t i = 0; !rc && !c->stopping && i < op->jobs.n; i++) {
    job_t *j = &op->jobs.v[i];
    /* A pause (cancel_ms < 0) and a later cancel of the same job are two
     * requests, each acted on once. */
    int pause = j->cancel_ms < 0;
    if (!launcher_job_running(c->launcher, j->id) || cancel_seen(c, pause ? -j->id : j->id))
      continue;
    int found = 0;
    log_info("cluster", "job '%s' of project '%s': %s asked on another node", j->jobid,
             j->project, pause ? "pause" : "cancel");
    if (pause && launcher_pause(c->launcher, j->project, j->jobid, &found) == -ENOTSUP)
      log_warn("cluster", "job '%s' cannot be paused: its spider is not declared resumable",
               j->jobid);
    else if (!pause) launcher_cancel(c->launcher, j->project, j->jobid, SIGTERM, &found);
  }
  job_list_release(&op->jobs);
  free(op);
  flight_over(c, &c->cancel_checking, check_cancels);
}

static void check_cancels(cluster_t *c) {
  if (c->stopping || !launcher_running(c->launcher)) return;
  if (flight_defer(&c->cancel_checking)) return;
  cancel_op_t *op = calloc(1, sizeof(*op));
  if (!op) return;
  op->c = c;
  if (flight_submit(c, &c->cancel_checking, STORE_READ, cancels_fn, op, cancels_done))
    free(op);
}

/* ---- egg copies ---- */

typedef struct sync_op {
  cluster_t *c;
  int changed;
  int pushed;
} sync_op_t;

static int sync_fn(store_t *s, void *arg) {
  sync_op_t *op = arg;
  /* The first copy after start-up brings this node's eggs the store does
   * not have (a node joining a cluster, or one upgraded from a private
   * store) rather than deleting them. */
  int rc = op->c->pushed_once ? 0 : eggsync_push_missing(s, op->c->cfg->eggs_dir, &op->pushed);
  if (!rc) rc = eggsync_pull(s, op->c->cfg->eggs_dir, NULL, &op->changed);
  return rc;
}

static void sync_eggs(cluster_t *c);

static void sync_done(void *arg, int rc) {
  sync_op_t *op = arg;
  cluster_t *c = op->c;
  flight_landed(c, &c->syncing);
  if (!rc) c->pushed_once = 1;
  if (rc) log_error("cluster", "copying eggs from the store failed: %s", spd_strerror(rc));
  else if (op->changed && c->hooks.eggs) c->hooks.eggs(c->hooks.ud);
  free(op);
  flight_over(c, &c->syncing, sync_eggs);
}

static void sync_eggs(cluster_t *c) {
  if (c->stopping || !c->shared) return;
  if (flight_defer(&c->syncing)) return;
  sync_op_t *op = calloc(1, sizeof(*op));
  if (!op) return;
  op->c = c;
  if (flight_submit(c, &c->syncing, STORE_READ, sync_fn, op, sync_done)) free(op);
}

/* ---- heartbeat and reaping ---- */

typedef struct beat_op {
  cluster_t *c;
  node_info_t node;
  int64_t now;
  int reap;      /* may declare other nodes dead (reap_allowed) */
  int was_dead;
  uint32_t rnd;
  job_list_t lost;
  int retried;
  flow_change_t change; /* the lost jobs ended and their retries queued */
} beat_op_t;

static int beat_fn(store_t *s, void *arg) {
  beat_op_t *op = arg;
  cluster_t *c = op->c;
  /* A run the store pool repeats after a collision starts afresh. */
  op->was_dead = 0;
  op->retried = 0;
  op->change = (flow_change_t){0};
  job_list_release(&op->lost);
  memset(&op->lost, 0, sizeof(op->lost));
  int rc = store_node_beat(s, &op->node, op->now, &op->was_dead);
  if (rc || !c->shared || !op->reap) return rc;
  return jobs_reap_nodes(s, c->cfg, op->now, clock_secs_ms(c->cfg->node_timeout), op->rnd,
                         &op->lost, &op->retried, &op->change);
}

static void beat(cluster_t *c);

/* A gap in this node's own beats longer than this starts its watch over. */
static int64_t beat_gap_ms(const cluster_t *c) {
  return clock_secs_ms(c->cfg->node_timeout) / 2;
}

/* Whether this node may declare others dead at now_ms: only once its own
 * beats have reached the store, without a long gap, for a whole
 * node_timeout. A node that could not reach the store (nor, it may be, could
 * anyone: the store was down or cut off) has not watched the others; their
 * beats are old because they could not write them either, and declaring
 * them dead the moment it gets through would end their running crawls as
 * lost and retry them while the crawls still run. They get node_timeout
 * from then on to beat again, as after this node's start. */
static int reap_allowed(const cluster_t *c, int64_t now_ms) {
  return c->beating_since_ms && now_ms - c->last_beat_ms <= beat_gap_ms(c) &&
         now_ms - c->beating_since_ms >= clock_secs_ms(c->cfg->node_timeout);
}

/* This node's beat of now_ms is in the store. */
static void beat_written(cluster_t *c, int64_t now_ms) {
  if (!c->last_beat_ms || now_ms - c->last_beat_ms > beat_gap_ms(c)) {
    if (c->last_beat_ms)
      log_warn("cluster", "this node's heartbeats did not reach the store for %.1f s: it "
               "declares no node dead for %g s (node_timeout)",
               (double)(now_ms - c->last_beat_ms) / 1000.0, c->cfg->node_timeout);
    c->beating_since_ms = now_ms;
  }
  c->last_beat_ms = now_ms;
}

static void beat_done(void *arg, int rc) {
  beat_op_t *op = arg;
  cluster_t *c = op->c;
  flight_landed(c, &c->beating);
  if (!rc && c->hooks.flow) flow_apply(c->hooks.flow, &op->change);
  if (rc) {
    log_error("cluster", "heartbeat failed: %s", spd_strerror(rc));
  } else if (!c->stopping) {
    beat_written(c, op->now);
    if (op->was_dead) {
      log_error("cluster", "this node was declared dead by another (no heartbeat for %.0f s): "
                "its crawls are killed, their jobs were ended as lost", c->cfg->node_timeout);
      launcher_kill_all(c->launcher);
    }
    for (size_t i = 0; i < op->lost.n; i++)
      log_warn("cluster", "node '%s' is dead: its job '%s' (#%lld) is lost",
               op->lost.v[i].node ? op->lost.v[i].node : "?", op->lost.v[i].jobid,
               (long long)op->lost.v[i].id);
    if (op->retried) log_info("cluster", "%d lost job(s) queued again", op->retried);
    if (c->shared) {
      /* The safety net under notices: a missed one costs one beat. */
      launcher_dispatch_blind(c->launcher);
      check_cancels(c);
    }
  }
  node_info_release(&op->node);
  job_list_release(&op->lost);
  free(op);
  flight_over(c, &c->beating, beat);
}

static void beat(cluster_t *c) {
  if (c->stopping || c->beating.busy) return;
  beat_op_t *op = calloc(1, sizeof(*op));
  if (!op) return;
  op->c = c;
  op->node.name = strdup(c->cfg->node_name);
  op->node.url = strdup(c->url);
  op->node.version = strdup(SPIDERD_VERSION);
  op->node.slots = config_max_proc(c->cfg);
  op->node.running = (int)launcher_running(c->launcher);
  op->node.started_ms = c->started_ms;
  op->node.draining = c->draining;
  memfit_node_t mem;
  launcher_memory(c->launcher, &mem);
  op->node.mem_free = mem.free;
  op->node.mem_reserved = mem.reserved;
  op->now = clock_wall_ms();
  op->reap = reap_allowed(c, op->now);
  c->rng = c->rng * 6364136223846793005ULL + 1442695040888963407ULL;
  op->rnd = (uint32_t)(c->rng >> 33);
  if (!op->node.name || !op->node.url || !op->node.version) {
    node_info_release(&op->node);
    free(op);
    return;
  }
  if (flight_submit(c, &c->beating, STORE_WRITE, beat_fn, op, beat_done)) {
    node_info_release(&op->node);
    free(op);
  }
}

static void on_beat(uv_timer_t *t) { beat(t->data); }

int64_t cluster_last_beat(const cluster_t *c) { return c ? c->last_beat_ms : 0; }

void cluster_set_draining(cluster_t *c, int draining) {
  if (!c || c->draining == !!draining) return;
  c->draining = !!draining;
  /* Now (or right after the beat in flight, which carries the old state):
   * the other nodes and /api/v1/nodes see it at once. A timer's beat that
   * finds one in flight is skipped, as before: a slow store is not beaten
   * back to back. */
  if (!flight_defer(&c->beating)) beat(c);
}

/* ---- notices ---- */

static void on_notes(cluster_t *c, unsigned what) {
  if (c->stopping) return;
  if (what & (STORE_NOTE_JOBS | STORE_NOTE_NODES)) launcher_dispatch_blind(c->launcher);
  if (what & STORE_NOTE_EGGS) sync_eggs(c);
  if (what & STORE_NOTE_CANCEL) check_cancels(c);
  if ((what & STORE_NOTE_QUEUES) && c->hooks.queues) c->hooks.queues(c->hooks.ud);
}

static void watch_rearm(cluster_t *c);

static void on_readable(uv_poll_t *h, int status, int events) {
  cluster_t *c = h->data;
  unsigned what = 0;
  int rc = store_watch_read(c->watch, &what);
  on_notes(c, what);
  if (rc || store_watch_fd(c->watch) != c->poll_fd) watch_rearm(c);
}

static void poll_closed(uv_handle_t *h) {
  cluster_t *c = h->data;
  c->handles--;
  if (!c->stopping) watch_rearm(c);
  maybe_stopped(c);
}

static void on_watch_timer(uv_timer_t *t) {
  cluster_t *c = t->data;
  unsigned what = 0;
  if (c->stopping) return;
  if (store_watch_read(c->watch, &what) == 0) on_notes(c, what);
  watch_rearm(c);
}

/* Points the poll handle at the watch's current socket, or, while it is
 * down, retries on a timer. */
static void watch_rearm(cluster_t *c) {
  if (c->stopping || !c->watch) return;
  int fd = store_watch_fd(c->watch);
  if (c->poll_fd >= 0 && fd == c->poll_fd) return;
  if (c->poll_fd >= 0) {
    /* A socket of the old connection: close the handle, then come back. */
    c->poll_fd = -1;
    c->handles++;
    uv_close((uv_handle_t *)&c->poll, poll_closed);
    return;
  }
  if (fd < 0) {
    uv_timer_start(&c->watch_timer, on_watch_timer, WATCH_RETRY_MS, 0);
    return;
  }
  if (uv_poll_init(c->loop, &c->poll, fd)) {
    uv_timer_start(&c->watch_timer, on_watch_timer, WATCH_RETRY_MS, 0);
    return;
  }
  c->poll.data = c;
  c->poll_fd = fd;
  uv_poll_start(&c->poll, UV_READABLE, on_readable);
}

/* ---- life ---- */

static char *default_url(const config_t *cfg) {
  char host[256] = "";
  const char *b = cfg->bind_address;
  if (b && *b && strcmp(b, "0.0.0.0") && strcmp(b, "::")) snprintf(host, sizeof(host), "%s", b);
  else if (gethostname(host, sizeof(host) - 1)) snprintf(host, sizeof(host), "localhost");
  char *url = NULL;
  int v6 = strchr(host, ':') != NULL;
  if (asprintf(&url, "%s://%s%s%s:%d", cfg->https_cert[0] ? "https" : "http", v6 ? "[" : "",
               host, v6 ? "]" : "", cfg->http_port) < 0)
    return NULL;
  return url;
}

int cluster_init(cluster_t **out, uv_loop_t *loop, const config_t *cfg, store_pool_t *store,
                 launcher_t *launcher, int shared, const cluster_hooks_t *hooks, char *err,
                 size_t errlen) {
  *out = NULL;
  cluster_t *c = calloc(1, sizeof(*c));
  if (!c) return -ENOMEM;
  c->loop = loop;
  c->cfg = cfg;
  c->store = store;
  c->launcher = launcher;
  c->shared = shared;
  c->poll_fd = -1;
  if (hooks) c->hooks = *hooks;
  c->started_ms = clock_wall_ms();
  c->rng = (uint64_t)c->started_ms ^ ((uint64_t)getpid() << 32);
  c->url = cfg->node_url[0] ? strdup(cfg->node_url) : default_url(cfg);
  if (!c->url) {
    free(c);
    return -ENOMEM;
  }
  if (shared) {
    int rc = store_watch_open(cfg->store, &c->watch, err, errlen);
    if (rc) {
      free(c->url);
      free(c);
      return rc;
    }
  }
  uv_timer_init(loop, &c->beat_timer);
  uv_timer_init(loop, &c->watch_timer);
  c->beat_timer.data = c->watch_timer.data = c;
  uint64_t every = (uint64_t)clock_secs_ms(cfg->node_heartbeat);
  uv_timer_start(&c->beat_timer, on_beat, 0, every ? every : 1000);
  launcher_set_shared(launcher, shared);
  watch_rearm(c);
  sync_eggs(c);
  *out = c;
  return 0;
}


static void timer_closed(uv_handle_t *h) {
  cluster_t *c = h->data;
  c->handles--;
  maybe_stopped(c);
}

void cluster_stop(cluster_t *c, void (*done)(void *ud), void *ud) {
  if (!c || c->stopping) return;
  c->stopping = 1;
  run_done_set(&c->stopped, done, ud);
  c->handles += 2;
  uv_close((uv_handle_t *)&c->beat_timer, timer_closed);
  uv_close((uv_handle_t *)&c->watch_timer, timer_closed);
  if (c->poll_fd >= 0) {
    c->poll_fd = -1;
    c->handles++;
    uv_close((uv_handle_t *)&c->poll, poll_closed);
  }
  maybe_stopped(c);
}

void cluster_free(cluster_t *c) {
  if (!c) return;
  store_watch_close(c->watch);
  free(c->url);
  free(c);
}
