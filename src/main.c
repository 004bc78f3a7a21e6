/* spiderd: command line and the daemon's life (start, recovery, stop). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "api/auth.h"
#include "api/projects.h"
#include "api/pyenvs.h"
#include "app.h"
#include "run/cluster.h"
#include "run/hooks.h"
#include "run/janitor.h"
#include "run/launcher.h"
#include "run/scheduler.h"
#include "run/webhooks.h"
#include "flow/eggsync.h"
#include "flow/accounts.h"
#include "flow/pausestate.h"
#include "run/objstore.h"
#include "net/s3.h"
#include "cli/cli.h"
#include "error.h"
#include "fsutil.h"
#include "log.h"
#include "metrics.h"
#include "addr.h"
#include "sdnotify.h"
#include "api/sse.h"
#include "store/eggs.h"
#include "store/scrapyd_import.h"

typedef struct server {
  app_t app;
  uv_signal_t sig_term, sig_int, sig_hup;
  int signals_open;
  uv_timer_t watchdog; /* WATCHDOG=1 to systemd at half of WATCHDOG_USEC */
  int watchdog_open;
  uv_timer_t drain_timer; /* a signal's drain: drain_grace, or 0 once drained */
  int exiting;            /* a signal's drain is under way: it ends in the stop */
  hooks_t *hooks;         /* [hooks]; NULL when none is set */
} server_t;

static void usage(FILE *out) {
  fprintf(out,
          "usage: spiderd [serve] [options]\n"
          "       spiderd COMMAND [options]   (a client of a running daemon, below)\n"
          "       spiderd help [COMMAND]\n"
          "       spiderd --version\n"
          "\n"
          "serve: run the daemon in the current directory, reading scrapyd.conf like Scrapyd.\n"
          "options:\n"
          "  --config FILE          read FILE after the usual config files (repeatable)\n"
          "  --bind ADDR            bind_address (default 127.0.0.1)\n"
          "  --port N               http_port (default 6800)\n"
          "  --unix-socket PATH     also listen on a Unix socket\n"
          "  --store URL            store (default sqlite:<dbs_dir>/spiderd.db)\n"
          "  --python PATH          interpreter that runs crawls\n"
          "  --max-proc N           concurrent crawls (0 = cpus x max_proc_per_cpu)\n"
          "  --eggs-dir D --logs-dir D --items-dir D --dbs-dir D\n"
          "  --node-name NAME       node_name in every response\n"
          "  --log-file F           the daemon's log (default stderr)\n"
          "  --log-level L          debug | info | warning | error\n"
          "  --log-format F         text | json (one JSON object per line)\n"
          "  --pidfile F            write the pid to F\n"
          "  --ui-dir D             built web console, docs and API explorer (ui_dir)\n"
          "  --set SECTION.KEY=VAL  any config key\n"
          "\n");
  cli_usage(out);
}

static void close_cb(uv_handle_t *h) { (void)h; }

static void cluster_stopped(void *ud) {
  server_t *srv = ud;
  app_t *app = &srv->app;
  cluster_free(app->cluster);
  app->cluster = NULL;
  janitor_free(app->janitor);
  app->janitor = NULL;
  hooks_free(srv->hooks);
  srv->hooks = NULL;
  webhooks_free(app->webhooks);
  app->webhooks = NULL;
  spiders_free(app->spiders);
  app->spiders = NULL;
  pyenvs_free(app->pyenvs);
  app->pyenvs = NULL;
  app->flow.env_ensure = NULL;
  app->flow.env_use = NULL;
  /* The store's last callbacks reply to requests still waiting on it, so the
   * pool stops before the HTTP server. */
  store_pool_stop(app->store);
  app->store = NULL;
  http_server_stop(app->http);
  app->http = NULL;
  auth_free(app);
  app->flow = (flow_hooks_t){0};
  launcher_free(app->launcher);
  app->launcher = NULL;
  scheduler_free(app->scheduler);
  app->scheduler = NULL;
  if (srv->signals_open) {
    srv->signals_open = 0;
    uv_close((uv_handle_t *)&srv->sig_term, close_cb);
    uv_close((uv_handle_t *)&srv->sig_int, close_cb);
    uv_close((uv_handle_t *)&srv->sig_hup, close_cb);
    uv_close((uv_handle_t *)&srv->drain_timer, close_cb);
  }
  if (srv->watchdog_open) { /* it beats through the drain, so systemd waits */
    srv->watchdog_open = 0;
    uv_close((uv_handle_t *)&srv->watchdog, close_cb);
  }
  log_info("main", "stopped");
}

/* The node beats until its crawls have ended (so no other node declares it
 * dead meanwhile), and stops just before the store. */
static void janitor_stopped(void *ud) {
  server_t *srv = ud;
  cluster_stop(srv->app.cluster, cluster_stopped, srv);
}

/* The janitor's batch under way commits before the store stops. */
static void webhooks_stopped(void *ud) {
  server_t *srv = ud;
  janitor_stop(srv->app.janitor, janitor_stopped, srv);
}

/* Webhooks stop after the launcher (its last job events stay after the
 * cursor and go out at the next start) and before the store, which keeps
 * their cursor. */
static void hooks_stopped(void *ud) {
  server_t *srv = ud;
  webhooks_stop(srv->app.webhooks, webhooks_stopped, srv);
}

/* Hooks stop after the launcher too, so the last crawls' ends run theirs
 * (within shutdown_grace). */
static void launcher_stopped(void *ud) {
  server_t *srv = ud;
  hooks_stop(srv->hooks, hooks_stopped, srv);
}

/* The scheduler stops first (and gives its lease up, so another node
 * takes over at once); no job it could still queue is then left behind. */
static void scheduler_stopped(void *ud) {
  server_t *srv = ud;
  launcher_stop(srv->app.launcher, launcher_stopped, srv);
}

static void begin_stop(server_t *srv) {
  app_t *app = &srv->app;
  if (app->stopping) return;
  app->stopping = 1;
  if (srv->signals_open) uv_timer_stop(&srv->drain_timer);
  sdnotify("STOPPING=1\nSTATUS=stopping: waiting for crawls to end");
  sse_hub_stop(app->sse); /* event streams end now, not after the crawls */
  app->sse = NULL;
  api_queues_stop(app); /* so do long-poll takes */
  log_info("main", "stopping: crawls get SIGTERM, pending jobs stay queued");
  scheduler_stop(app->scheduler, scheduler_stopped, srv);
}

/* ---- drain ---- */

/* A signal's drain is over: the crawls ended, or drain_grace ran out (then
 * the stop TERMs what still runs, as a stop without a drain would). */
static void drain_over(uv_timer_t *t) {
  server_t *srv = t->data;
  unsigned left = launcher_running(srv->app.launcher);
  if (left)
    log_warn("main", "drain_grace (%g s) is over with %u crawl(s) still running: stopping them",
             srv->app.cfg.drain_grace, left);
  else
    log_info("main", "drained: no crawl runs");
  begin_stop(srv);
}

/* The launcher is idle. This runs inside its callbacks, which must not see
 * the daemon stop under them: the stop starts on the next loop turn. */
static void drained(void *ud) {
  server_t *srv = ud;
  if (srv->exiting && !srv->app.stopping) uv_timer_start(&srv->drain_timer, drain_over, 0, 0);
}

/* Eggs arrived from the shared store or went with it: build what the new
 * ones need ahead if asked, and remove what no kept version uses now. */
static void eggs_arrived(void *ud) {
  app_t *app = ud;
  if (!app->pyenvs) return;
  if (app->cfg.env_prebuild) pyenvs_prebuild(app->pyenvs);
  pyenvs_collect(app->pyenvs);
}

/* app->flow.env_ensure: the launcher builds a version's environment on its
 * first claim through the builder the uploads use. */
static int env_ensure_hook(void *envs, const char *interp, const char *reqs,
                           void (*cb)(void *ud, int rc, const char *key, const char *why),
                           void *ud) {
  return pyenvs_ensure(envs, interp, reqs, 0, cb, ud);
}

static void env_use_hook(void *envs, const char *key, int on) {
  if (on) pyenvs_hold(envs, key);
  else pyenvs_unhold(envs, key);
}

static void notify_serving(const config_t *cfg) {
  char msg[320];
  snprintf(msg, sizeof(msg), "STATUS=serving on %.200s:%d", cfg->bind_address, cfg->http_port);
  sdnotify(msg);
}

/* spiderd drain (app->flow.drain): this node claims nothing while its crawls
 * run on, and serves on; so do the other nodes, which take its share. */
static int drain_hook(void *ud, int on) {
  server_t *srv = ud;
  app_t *app = &srv->app;
  if (app->stopping || srv->exiting) return on ? 0 : SPD_ESHUTDOWN;
  if (app->draining == on) return 0;
  app->draining = on;
  cluster_set_draining(app->cluster, on);
  if (on) {
    log_info("main", "draining: claiming no jobs; %u crawl(s) run on, pending jobs stay queued",
             launcher_running(app->launcher));
    sdnotify("STATUS=draining: claiming no jobs (spiderd drain --cancel resumes)");
    launcher_drain(app->launcher, NULL, NULL);
  } else {
    log_info("main", "drain cancelled: claiming jobs again");
    notify_serving(&app->cfg);
    launcher_undrain(app->launcher);
  }
  return 0;
}

/* SIGTERM or SIGINT: drain (claim nothing, let the crawls end for up to
 * drain_grace), then stop; a second signal stops at once. */
static void begin_exit(server_t *srv) {
  app_t *app = &srv->app;
  if (app->stopping) return;
  if (srv->exiting) {
    log_info("main", "second signal: stopping now, without the rest of drain_grace");
    begin_stop(srv);
    return;
  }
  if (app->cfg.drain_grace <= 0) {
    begin_stop(srv);
    return;
  }
  srv->exiting = 1;
  app->draining = 1;
  sdnotify("STOPPING=1\nSTATUS=draining: waiting for crawls to end before stopping");
  log_info("main", "draining: claiming no jobs, waiting up to %g s (drain_grace) for %u crawl(s) "
           "to end; pending jobs stay queued", app->cfg.drain_grace,
           launcher_running(app->launcher));
  cluster_set_draining(app->cluster, 1);
  /* The lease goes now, so another node fires schedules while this one
   * drains (here they would only wait). */
  scheduler_stop(app->scheduler, NULL, NULL);
  uv_timer_start(&srv->drain_timer, drain_over, (uint64_t)(app->cfg.drain_grace * 1000.0), 0);
  launcher_drain(app->launcher, drained, srv);
}

/* A job's end is committed (with its events): webhooks deliver them now
 * rather than at their next tick, history beyond its limits goes, and a
 * schedule whose next run waits for this job (overlap queue) fires it. */
static void job_ended(void *ud, const job_t *job) {
  app_t *app = ud;
  server_t *srv = (server_t *)((char *)app - offsetof(server_t, app));
  hooks_kick(srv->hooks);
  if (app->webhooks) webhooks_kick(app->webhooks);
  objstore_job_ended(app->objstore, job);
  if (app->janitor) janitor_kick(app->janitor);
  if (job->schedule_id) scheduler_kick(app->scheduler);
}

/* A crawl started (or was adopted): its log and items go up as they grow. */
static void job_started(void *ud, const job_t *job) {
  app_t *app = ud;
  objstore_job_started(app->objstore, job);
}

/* [spiderd] object_store: the client, the bucket check and the uploader. */
static int start_objstore(app_t *app, char *err, size_t errlen) {
  const config_t *cfg = &app->cfg;
  int shared = store_pool_shared(app->store);
  if (cfg->object_store_eggs && (!cfg->object_store[0] || !shared))
    log_warn("main", "object_store_eggs = on has no effect without %s: eggs stay %s",
             cfg->object_store[0] ? "a shared store" : "object_store",
             shared ? "in the shared store" : "in eggs_dir");
  if (!cfg->object_store[0]) return 0;
  if (!(app->s3 = calloc(1, sizeof(*app->s3)))) return -ENOMEM;
  int rc = s3_init(app->s3, cfg->object_store, cfg->object_store_endpoint,
                   cfg->object_store_region, cfg->object_store_credentials, err, errlen);
  if (rc) {
    free(app->s3);
    app->s3 = NULL;
    return rc;
  }
  if ((rc = objstore_start(&app->objstore, app->s3, cfg, err, errlen))) return rc;
  if (cfg->object_store_eggs && shared) eggsync_set_objstore(app->s3);
  if (shared) pausestate_set_objstore(app->s3); /* paused crawls' states */
  janitor_set_objstore(app->janitor, app->objstore);
  launcher_on_start(app->launcher, job_started);
  return 0;
}

static void stop_objstore(app_t *app) {
  objstore_stop(app->objstore);
  app->objstore = NULL;
  if (app->s3) s3_release(app->s3);
  free(app->s3);
  app->s3 = NULL;
}

/* Another node put queue elements: waiting takers here try again. */
static void queues_noted(void *ud) { api_queues_wake_all(ud); }

static void on_signal(uv_signal_t *h, int signum) {
  server_t *srv = h->data;
  if (signum == SIGHUP) {
    log_reopen();
    log_info("main", "SIGHUP: log reopened");
    return;
  }
  log_info("main", "received %s", signum == SIGTERM ? "SIGTERM" : "SIGINT");
  begin_exit(srv);
}

/* Reads what the store knows before the loop starts: the counts daemonstatus
 * serves, and the jobs a previous daemon left running. */
static int recover(app_t *app, job_list_t *running, char *err, size_t errlen) {
  store_t *s = NULL;
  int rc = store_open(app->cfg.store, &s, err, errlen);
  if (rc) return rc;
  const char *store_path = app->cfg.store;
  if (!strncmp(store_path, "sqlite://", 9)) store_path += 9;
  else if (!strncmp(store_path, "sqlite:", 7)) store_path += 7;
  int np = 0, nf = 0;
  rc = scrapyd_import(s, app->cfg.dbs_dir, store_path, &np, &nf, err, errlen);
  if (rc) {
    store_close(s);
    return rc;
  }
  /* The job tokens' secret: kept in the store, so tokens outlive a restart
   * and every node sharing the store accepts them. The schema's migration
   * makes it on SQLite; made here for a store that has none. */
  char *secret = NULL;
  rc = store_meta_get(s, JOBTOKEN_META_KEY, &secret);
  if (rc == 0 && secret && strlen(secret) == JOBTOKEN_SECRET_HEX) {
    memcpy(app->job_secret, secret, JOBTOKEN_SECRET_HEX + 1);
  } else if (rc == 0 || rc == -ENOENT) {
    rc = jobtoken_secret_new(app->job_secret);
    if (!rc) rc = store_meta_set(s, JOBTOKEN_META_KEY, app->job_secret);
  }
  free(secret);
  if (rc) {
    char url[512];
    config_redact_url(app->cfg.store, url, sizeof(url));
    snprintf(err, errlen, "%.400s: cannot keep the job token secret: %s", url, spd_strerror(rc));
    store_close(s);
    return rc;
  }
  /* Users and tokens, known before the first request (api/auth.h). */
  principal_list_t who = {0};
  char *gen = NULL;
  rc = store_auth_gen(s, &gen);
  if (!rc) rc = store_principals_list(s, &who);
  json_t *accounts = NULL;
  if (!rc) rc = accounts_load(s, &accounts);
  if (!rc) rc = auth_init(app, &who, gen);
  if (!rc) auth_init_accounts(app, accounts);
  else json_decref(accounts);
  principal_list_release(&who);
  free(gen);
  if (rc) {
    snprintf(err, errlen, "cannot read users and tokens: %s", spd_strerror(rc));
    store_close(s);
    return rc;
  }
  int64_t counts[JOB_NSTATES];
  rc = store_job_counts(s, NULL, counts);
  if (rc == 0) {
    app->counters.pending = counts[JOB_PENDING];
    app->counters.finished =
        counts[JOB_FINISHED] + counts[JOB_FAILED] + counts[JOB_CANCELLED] + counts[JOB_LOST];
    /* Only this node's: on a shared store, other nodes' crawls are theirs. */
    job_filter_t f = {.states = 1u << JOB_RUNNING, .node = app->cfg.node_name};
    rc = store_jobs_list(s, &f, running);
  }
  if (rc) {
    char url[512];
    config_redact_url(app->cfg.store, url, sizeof(url));
    snprintf(err, errlen, "%.400s: cannot read jobs: %s", url, spd_strerror(rc));
  }
  store_close(s);
  return rc;
}

static int make_dirs(const config_t *cfg, char *err, size_t errlen) {
  const char *dirs[] = {cfg->dbs_dir, cfg->eggs_dir, cfg->logs_dir,
                        config_items_remote(cfg) ? "" : cfg->items_dir};
  for (size_t i = 0; i < sizeof(dirs) / sizeof(dirs[0]); i++) {
    if (!dirs[i][0] || !strcmp(dirs[i], ":memory:")) continue;
    int rc = fs_mkdirs(dirs[i], 0755);
    if (rc) {
      snprintf(err, errlen, "cannot create directory '%s': %s", dirs[i], strerror(-rc));
      return rc;
    }
  }
  return 0;
}

/* app->flow's hooks: what the faces ask of the launcher and the scheduler. */
static void flow_dispatch_hook(void *l) { launcher_dispatch(l); }
static void flow_dispatch_due_hook(void *l) { launcher_dispatch_blind(l); }
static int flow_signal_hook(void *l, const char *project, const char *jobid, int sig,
                            int *found) {
  return launcher_cancel(l, project, jobid, sig, found);
}
static int flow_running_hook(void *l, int64_t id) { return launcher_job_running(l, id); }
static int flow_pause_hook(void *l, const char *project, const char *jobid, int *found) {
  return launcher_pause(l, project, jobid, found);
}
static int flow_after_ends_hook(void *l, void (*cb)(void *), void *ud) {
  return launcher_after_ends(l, cb, ud);
}
static void flow_schedules_hook(void *s) { scheduler_kick(s); }
static int64_t flow_last_beat_hook(void *c) { return cluster_last_beat(c); }
static void flow_memory_hook(void *l, memfit_node_t *out) { launcher_memory(l, out); }

static void wire_flow(app_t *app) {
  app->flow = (flow_hooks_t){.launcher = app->launcher,
                             .scheduler = app->scheduler,
                             .dispatch = flow_dispatch_hook,
                             .dispatch_due = flow_dispatch_due_hook,
                             .signal = flow_signal_hook,
                             .running_here = flow_running_hook,
                             .pause = flow_pause_hook,
                             .after_ends = flow_after_ends_hook,
                             .schedules_changed = flow_schedules_hook,
                             .cluster = app->cluster,
                             .last_beat = flow_last_beat_hook,
                             .memory = flow_memory_hook,
                             .counters = &app->counters,
                             .metrics = app->metrics};
}

/* The store threads and the modules on the loop: spider lister, launcher,
 * janitor, scheduler, webhooks, cluster; then the faces' hooks into them. */
static int start_modules(app_t *app, char *err, size_t errlen) {
  const config_t *cfg = &app->cfg;
  int rc;
  if (!(app->metrics = metrics_new())) {
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  if ((rc = store_pool_start(app->loop, cfg->store, &app->store, err, errlen))) return rc;
  store_pool_set_metrics(app->store, app->metrics);
  if ((rc = spiders_init(&app->spiders, app->loop, cfg))) {
    snprintf(err, errlen, "cannot start the spider lister: %s", spd_strerror(rc));
    return rc;
  }
  if ((rc = pyenvs_init(&app->pyenvs, app->loop, cfg))) {
    snprintf(err, errlen, "cannot prepare the Python environments' directory: %s",
             spd_strerror(rc));
    return rc;
  }
  if ((rc = launcher_init(&app->launcher, app->loop, cfg, app->store, &app->flow))) {
    snprintf(err, errlen, "cannot start the launcher: %s", spd_strerror(rc));
    return rc;
  }
  if ((rc = janitor_init(&app->janitor, app->loop, cfg, app->store, &app->flow))) {
    snprintf(err, errlen, "cannot start the janitor: %s", spd_strerror(rc));
    return rc;
  }
  if ((rc = scheduler_init(&app->scheduler, app->loop, cfg, app->store, &app->flow))) {
    snprintf(err, errlen, "cannot start the scheduler: %s", spd_strerror(rc));
    return rc;
  }
  if ((rc = webhooks_init(&app->webhooks, app->loop, cfg, app->store, err, errlen))) return rc;
  cluster_hooks_t hooks = {.queues = queues_noted, .eggs = eggs_arrived, .ud = app,
                           .flow = &app->flow};
  if ((rc = cluster_init(&app->cluster, app->loop, cfg, app->store, app->launcher,
                         store_pool_shared(app->store), &hooks, err, errlen)))
    return rc;
  wire_flow(app);
  launcher_on_end(app->launcher, job_ended, app);
  if ((rc = start_objstore(app, err, errlen))) return rc;
  launcher_set_job_secret(app->launcher, app->job_secret);
  launcher_set_metrics(app->launcher, app->metrics);
  scheduler_set_metrics(app->scheduler, app->metrics);
  return 0;
}

/* The listener, the event streams and every face's routes. */
static int start_http(app_t *app, char *err, size_t errlen) {
  const config_t *cfg = &app->cfg;
  http_options_t ho = {
      .bind_address = cfg->bind_address,
      .port = cfg->http_port,
      .unix_socket_path = cfg->unix_socket_path,
      .realm = "Scrapyd",
      .max_body = cfg->max_upload,
      .timeout = cfg->http_timeout,
      .max_connections = cfg->http_connections,
      .https_cert = cfg->https_cert,
      .https_key = cfg->https_key,
      .https_key_password = cfg->https_key_password,
      .https_priorities = cfg->https_priorities,
      .trusted_proxies = cfg->trusted_proxies,
  };
  int rc = http_server_start(app->loop, &ho, &app->http, err, errlen);
  if (rc) return rc;
  if ((rc = sse_hub_init(app, &app->sse))) {
    snprintf(err, errlen, "cannot start the event streams: %s", spd_strerror(rc));
    return rc;
  }
  if ((rc = api_scrapyd_register(app)) || (rc = api_rest_register(app)) ||
      (rc = api_ui_register(app)) || (rc = api_metrics_register(app)))
    snprintf(err, errlen, "cannot register routes: %s", spd_strerror(rc));
  return rc;
}

/* Scrapyd serves whoever reaches it, and deploying an egg runs its code:
 * on an address other machines reach, no authentication is a choice the
 * operator makes out loud (--insecure), not a default. Loopback is what
 * addr_loopback says: 127.0.0.0/8, ::1 and "localhost" when it
 * resolves to them only; anything else (a name, "127.1", "") is public.
 * api/ops_auth.c keeps the last admin of such a node while it runs. */
static int check_exposure(const app_t *app, char *err, size_t errlen) {
  const config_t *cfg = &app->cfg;
  if (cfg->http_port <= 0 || addr_loopback(cfg->bind_address) || auth_enabled(app)) return 0;
  if (cfg->insecure) {
    log_warn("main", "serving %s:%d without authentication (--insecure): anyone who reaches it "
             "can deploy and run code", cfg->bind_address, cfg->http_port);
    return 0;
  }
  snprintf(err, errlen,
           "refusing to serve %s:%d without authentication: anyone who reaches it could deploy "
           "and run code. Set [scrapyd] username and password, or create a user or an API token "
           "first (spiderd token create --role admin, with the daemon on 127.0.0.1), or start "
           "with --insecure to accept the risk",
           cfg->bind_address, cfg->http_port);
  return SPD_ECONFIG;
}

static int write_pidfile(const char *path, char *err, size_t errlen) {
  if (!path[0]) return 0;
  FILE *f = fopen(path, "we");
  if (!f) {
    snprintf(err, errlen, "cannot write pidfile '%s': %s", path, strerror(errno));
    return -errno;
  }
  fprintf(f, "%d\n", (int)getpid());
  fclose(f);
  return 0;
}

/* SIGTERM and SIGINT drain then stop, SIGHUP reopens the log. */
static void start_signals(server_t *srv) {
  uv_loop_t *loop = srv->app.loop;
  uv_timer_init(loop, &srv->drain_timer);
  srv->drain_timer.data = srv;
  uv_signal_init(loop, &srv->sig_term);
  uv_signal_init(loop, &srv->sig_int);
  uv_signal_init(loop, &srv->sig_hup);
  srv->sig_term.data = srv->sig_int.data = srv->sig_hup.data = srv;
  uv_signal_start(&srv->sig_term, on_signal, SIGTERM);
  uv_signal_start(&srv->sig_int, on_signal, SIGINT);
  uv_signal_start(&srv->sig_hup, on_signal, SIGHUP);
  srv->signals_open = 1;
}

static void watchdog_beat(uv_timer_t *t) {
  (void)t;
  sdnotify("WATCHDOG=1");
}

/* Under systemd (Type=notify): ready once the listener is bound and the
 * store open, and a watchdog beat when WatchdogSec= asks for one. */
static void notify_ready(server_t *srv) {
  const config_t *cfg = &srv->app.cfg;
  char msg[512]; /* not the store URL: it may hold a password */
  snprintf(msg, sizeof(msg), "READY=1\nSTATUS=serving on %.200s:%d\nMAINPID=%d",
           cfg->bind_address, cfg->http_port, (int)getpid());
  int rc = sdnotify(msg);
  if (rc < 0) log_warn("main", "cannot notify NOTIFY_SOCKET: %s", strerror(-rc));
  uint64_t usec = sdnotify_watchdog_usec();
  if (rc > 0 && usec) {
    uint64_t ms = usec / 2000 ? usec / 2000 : 1;
    uv_timer_init(srv->app.loop, &srv->watchdog);
    uv_timer_start(&srv->watchdog, watchdog_beat, ms, ms);
    srv->watchdog_open = 1;
  }
}

/* Every HTTP connection is a descriptor: a soft limit of 1024 (the usual
 * default) would cap the server below a thousand clients, so the soft limit
 * goes up to the hard one, which the administrator set. */
static void raise_nofile(void) {
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) || rl.rlim_cur >= rl.rlim_max) return;
  rlim_t was = rl.rlim_cur;
  rl.rlim_cur = rl.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_max == RLIM_INFINITY) {
    rl.rlim_cur = 1 << 20; /* Linux's usual nr_open */
    if (setrlimit(RLIMIT_NOFILE, &rl)) return;
  }
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != was)
    log_info("main", "open files limit raised from %llu to %llu", (unsigned long long)was,
             (unsigned long long)rl.rlim_cur);
}

static void announce(const config_t *cfg) {
  char store[1024];
  config_redact_url(cfg->store, store, sizeof(store));
  log_info("launcher", "spiderd %s started: max_proc=%d, runner='spiderd_runner', store='%s'",
           SPIDERD_VERSION, config_max_proc(cfg), store);
  if (cfg->http_port)
    log_info("main", "web console available at %s://%s:%d/", cfg->https_cert[0] ? "https" : "http",
             cfg->bind_address, cfg->http_port);
  if (cfg->unix_socket_path[0])
    log_info("main", "web console available at unix:%s", cfg->unix_socket_path);
}

/* Undoes a start that failed halfway: stops what started, in the order the
 * graceful stop uses, and lets their handles close. */
static void start_undo(app_t *app) {
  sse_hub_stop(app->sse);
  api_queues_stop(app);
  if (app->http) http_server_stop(app->http);
  auth_free(app);
  if (app->spiders) spiders_free(app->spiders);
  if (app->pyenvs) pyenvs_free(app->pyenvs);
  app->pyenvs = NULL;
  app->flow.env_ensure = NULL; /* crawls ending below use environments no more */
  app->flow.env_use = NULL;
  if (app->store) store_pool_stop(app->store);
  /* Stop all and let the handles their stops close close before freeing:
   * the cluster's close callbacks still use it (a listener that failed to
   * start, e.g. a bad https_key, comes here after everything else started);
   * other modules close their last handles in their frees. */
  if (app->scheduler) scheduler_stop(app->scheduler, NULL, NULL);
  if (app->launcher) launcher_stop(app->launcher, NULL, NULL);
  if (app->janitor) janitor_stop(app->janitor, NULL, NULL);
  if (app->webhooks) webhooks_stop(app->webhooks, NULL, NULL);
  if (app->cluster) cluster_stop(app->cluster, NULL, NULL);
  if (app->loop) uv_run(app->loop, UV_RUN_DEFAULT);
  if (app->scheduler) scheduler_free(app->scheduler);
  if (app->launcher) launcher_free(app->launcher);
  if (app->janitor) janitor_free(app->janitor);
  if (app->webhooks) webhooks_free(app->webhooks);
  if (app->cluster) cluster_free(app->cluster);
  if (app->loop) uv_run(app->loop, UV_RUN_DEFAULT); /* the handles the frees close */
}

/* One line per Scrapyd class key or [services] entry the files set: what
 * spiderd does in its place (the unknown ones only get this far with
 * unknown_scrapyd_classes = warn). */
static void log_scrapyd_classes(const config_t *cfg) {
  for (size_t i = 0; i < cfg->nclasses; i++) {
    const config_class_t *e = &cfg->classes[i];
    char msg[1024];
    enum config_class_verdict v = config_scrapyd_class(cfg, e, msg, sizeof(msg));
    const char *sec = e->kind == CONFIG_CLASS_SERVICE ? "[services] " : "";
    if (v == CONFIG_CLASS_MAPPED)
      log_info("config", "%s%s = %s: %s", sec, e->name, e->value[0] ? e->value : "(empty)",
               msg);
    else if (v == CONFIG_CLASS_UNKNOWN)
      log_warn("config", "%s%s = %s: ignored (unknown_scrapyd_classes = warn): %s", sec,
               e->name, e->value, msg);
    else
      log_warn("config", "[scrapyd] %s (%s): %s", e->name, e->src, msg);
  }
}

static int serve(int argc, char **argv) {
  server_t srv;
  memset(&srv, 0, sizeof(srv));
  app_t *app = &srv.app;
  char err[1024] = "";
  job_list_t running = {0};
  int rc = config_load(&app->cfg, argc, argv, err, sizeof(err));
  if (!rc && (rc = config_load_secrets(&app->cfg, err, sizeof(err)))) config_release(&app->cfg);
  if (!rc && (rc = config_check_scrapyd_classes(&app->cfg, err, sizeof(err))))
    config_release(&app->cfg);
  if (rc) {
    fprintf(stderr, "spiderd: %s\n", err);
    return 2;
  }
  const config_t *cfg = &app->cfg;
  sdnotify_take_env(); /* before any crawl or spider listing is started */
  if ((rc = log_open(cfg->log_file))) {
    fprintf(stderr, "spiderd: cannot open log file '%s': %s\n", cfg->log_file, strerror(-rc));
    config_release(&app->cfg);
    return 2;
  }
  log_set_level(cfg->log_level);
  log_set_format(cfg->log_format);
  log_set_node(cfg->node_name);
  log_scrapyd_classes(cfg);
  signal(SIGPIPE, SIG_IGN);

  if ((rc = make_dirs(cfg, err, sizeof(err))) || (rc = recover(app, &running, err, sizeof(err))) ||
      (rc = check_exposure(app, err, sizeof(err))))
    goto fail;
  if (eggs_clean_staging(cfg->eggs_dir) > 0)
    log_info("main", "removed egg uploads left unfinished by a previous run");
  raise_nofile();
  app->loop = uv_default_loop();
  if ((rc = start_modules(app, err, sizeof(err))) || (rc = start_http(app, err, sizeof(err))) ||
      (rc = auth_start(app)) || (rc = write_pidfile(cfg->pidfile, err, sizeof(err))))
    goto fail;
  /* Last: nothing after it can fail, so start_undo never meets it. */
  if ((rc = hooks_init(&srv.hooks, app->loop, cfg, app->store, app->metrics))) {
    snprintf(err, sizeof(err), "cannot start the hooks: %s", spd_strerror(rc));
    goto fail;
  }
  start_signals(&srv);
  app->flow.node = &srv;
  app->flow.drain = drain_hook;
  app->flow.envs = app->pyenvs;
  app->flow.env_ensure = env_ensure_hook;
  app->flow.env_use = env_use_hook;
  spiders_set_env_builder(app->spiders, env_ensure_hook, app->pyenvs);
  if (cfg->env_prebuild) pyenvs_prebuild(app->pyenvs);
  announce(cfg);
  notify_ready(&srv);
  app->started_ms = clock_wall_ms();
  launcher_adopt(app->launcher, &running);
  launcher_dispatch(app->launcher);
  uv_run(app->loop, UV_RUN_DEFAULT);
  rc = 0;
  goto out;

fail:
  fprintf(stderr, "spiderd: %s\n", err[0] ? err : spd_strerror(rc));
  log_error("main", "%s", err[0] ? err : spd_strerror(rc));
  job_list_release(&running);
  start_undo(app);
out:
  if (app->loop) uv_loop_close(app->loop);
  if (cfg->pidfile[0] && rc == 0) unlink(cfg->pidfile);
  stop_objstore(app);
  api_scrapyd_free(app);
  api_common_free(app);
  metrics_free(app->metrics);
  config_release(&app->cfg);
  log_close();
  return rc ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc > 1 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-v") ||
                   !strcmp(argv[1], "version"))) {
    printf("spiderd %s (Scrapyd 1.6.0 compatible)\n", SPIDERD_VERSION);
    return 0;
  }
  if (argc > 2 && !strcmp(argv[1], "help") && strcmp(argv[2], "serve"))
    return cli_help(argc - 2, argv + 2, stdout);
  if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
                   !strcmp(argv[1], "help"))) {
    usage(stdout);
    return 0;
  }
  if (argc == 1 || argv[1][0] == '-' || !strcmp(argv[1], "serve")) {
    int skip = argc > 1 && !strcmp(argv[1], "serve") ? 2 : 1;
    return serve(argc - skip, argv + skip);
  }
  if (cli_is_command(argv[1])) return cli_main(argc - 1, argv + 1);
  fprintf(stderr, "spiderd: unknown command '%s'\n", argv[1]);
  usage(stderr);
  return 2;
}
