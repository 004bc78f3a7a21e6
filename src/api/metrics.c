/* GET /metrics (Prometheus text format 0.0.4), /healthz and /readyz.
 *
 * /metrics renders this node's counters and histograms (metrics.h), the
 * store's job and queue counts read in one store op, and the process's own
 * figures from /proc/self. /healthz answers whenever the loop does;
 * /readyz asks the store for one cheap read within READY_TIMEOUT_MS and,
 * on a shared store, wants this node's heartbeat to be current.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api/objserve.h"
#include "app.h"
#include "clock.h"
#include "core/job.h"
#include "core/queue.h"
#include "error.h"
#include "log.h"
#include "metrics.h"
#include "flow/memfit.h"
#include "store/store.h"
#include "strbuf.h"

#define READY_TIMEOUT_MS 2000
#define CT_METRICS "text/plain; version=0.0.4; charset=utf-8"

/* ---- /metrics ---- */

typedef struct scrape {
  app_t *app;
  http_req_t *req;
  int64_t counts[JOB_NSTATES];
  strbuf_t queues; /* the spiderd_queue_elements samples, rendered on the store thread */
} scrape_t;

static int scrape_queue(void *arg, const queue_conf_t *q, const queue_stats_t *st) {
  strbuf_t *b = arg;
  struct {
    const char *state;
    int64_t v;
  } v[] = {{"ready", st->past_due}, {"delayed", st->waiting - st->past_due},
           {"leased", st->inflight}, {"dead", st->dead}, {"done", st->done}};
  for (size_t k = 0; k < sizeof(v) / sizeof(v[0]); k++) {
    const char *l[] = {"queue", q->name, "state", v[k].state};
    metrics_sample(b, "spiderd_queue_elements", l, 2, (double)v[k].v);
  }
  return b->failed ? -ENOMEM : 0;
}

static int scrape_fn(store_t *s, void *arg) {
  scrape_t *sc = arg;
  int rc = store_job_counts(s, NULL, sc->counts);
  return rc ? rc : store_queues_each(s, clock_wall_ms(), scrape_queue, &sc->queues);
}

static void scrape_free(scrape_t *sc) {
  strbuf_release(&sc->queues);
  free(sc);
}

/* utime + stime, RSS and start time from /proc/self/stat. */
static void render_process(strbuf_t *b) {
  long tck = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
  char buf[4096];
  FILE *f = fopen("/proc/self/stat", "re");
  size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
  if (f) fclose(f);
  buf[n] = '\0';
  unsigned long long ut = 0, st = 0, start = 0;
  long long rss = 0;
  /* fields after the command's closing parenthesis, from field 3 (state) */
  char *p = strrchr(buf, ')');
  int ok = p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d "
                                "%*d %*d %*d %*d %llu %*u %lld",
                       &ut, &st, &start, &rss) == 4;
  double btime = 0;
  if ((f = fopen("/proc/stat", "re"))) {
    char line[256];
    while (fgets(line, sizeof(line), f))
      if (sscanf(line, "btime %lf", &btime) == 1) break;
    fclose(f);
  }
  long fds = 0;
  DIR *d = opendir("/proc/self/fd");
  if (d) {
    for (struct dirent *e; (e = readdir(d));)
      if (e->d_name[0] != '.') fds++;
    closedir(d);
    fds--; /* the one opendir holds */
  }
  if (ok && tck > 0) {
    metrics_family(b, "process_cpu_seconds_total", "counter",
                   "Total user and system CPU time spent in seconds.");
    metrics_sample(b, "process_cpu_seconds_total", NULL, 0, (double)(ut + st) / (double)tck);
    metrics_family(b, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
    metrics_sample(b, "process_resident_memory_bytes", NULL, 0, (double)rss * (double)page);
    if (btime > 0) {
      metrics_family(b, "process_start_time_seconds", "gauge",
                     "Start time of the process since unix epoch in seconds.");
      metrics_sample(b, "process_start_time_seconds", NULL, 0,
                     btime + (double)start / (double)tck);
    }
  }
  if (d) {
    metrics_family(b, "process_open_fds", "gauge", "Number of open file descriptors.");
    metrics_sample(b, "process_open_fds", NULL, 0, (double)fds);
  }
}

static void render_store(const scrape_t *sc, strbuf_t *b) {
  metrics_family(b, "spiderd_store_jobs", "gauge",
                 "Jobs in the store by state, for the whole cluster on a shared store "
                 "(every node reports the same: use max() over nodes).");
  const char *pl[] = {"state", "pending"}, *rl[] = {"state", "running"};
  metrics_sample(b, "spiderd_store_jobs", pl, 1, (double)sc->counts[JOB_PENDING]);
  metrics_sample(b, "spiderd_store_jobs", rl, 1, (double)sc->counts[JOB_RUNNING]);
  const char *zl[] = {"state", "paused"};
  metrics_sample(b, "spiderd_store_jobs", zl, 1, (double)sc->counts[JOB_PAUSED]);
  metrics_family(b, "spiderd_queue_elements", "gauge",
                 "Elements of each task queue in the store by state (shared on a cluster: "
                 "use max() over nodes).");
  if (sc->queues.len) strbuf_add(b, sc->queues.p, sc->queues.len);
}

/* This node's memory for crawls (slots by memory: flow/memfit.h). */
static void render_memory(const app_t *app, strbuf_t *b) {
  memfit_node_t m;
  app->flow.memory(app->flow.launcher, &m);
  static const struct {
    const char *name, *help;
  } fam[] = {
      {"spiderd_memory_available_bytes",
       "Memory free on this node's machine, or under its cgroup's limit."},
      {"spiderd_memory_reserve_bytes", "Memory kept free for everything else (memory_reserve)."},
      {"spiderd_memory_reserved_bytes",
       "Memory the crawls here are expected to use: each the larger of its expected memory "
       "and its peak."},
      {"spiderd_memory_free_bytes", "Memory one more job may take here: a job starts only when "
                                    "its expected memory fits."},
  };
  const double v[] = {(double)m.available, (double)m.reserve, (double)m.reserved,
                      (double)m.free};
  for (size_t i = 0; i < sizeof(fam) / sizeof(*fam); i++) {
    metrics_family(b, fam[i].name, "gauge", fam[i].help);
    metrics_sample(b, fam[i].name, NULL, 0, v[i]);
  }
}

static void scrape_done(void *arg, int rc) {
  scrape_t *sc = arg;
  app_t *app = sc->app;
  strbuf_t b = {0};
  metrics_family(&b, "spiderd_up", "gauge", "1 when the daemon answers.");
  metrics_sample(&b, "spiderd_up", NULL, 0, 1);
  metrics_family(&b, "spiderd_build_info", "gauge", "The spiderd version, as a label.");
  const char *vl[] = {"version", SPIDERD_VERSION};
  metrics_sample(&b, "spiderd_build_info", vl, 1, 1);
  metrics_family(&b, "spiderd_node_info", "gauge", "This node's name, as a label.");
  const char *nl[] = {"node", app->cfg.node_name};
  metrics_sample(&b, "spiderd_node_info", nl, 1, 1);
  metrics_family(&b, "spiderd_store_up", "gauge",
                 "1 when this scrape's read of the store succeeded (else the store's "
                 "gauges are missing).");
  metrics_sample(&b, "spiderd_store_up", NULL, 0, rc ? 0 : 1);
  if (rc) log_warn("metrics", "cannot read the store's counts: %s", spd_strerror(rc));
  else render_store(sc, &b);
  metrics_family(&b, "spiderd_jobs_running_here", "gauge",
                 "Crawl processes this node runs now (its launcher's children).");
  metrics_sample(&b, "spiderd_jobs_running_here", NULL, 0, (double)app->counters.running);
  if (app->flow.memory) render_memory(app, &b);
  if (app->metrics) metrics_render(app->metrics, &b);
  if (app->s3) api_objstore_metrics(app->s3, &b);
  render_process(&b);
  if (b.failed) http_reply(sc->req, 500, "text/plain; charset=utf-8", "out of memory\n", 14);
  else http_reply(sc->req, 200, CT_METRICS, b.p ? b.p : "", b.len);
  strbuf_release(&b);
  scrape_free(sc);
}

static int method_ok(http_req_t *req) {
  const char *m = http_req_method(req);
  if (!strcmp(m, "GET") || !strcmp(m, "HEAD")) return 1;
  http_reply_header(req, "Allow", "GET, HEAD");
  http_reply(req, 405, "text/plain; charset=utf-8", "405 Method Not Allowed\n", 23);
  return 0;
}

static void on_metrics(http_req_t *req, void *ud) {
  app_t *app = ud;
  if (!method_ok(req)) return;
  scrape_t *sc = http_req_calloc(req, sizeof(*sc));
  if (!sc) return;
  sc->app = app;
  sc->req = req;
  if (!app->store || store_submit(app->store, STORE_READ, scrape_fn, sc, scrape_done))
    scrape_done(sc, SPD_ESHUTDOWN);
}

/* ---- /healthz, /readyz ---- */

static void on_healthz(http_req_t *req, void *ud) {
  if (method_ok(req)) http_reply(req, 200, "text/plain; charset=utf-8", "ok\n", 3);
}

typedef struct ready {
  app_t *app;
  http_req_t *req; /* NULL once answered */
  uv_timer_t timer;
  int op_pending, timer_open;
} ready_t;

static void ready_maybe_free(ready_t *r) {
  if (!r->op_pending && !r->timer_open) free(r);
}

static void ready_timer_closed(uv_handle_t *h) {
  ready_t *r = h->data;
  r->timer_open = 0;
  ready_maybe_free(r);
}

static void ready_answer(ready_t *r, int ok, const char *why) {
  if (!r->req) return;
  char msg[1024], os[600] = "";
  if (r->app->s3) api_objstore_problem(r->app->s3, os, sizeof(os));
  if (ok) snprintf(msg, sizeof(msg), "ready%s%s\n", os[0] ? "; object store: " : "", os);
  else snprintf(msg, sizeof(msg), "not ready: %s\n", why);
  http_reply(r->req, ok ? 200 : 503, "text/plain; charset=utf-8", msg, strlen(msg));
  r->req = NULL;
  if (r->timer_open && !uv_is_closing((uv_handle_t *)&r->timer)) {
    uv_timer_stop(&r->timer);
    uv_close((uv_handle_t *)&r->timer, ready_timer_closed);
  }
}

/* The readiness rule, apart from the store's answer: a shared store wants a
 * heartbeat younger than node_timeout (older, other nodes may declare this
 * one dead and take its jobs). */
int api_ready_check(int shared, int64_t last_beat_ms, int64_t now_ms, double node_timeout_s,
                    char *why, size_t whylen) {
  if (!shared) return 1;
  if (!last_beat_ms) {
    snprintf(why, whylen, "this node has not written a heartbeat to the shared store yet");
    return 0;
  }
  int64_t age = now_ms - last_beat_ms;
  if (age > (int64_t)(node_timeout_s * 1000.0)) {
    snprintf(why, whylen, "this node's last heartbeat is %.1f s old (node_timeout is %g s)",
             (double)age / 1000.0, node_timeout_s);
    return 0;
  }
  return 1;
}

static int ready_fn(store_t *s, void *arg) {
  char *v = NULL;
  int rc = store_meta_get(s, "spiderd.readyz", &v);
  free(v);
  return rc == -ENOENT ? 0 : rc;
}

static void ready_done(void *arg, int rc) {
  ready_t *r = arg;
  r->op_pending = 0;
  if (rc) {
    char why[160];
    snprintf(why, sizeof(why), "the store did not answer: %s", spd_strerror(rc));
    ready_answer(r, 0, why);
  } else if (r->req) {
    char why[160] = "";
    app_t *app = r->app;
    int ok = api_ready_check(store_pool_shared(app->store), flow_last_beat(&app->flow),
                             clock_wall_ms(), app->cfg.node_timeout, why, sizeof(why));
    if (ok && app->stopping) {
      ok = 0;
      snprintf(why, sizeof(why), "the daemon is stopping");
    } else if (ok && app->draining) {
      /* Alive (/healthz) and answering, but a balancer should send its
       * traffic elsewhere: the node is on its way out or being emptied. */
      ok = 0;
      snprintf(why, sizeof(why), "this node is draining (it claims no jobs)");
    }
    ready_answer(r, ok, why);
  }
  ready_maybe_free(r);
}

static void ready_timeout(uv_timer_t *t) {
  ready_t *r = t->data;
  char why[96];
  snprintf(why, sizeof(why), "the store did not answer within %d ms", READY_TIMEOUT_MS);
  ready_answer(r, 0, why);
}

static void on_readyz(http_req_t *req, void *ud) {
  app_t *app = ud;
  if (!method_ok(req)) return;
  ready_t *r = http_req_calloc(req, sizeof(*r));
  if (!r) return;
  r->app = app;
  r->req = req;
  if (!app->store || store_submit(app->store, STORE_READ, ready_fn, r, ready_done)) {
    ready_answer(r, 0, "the store is closed");
    free(r);
    return;
  }
  r->op_pending = 1;
  uv_timer_init(app->loop, &r->timer);
  r->timer.data = r;
  r->timer_open = 1;
  uv_timer_start(&r->timer, ready_timeout, READY_TIMEOUT_MS, 0);
}

/* ---- registration ---- */

static void observe(void *ud, const char *method, const char *route, int status, double secs) {
  app_t *app = ud;
  metrics_http_observe(app->metrics, route, method, status, secs);
}

int api_metrics_register(app_t *app) {
  static const struct {
    const char *path;
    http_handler_fn fn;
  } routes[] = {{"/metrics", on_metrics}, {"/healthz", on_healthz}, {"/readyz", on_readyz}};
  for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
    int rc = http_route(app->http, routes[i].path, routes[i].fn, app);
    if (!rc && app->cfg.probes_public) rc = http_route_public(app->http, routes[i].path);
    if (rc) return rc;
  }
  if (app->metrics) http_set_observer(app->http, observe, app);
  return 0;
}
