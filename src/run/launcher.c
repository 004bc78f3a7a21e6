#include "run/launcher.h"
#include "run/launcher_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"
#include "log.h"
#include "run/done.h"
#include "metrics.h"
#include "flow/backfill.h"
#include "flow/claim.h"
#include "flow/env.h"
#include "flow/jobs.h"
#include "flow/jobtoken.h"
#include "core/limits.h"
#include "run/jobres.h"
#include "run/memory.h"
#include "flow/pausestate.h"
#include "run/supervise.h"
#include "run/warm.h"
#include "fsutil.h"
#include "store/eggs.h"
#include "store/pyenv.h"
#include "store/marchive.h"

/* How often an adopted process (not our child: no exit callback) is checked. */
#define ADOPT_POLL_MS 500

/* struct launcher and prep_t: run/launcher_int.h */

static void sv_wake(void *l) { launcher_dispatch(l); }
static void sv_settled(void *l) { launcher_maybe_stopped(l); }

static char *abs_path(const launcher_t *l, const char *path) {
  char *out = NULL;
  if (path[0] == '/') return strdup(path);
  if (asprintf(&out, "%s/%s", l->cwd, path) < 0) return NULL;
  return out;
}

int launcher_init(launcher_t **out, uv_loop_t *loop, const config_t *cfg,
                  store_pool_t *store, const flow_hooks_t *flow) {
  launcher_t *l = calloc(1, sizeof(*l));
  if (!l) return -ENOMEM;
  l->loop = loop;
  l->cfg = cfg;
  l->store = store;
  l->flow = flow;
  l->max_proc = (unsigned)config_max_proc(cfg);
  l->cwd = getcwd(NULL, 0);
  if (!l->cwd || asprintf(&l->stats_dir, "%s/%s/run", l->cwd, cfg->dbs_dir) < 0) {
    free(l->cwd);
    free(l);
    return -ENOMEM;
  }
  if (cfg->dbs_dir[0] == '/') {
    free(l->stats_dir);
    if (asprintf(&l->stats_dir, "%s/run", cfg->dbs_dir) < 0) {
      free(l->cwd);
      free(l);
      return -ENOMEM;
    }
  }
  int rc = fs_mkdirs(l->stats_dir, 0755);
  if (rc) {
    log_error("launcher", "cannot create %s: %s", l->stats_dir, strerror(-rc));
    free(l->stats_dir);
    free(l->cwd);
    free(l);
    return rc;
  }
  /* Beside run/: <dbs_dir>/spiders, made when a command project first runs. */
  size_t sdl = strlen(l->stats_dir) - strlen("/run");
  if (asprintf(&l->work_dir, "%.*s/spiders", (int)sdl, l->stats_dir) < 0 ||
      asprintf(&l->envs_dir, "%.*s/envs", (int)sdl, l->stats_dir) < 0) {
    free(l->work_dir);
    free(l->stats_dir);
    free(l->cwd);
    free(l);
    return -ENOMEM;
  }
  jobres_defaults(cfg, &l->limit_defaults);
  rc = jobres_init(&l->res, cfg);
  if (rc) {
    free(l->envs_dir);
    free(l->work_dir);
    free(l->stats_dir);
    free(l->cwd);
    free(l);
    return rc;
  }
  if (warm_init(&l->warm, loop, cfg)) l->warm = NULL;
  uv_timer_init(loop, &l->stop_timer);
  l->stop_timer.data = l;
  l->sv = (supervisor_t){.loop = loop, .cfg = cfg, .store = store, .flow = flow, .res = &l->res,
                         .stats_dir = l->stats_dir, .wake = sv_wake, .settled = sv_settled,
                         .ud = l};
  l->open_handles = 1 + supervise_init(&l->sv);
  if (cfg->heartbeat_timeout > 0 && cfg->heartbeat_timeout < 2 * cfg->heartbeat_interval)
    log_warn("launcher", "heartbeat_timeout (%g s) is under two heartbeat_interval (%g s): "
             "one late beat will kill a healthy crawl", cfg->heartbeat_timeout,
             cfg->heartbeat_interval);
  *out = l;
  return 0;
}

void launcher_on_end(launcher_t *l, void (*fn)(void *ud, const job_t *job), void *ud) {
  l->sv.on_end = fn;
  l->sv.on_end_ud = ud;
}

void launcher_on_start(launcher_t *l, void (*fn)(void *ud, const job_t *job)) {
  l->sv.on_start = fn;
}

unsigned launcher_running(const launcher_t *l) { return l->sv.nprocs; }

void launcher_set_metrics(launcher_t *l, struct metrics *m) {
  l->metrics = m;
  l->sv.metrics = m;
  if (m) warm_set_gauge(l->warm, &m->warm_templates);
}


void launcher_memory(const launcher_t *l, memfit_node_t *out) {
  *out = (memfit_node_t){.reserve = l->cfg->memory_reserve, .waiting = l->mem_waiting};
  if (memory_available(&out->available, &out->source)) out->source = NULL;
  /* A crawl just started has not allocated yet: what it is expected to
   * need counts until its peak says more. */
  int64_t outstanding = 0;
  for (const proc_t *p = l->sv.procs; p; p = p->next) {
    if (p->ended) continue;
    int64_t peak = p->usage.peak_rss, want = p->job.mem_expected;
    out->reserved += peak > want ? peak : want;
    if (want > peak) outstanding += want - peak;
  }
  for (const prep_t *pr = l->preps; pr; pr = pr->next) {
    out->reserved += pr->job.mem_expected;
    outstanding += pr->job.mem_expected;
  }
  int64_t free = out->available - out->reserve - outstanding;
  if (l->cfg->jobs_memory > 0 && l->cfg->jobs_memory - out->reserved < free)
    free = l->cfg->jobs_memory - out->reserved;
  out->free = free > 0 ? free : 0;
}

int launcher_job_running(const launcher_t *l, int64_t job_id) {
  for (const proc_t *p = l->sv.procs; p; p = p->next)
    if (p->job.id == job_id && !p->ended) return 1;
  for (const prep_t *pr = l->preps; pr; pr = pr->next)
    if (pr->job.id == job_id) return 1;
  return 0;
}

int launcher_after_ends(launcher_t *l, void (*cb)(void *ud), void *ud) {
  return supervise_after_ends(&l->sv, cb, ud);
}

void launcher_set_job_secret(launcher_t *l, const char *secret) { l->job_secret = secret; }

/* ---- ending a job ---- */

static void proc_close_cb(uv_handle_t *h) {
  proc_t *p = h->data;
  if (--p->open_handles > 0) return;
  launcher_t *l = p->l;
  job_release(&p->job);
  free(p->stats_path);
  free(p->hb_path);
  free(p->log_path);
  free(p->items_path);
  free(p->cgroup);
  free(p->workdir);
  free(p->state_dir);
  if (p->warm) close(p->pidfd);
  free(p);
  launcher_maybe_stopped(l);
}

/* daemonstatus.json's running: the crawls, and the claimed jobs holding a
 * slot while their project is extracted or a template forks them (the
 * store has them running; they are no longer pending). */
void launcher_running_changed(launcher_t *l) { flow_running(l->flow, l->sv.nprocs + l->npreps); }

static void proc_unlink(launcher_t *l, proc_t *p) {
  for (proc_t **pp = &l->sv.procs; *pp; pp = &(*pp)->next)
    if (*pp == p) {
      *pp = p->next;
      l->sv.nprocs--;
      break;
    }
  launcher_running_changed(l);
}

static void proc_dispose(proc_t *p) {
  p->open_handles = p->adopted ? 1 : 2;
  uv_close((uv_handle_t *)&p->timer, proc_close_cb);
  if (p->warm)
    uv_close((uv_handle_t *)&p->pidpoll, proc_close_cb);
  else if (!p->adopted)
    uv_close((uv_handle_t *)&p->process, proc_close_cb);
}

/* A crawl that can be paused ended: paused, its state is handed to the
 * store for other nodes (a shared store); else its state directory, when
 * spiderd made it, goes. */
static void pause_ended(launcher_t *l, proc_t *p, job_state_t state) {
  if (!p->state_dir) return;
  if (state == JOB_PAUSED) {
    free(l->sv.state_dir);
    l->sv.state_dir = strdup(p->state_dir); /* packed for other nodes by the end's op */
    return;
  }
  if (pausestate_ours(l->cfg, p->state_dir)) fs_rmtree(p->state_dir);
}

static void proc_ended(proc_t *p, int64_t exit_status, int term_signal) {
  launcher_t *l = p->l;
  job_t *j = &p->job;
  if (p->ended) return;
  p->ended = 1;
  /* Who stopped it decides, before how it exited: a cancelled crawl is
   * never retried, and one we killed for silence or time is not "finished"
   * even when Scrapy's graceful shutdown exits 0. */
  job_state_t state = JOB_FAILED;
  const char *reason = NULL;
  int from_stats = 0;
  if (p->cancels) {
    state = JOB_CANCELLED;
  } else if (p->pausing) {
    state = JOB_PAUSED; /* even when the daemon stops meanwhile: its state is kept */
  } else if (p->stopped) {
    state = JOB_CANCELLED;
  } else if (p->hb_lost) {
    state = JOB_LOST;
    reason = "heartbeat";
  } else if (p->timed_out) {
    reason = "timeout";
  } else if (p->over) {
    reason = p->over;
  } else if (p->adopted) {
    from_stats = 1; /* no exit status: the stats file tells */
  } else if (exit_status == 0 && term_signal == 0) {
    state = JOB_FINISHED;
  }
  if (p->adopted) {
    log_job(LOG_INFO, "launcher", j,
            "Adopted process ended: project='%s' spider='%s' job='%s' pid=%d",
            j->project, j->spider, j->jobid, p->pid);
  } else if (exit_status == 0 && term_signal == 0) {
    log_job(LOG_INFO, "launcher", j, "Process finished: project='%s' spider='%s' job='%s' pid=%d",
            j->project, j->spider, j->jobid, p->pid);
  } else {
    log_job(LOG_ERROR, "launcher", j,
            "Process died: exitstatus=%lld signal=%d project='%s' spider='%s' job='%s' pid=%d",
            (long long)exit_status, term_signal, j->project, j->spider, j->jobid, p->pid);
  }
  if (p->cgroup) {
    /* The cgroup outlives the leader: its counters are whole now. */
    jobres_sample_cgroup(p->cgroup, &p->usage);
    jobres_cgroup_remove(&l->res, p->cgroup);
  }
  pause_ended(l, p, state);
  if (p->env_key[0] && l->flow->env_use) l->flow->env_use(l->flow->envs, p->env_key, 0);
  supervise_usage_t usage = {.mech = p->cgroup ? LIMITS_CGROUP : l->res.mech,
                             .limits = p->limits, .usage = p->usage, .log_path = p->log_path};
  supervise_end(&l->sv, j, state, from_stats,
                p->adopted ? -1 : (term_signal ? -1 : (int)exit_status), term_signal,
                p->stats_path, p->hb_path, reason, &usage);
  proc_unlink(l, p);
  proc_dispose(p);
  launcher_dispatch(l);
}

static void on_proc_exit(uv_process_t *h, int64_t exit_status, int term_signal) {
  proc_ended(h->data, exit_status, term_signal);
}

/* A warm crawl's pidfd is readable: it exited, and as the daemon's child
 * it waits to be reaped here (libuv reaps only what it spawned). */
static void on_warm_exit(uv_poll_t *h, int status, int events) {
  proc_t *p = h->data;
  (void)status;
  (void)events;
  int ws = 0;
  pid_t r = waitpid(p->pid, &ws, WNOHANG);
  if (r == 0) return;
  uv_poll_stop(h);
  if (r < 0)
    proc_ended(p, -1, 0);
  else
    proc_ended(p, WIFEXITED(ws) ? WEXITSTATUS(ws) : 0, WIFSIGNALED(ws) ? WTERMSIG(ws) : 0);
}

static void grace_expired(uv_timer_t *t) {
  proc_t *p = t->data;
  if (p->ended) return;
  log_job(LOG_WARNING, "launcher", &p->job,
          "job '%s' did not stop within the grace period: killing pid %d",
          p->job.jobid, p->pid);
  supervise_kill_group(p);
}

/* A user's cancel: sig to the crawl (SIGKILL to its group), and its group
 * KILLed cancel_grace after the first. */
static void proc_cancel(launcher_t *l, proc_t *p, int sig) {
  p->cancels++;
  log_job(LOG_INFO, "launcher", &p->job, "Cancelling job '%s' (pid %d) with signal %d",
          p->job.jobid, p->pid, sig);
  if (sig == SIGKILL) {
    supervise_kill_group(p);
    return;
  }
  supervise_signal(p, sig);
  if (p->cancels == 1 && l->cfg->cancel_grace > 0 && !uv_is_active((uv_handle_t *)&p->timer))
    uv_timer_start(&p->timer, grace_expired, (uint64_t)(l->cfg->cancel_grace * 1000), 0);
}

static void adopt_watch(uv_timer_t *t) {
  proc_t *p = t->data;
  if (proc_start_time(p->pid) != p->job.pid_start) {
    uv_timer_stop(t);
    proc_ended(p, -1, 0);
  }
}

/* ---- starting a job ---- */

/* Scrapyd's jobs_to_keep: before a job's file is created in dir, delete all
 * but the newest `keep` files there (by mtime), whatever made them. */
static void prune_dir(const char *dir, int keep) {
  if (keep <= 0) return;
  DIR *d = opendir(dir);
  if (!d) return;
  struct ent {
    char *name;
    struct timespec mtime;
  } *v = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    struct stat st;
    if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2])))
      continue;
    if (fstatat(dirfd(d), e->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode)) continue;
    if (n == cap) {
      cap = cap ? cap * 2 : 16;
      struct ent *nv = realloc(v, cap * sizeof(*v));
      if (!nv) break;
      v = nv;
    }
    v[n].name = strdup(e->d_name);
    v[n].mtime = st.st_mtim;
    if (v[n].name) n++;
  }
  /* newest first: a simple insertion sort, the directory holds few files */
  for (size_t i = 1; i < n; i++)
    for (size_t k = i; k > 0; k--) {
      struct timespec a = v[k - 1].mtime, b = v[k].mtime;
      if (a.tv_sec > b.tv_sec || (a.tv_sec == b.tv_sec && a.tv_nsec >= b.tv_nsec)) break;
      struct ent t = v[k - 1];
      v[k - 1] = v[k];
      v[k] = t;
    }
  for (size_t i = 0; i < n; i++) {
    if (i >= (size_t)keep) unlinkat(dirfd(d), v[i].name, 0);
    free(v[i].name);
  }
  free(v);
  closedir(d);
}

/* Prepares dir/project/spider, prunes it (not for a resumed job, whose
 * file goes on), and returns the absolute path of the job's file there. */
static char *job_file_prepared(launcher_t *l, const char *dir, const job_t *j, const char *ext) {
  char *sub = NULL, *abs = NULL, *file = NULL;
  if (asprintf(&sub, "%s/%s/%s", dir, j->project, j->spider) < 0) return NULL;
  abs = abs_path(l, sub);
  free(sub);
  if (!abs) return NULL;
  if (fs_mkdirs(abs, 0755) == 0) {
    if (!j->segments) prune_dir(abs, l->cfg->jobs_to_keep);
    if (asprintf(&file, "%s/%s%s", abs, j->jobid, ext) < 0) file = NULL;
  }
  free(abs);
  return file;
}

/* items_dir as a URL: <scheme://host/path>/<project>/<spider>/<jobid>.jl,
 * keeping the URL's query and fragment (Scrapyd's behaviour). */
static char *remote_feed_uri(const char *base, const job_t *j) {
  size_t cut = strcspn(base, "?#");
  const char *tail = base + cut;
  int trim = cut > 0 && base[cut - 1] == '/';
  char *out = NULL;
  if (asprintf(&out, "%.*s/%s/%s/%s.jl%s", (int)(cut - trim), base, j->project, j->spider,
               j->jobid, tail) < 0)
    return NULL;
  return out;
}

typedef struct strv {
  char **v;
  size_t n, cap;
} strv_t;

static int strv_push(strv_t *s, char *str) { /* takes str */
  if (!str) return -ENOMEM;
  if (s->n + 2 > s->cap) {
    size_t cap = s->cap ? s->cap * 2 : 32;
    char **nv = realloc(s->v, cap * sizeof(*nv));
    if (!nv) {
      free(str);
      return -ENOMEM;
    }
    s->v = nv;
    s->cap = cap;
  }
  s->v[s->n++] = str;
  s->v[s->n] = NULL;
  return 0;
}

static int strv_pushf(strv_t *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int strv_pushf(strv_t *s, const char *fmt, ...) {
  va_list ap;
  char *str = NULL;
  va_start(ap, fmt);
  int n = vasprintf(&str, fmt, ap);
  va_end(ap);
  return strv_push(s, n < 0 ? NULL : str);
}

static void strv_release(strv_t *s) {
  for (size_t i = 0; i < s->n; i++) free(s->v[i]);
  free(s->v);
  memset(s, 0, sizeof(*s));
}

static char *settings_value(json_t *v) {
  if (json_is_string(v)) return strdup(json_string_value(v));
  return json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

/* Builds argv exactly as Scrapyd's launcher (scrapyd-api.md §5.1). */
static int build_argv(launcher_t *l, const job_t *j, const char *python, const char *log_file,
                      const char *feed_uri, const char *jobdir, strv_t *argv) {
  const config_t *cfg = l->cfg;
  int rc = 0;
  json_t *settings = j->settings ? json_deep_copy(j->settings) : json_object();
  if (!settings) return -ENOMEM;
  /* Scrapyd's own settings replace user settings of the same name in place
   * (a dict update), so the order is the user's. */
  if (log_file) json_object_set_new(settings, "LOG_FILE", json_string(log_file));
  if (feed_uri) {
    json_t *feeds = json_pack("{s:{s:s}}", feed_uri, "format", "jsonlines");
    char *txt = feeds ? json_dumps(feeds, JSON_ENSURE_ASCII) : NULL;
    json_decref(feeds);
    if (!txt) {
      json_decref(settings);
      return -ENOMEM;
    }
    json_object_set_new(settings, "FEEDS", json_string(txt));
    free(txt);
  }
  if (jobdir) json_object_set_new(settings, "JOBDIR", json_string(jobdir));

  if ((rc = strv_push(argv, strdup(python ? python : cfg->python))) ||
      (rc = strv_push(argv, strdup("-m"))) ||
      (rc = strv_push(argv, strdup("spiderd_runner"))) ||
      (rc = strv_push(argv, strdup("crawl"))) || (rc = strv_push(argv, strdup(j->spider))))
    goto out;
  const char *key;
  json_t *val;
  json_object_foreach(settings, key, val) {
    char *v = settings_value(val);
    if (!v) {
      rc = -ENOMEM;
      goto out;
    }
    rc = strv_push(argv, strdup("-s"));
    if (!rc) rc = strv_pushf(argv, "%s=%s", key, v);
    free(v);
    if (rc) goto out;
  }
  if ((rc = strv_push(argv, strdup("-a"))) || (rc = strv_pushf(argv, "_job=%s", j->jobid)))
    goto out;
  json_object_foreach(j->args, key, val) {
    /* spiderd's, like _version: not the spider's */
    if (limits_is_arg(key) || !strcmp(key, BACKFILL_TIME_ARG)) continue;
    char *v = settings_value(val);
    if (!v) {
      rc = -ENOMEM;
      goto out;
    }
    rc = strv_push(argv, strdup("-a"));
    if (!rc) rc = strv_pushf(argv, "%s=%s", key, v);
    free(v);
    if (rc) goto out;
  }
  if (j->version) {
    if ((rc = strv_push(argv, strdup("-a"))) ||
        (rc = strv_pushf(argv, "_version=%s", j->version)))
      goto out;
  }
out:
  json_decref(settings);
  return rc;
}

/* Starts one claimed job. On failure the job is ended as failed. Takes the
 * job's contents. */
/* What starting one job gathers, step by step; start_release frees it. */
typedef struct start {
  char *python; /* the version's environment's interpreter; NULL: the daemon's */
  char env_key[PYENV_KEY_LEN + 1]; /* that environment ("" = none) */
  char *egg, *log_file, *feed_uri, *items_file, *jobdir, *stats_path, *hb_path;
  job_limits_t limits;
  /* A command spider (spiderd.json): its command, {spider} replaced, and
   * the directory it runs in; NULL for a Scrapy crawl. */
  char **command;
  char *workdir;
  strv_t argv;  /* the runner's command line */
  strv_t extra; /* the job's own variables, over the daemon's environment */
  char **env;
  int log_fd;
  int resumable; /* a command spider that keeps its state in jobdir */
  char why[256]; /* why the job could not start */
} start_t;

static int start_nomem(start_t *st) {
  snprintf(st->why, sizeof(st->why), "out of memory");
  return -1;
}

/* Is a crawl still running in dir? (marchive_prune) */
static int workdir_in_use(void *ud, const char *dir) {
  const launcher_t *l = ud;
  for (const proc_t *p = l->sv.procs; p; p = p->next)
    if (p->workdir && !strcmp(p->workdir, dir)) return 1;
  return 0;
}

/* A command project: extracted once per stored archive (by prep_start on
 * the thread pool; here, on the loop, only when that could not be queued),
 * and the spider's command. Extractions of versions deleted or replaced
 * since go then, unless a crawl still runs in one; not while an extraction
 * is under way, whose temporary directory would look stale. */
static int start_manifest(launcher_t *l, const job_t *j, start_t *st) {
  manifest_t m;
  char err[sizeof(st->why)] = "";
  if (marchive_prepare(st->egg, l->work_dir, j->project, &m, &st->workdir, err, sizeof(err))) {
    snprintf(st->why, sizeof(st->why), "%s", err);
    return -1;
  }
  int pruned =
      l->npreps ? 0 : marchive_prune(l->work_dir, j->project, l->cfg->eggs_dir, workdir_in_use, l);
  if (pruned)
    log_info("launcher", "removed %d old extraction(s) of project '%s'", pruned, j->project);
  const manifest_spider_t *ms = manifest_find(&m, j->spider);
  if (!ms)
    snprintf(st->why, sizeof(st->why), "spider '%s' is not in the project's " MANIFEST_NAME,
             j->spider);
  else if (!(st->command = manifest_argv(ms, j->spider)))
    start_nomem(st);
  else
    st->resumable = ms->resumable;
  manifest_release(&m);
  return st->command ? 0 : -1;
}

/* A version with requirements runs with its environment's python
 * (store/pyenv.h). */
static int start_env(launcher_t *l, start_t *st) {
  char key[PYENV_KEY_LEN + 1];
  int rc = pyenv_for_egg(l->envs_dir, st->egg, &st->python, key);
  if (rc == SPD_ENOFILE)
    snprintf(st->why, sizeof(st->why),
             "its version's Python environment %s is not built on this node (rebuild it)", key);
  else if (rc)
    snprintf(st->why, sizeof(st->why), "its version's environment cannot be read: %s",
             spd_strerror(rc));
  if (!rc && st->python) memcpy(st->env_key, key, sizeof(key));
  return rc ? -1 : 0;
}

/* The egg, the log (opened), the items feed, the job's directory, and the
 * stats and heartbeat files the runner writes. -1 with st->why. */
static int start_files(launcher_t *l, const job_t *j, start_t *st) {
  const config_t *cfg = l->cfg;
  int rc = eggs_path(cfg->eggs_dir, j->project, j->version, &st->egg);
  if (rc == -ENOENT && !j->version && config_project_settings(cfg, j->project)) rc = 0;
  if (rc) {
    snprintf(st->why, sizeof(st->why), "%s '%s' not found", j->version ? "version" : "project",
             j->version ? j->version : j->project);
    return -1;
  }
  if (st->egg && marchive_kind_file(st->egg) == MARCHIVE_MANIFEST && start_manifest(l, j, st))
    return -1;
  if (st->egg && start_env(l, st)) return -1;
  if (cfg->logs_dir[0]) {
    if (!(st->log_file = job_file_prepared(l, cfg->logs_dir, j, ".log"))) {
      snprintf(st->why, sizeof(st->why), "cannot create the log directory: %s", strerror(errno));
      return -1;
    }
    st->log_fd = open(st->log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (st->log_fd < 0) {
      snprintf(st->why, sizeof(st->why), "cannot open %s: %s", st->log_file, strerror(errno));
      return -1;
    }
  }
  if (cfg->items_dir[0]) {
    if (config_items_remote(cfg)) {
      st->feed_uri = remote_feed_uri(cfg->items_dir, j);
    } else {
      st->items_file = job_file_prepared(l, cfg->items_dir, j, ".jl");
      if (st->items_file && asprintf(&st->feed_uri, "file://%s", st->items_file) < 0)
        st->feed_uri = NULL;
    }
    if (!st->feed_uri) {
      snprintf(st->why, sizeof(st->why), "cannot prepare the items directory");
      return -1;
    }
  }
  if (cfg->jobs_dir[0] && !st->command &&
      asprintf(&st->jobdir, "%s/%s/%s/%s", cfg->jobs_dir, j->project, j->spider, j->jobid) < 0) {
    st->jobdir = NULL;
    return start_nomem(st);
  }
  if (!st->jobdir && (!st->command || st->resumable) &&
      !(st->jobdir = pausestate_dir(cfg, j->id)))
    return start_nomem(st);
  /* A command's state directory is there from its start; Scrapy makes its
   * JOBDIR itself. */
  if (st->command && st->jobdir && fs_mkdirs(st->jobdir, 0755)) {
    snprintf(st->why, sizeof(st->why), "cannot create %s: %s", st->jobdir, strerror(errno));
    return -1;
  }
  if (asprintf(&st->stats_path, "%s/%lld.json", l->stats_dir, (long long)j->id) < 0) {
    st->stats_path = NULL;
    return start_nomem(st);
  }
  unlink(st->stats_path);
  if (asprintf(&st->hb_path, "%s/%lld.hb", l->stats_dir, (long long)j->id) < 0) {
    st->hb_path = NULL;
    return start_nomem(st);
  }
  unlink(st->hb_path);
  return 0;
}

/* A command spider's argv: the manifest's command alone (arguments and
 * settings travel in the environment, command_env). Takes st->command. */
static int command_argv(const job_t *j, start_t *st) {
  for (size_t i = 0; st->command[i]; i++) {
    int rc = strv_push(&st->argv, st->command[i]);
    st->command[i] = NULL;
    if (rc) {
      for (size_t k = i + 1; st->command[k]; k++) free(st->command[k]);
      st->command[i + 1] = NULL; /* the rest freed: start_release frees none twice */
      return rc;
    }
  }
  return 0;
}

/* What a command spider reads besides Scrapy's variables:
 *   SPIDERD_SPIDER     the spider's name
 *   SPIDERD_ARGS       the spider arguments, a JSON object of strings
 *                      (with _job, and _version when one was asked for)
 *   SPIDERD_SETTINGS   the job's settings, a JSON object
 *   SPIDERD_ITEMS_FILE where to append items as JSON lines (a local items_dir)
 *   SPIDERD_LOG_FILE   the job's log (its stdout and stderr go there already) */
static int command_env(const job_t *j, start_t *st) {
  strv_t *x = &st->extra;
  json_t *args = j->args ? json_deep_copy(j->args) : json_object();
  json_t *settings = j->settings ? json_incref(j->settings) : json_object();
  char *a = NULL, *s = NULL;
  int rc = -ENOMEM;
  if (!args || !settings) goto out;
  json_object_set_new(args, "_job", json_string(j->jobid));
  if (j->version) json_object_set_new(args, "_version", json_string(j->version));
  a = json_dumps(args, JSON_COMPACT);
  s = json_dumps(settings, JSON_COMPACT);
  if (!a || !s) goto out;
  if (strv_pushf(x, "SPIDERD_SPIDER=%s", j->spider) || strv_pushf(x, "SPIDERD_ARGS=%s", a) ||
      strv_pushf(x, "SPIDERD_SETTINGS=%s", s) ||
      (st->items_file && strv_pushf(x, "SPIDERD_ITEMS_FILE=%s", st->items_file)) ||
      (st->log_file && strv_pushf(x, "SPIDERD_LOG_FILE=%s", st->log_file)))
    goto out;
  rc = 0;
out:
  free(a);
  free(s);
  json_decref(args);
  json_decref(settings);
  return rc;
}

/* The runner's argv and environment: Scrapyd's, plus what spiderd tells a
 * crawl (its stats and heartbeat files, its job, URL and token). */
static int start_command(launcher_t *l, const job_t *j, start_t *st) {
  const config_t *cfg = l->cfg;
  /* Scrapyd's argv names a JOBDIR only for its jobs_dir; spiderd's own
   * goes by SPIDERD_STATE_DIR, which the runner makes the JOBDIR. */
  int rc = st->command ? command_argv(j, st)
                       : build_argv(l, j, st->python, st->log_file, st->feed_uri,
                                    cfg->jobs_dir[0] ? st->jobdir : NULL, &st->argv);
  if (rc) return start_nomem(st);
  const char *host = cfg->bind_address;
  if (!strcmp(host, "0.0.0.0") || !strcmp(host, "::") || !*host) host = "127.0.0.1";
  char token[JOBTOKEN_MAX] = "";
  if (l->job_secret && jobtoken_make(l->job_secret, j->id, token))
    log_warn("launcher", "job '%s' gets no SPIDERD_TOKEN: libcrypto cannot be loaded", j->jobid);
  strv_t *x = &st->extra;
  if (strv_pushf(x, "SPIDERD_STATS_FILE=%s", st->stats_path) ||
      strv_pushf(x, "SPIDERD_HEARTBEAT_FILE=%s", st->hb_path) ||
      strv_pushf(x, "SPIDERD_HEARTBEAT_INTERVAL=%g", cfg->heartbeat_interval) ||
      strv_pushf(x, "SPIDERD_JOB=%s", j->jobid) ||
      (st->jobdir && strv_pushf(x, "SPIDERD_STATE_DIR=%s", st->jobdir)) ||
      strv_pushf(x, strchr(host, ':') ? "SPIDERD_URL=%s://[%s]:%d" : "SPIDERD_URL=%s://%s:%d",
                 cfg->https_cert[0] ? "https" : "http", host, cfg->http_port) ||
      (token[0] && strv_pushf(x, "SPIDERD_TOKEN=%s", token)) ||
      /* On a shared store a crawl must not outlive its node: once the node
       * is declared dead its job runs elsewhere (no adoption either). */
      (l->shared && strv_pushf(x, "SPIDERD_DIE_WITH_NODE=%d", (int)getpid())) ||
      /* The variables Scrapyd set before 1.5: old projects still read them. */
      strv_pushf(x, "SCRAPYD_SLOT=%u", l->sv.nprocs) ||
      strv_pushf(x, "SCRAPYD_SPIDER=%s", j->spider) ||
      strv_pushf(x, "SCRAPYD_JOB=%s", j->jobid) ||
      (st->log_file && strv_pushf(x, "SCRAPYD_LOG_FILE=%s", st->log_file)) ||
      (st->feed_uri && strv_pushf(x, "SCRAPYD_FEED_URI=%s", st->feed_uri)) ||
      (st->command && command_env(j, st)) ||
      /* A backfill's run: the time of the slot it stands for. */
      (json_string_value(json_object_get(j->args, BACKFILL_TIME_ARG)) &&
       strv_pushf(x, "SCHEDULED_TIME=%s",
                  json_string_value(json_object_get(j->args, BACKFILL_TIME_ARG)))) ||
      /* A command project's environment: its python first on PATH. */
      (st->command && st->python &&
       (strv_pushf(x, "PATH=%.*s:%s", (int)(strlen(st->python) - strlen("/python")),
                   st->python, getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin") ||
        strv_pushf(x, "VIRTUAL_ENV=%.*s", (int)(strlen(st->python) - strlen("/bin/python")),
                   st->python))))
    return start_nomem(st);
  /* A command spider has no egg to point at: it runs in its extraction. */
  st->env = env_build(cfg, j->project, st->command ? NULL : st->egg, j->version,
                      (const char *const *)x->v);
  return st->env ? 0 : start_nomem(st);
}

/* Makes p, whose pid is set, a proc_t of the launcher owning the job
 * (taken from j) and its stats, heartbeat, log and items paths (taken from
 * st). */
static void proc_track(launcher_t *l, proc_t *p, job_t *j, start_t *st) {
  p->job = *j;
  job_init(j);
  p->job.pid = p->pid;
  p->job.pid_start = proc_start_time(p->pid);
  p->stats_path = st->stats_path;
  st->stats_path = NULL;
  p->hb_path = st->hb_path;
  st->hb_path = NULL;
  p->limits = st->limits;
  p->log_path = st->log_file;
  st->log_file = NULL;
  p->items_path = st->items_file;
  st->items_file = NULL;
  if (l->res.mech == LIMITS_CGROUP)
    p->cgroup = jobres_cgroup_create(&l->res, p->job.id, &p->limits, p->pid);
  p->group_signals = st->workdir != NULL;
  p->workdir = st->workdir;
  st->workdir = NULL;
  p->state_dir = st->jobdir;
  st->jobdir = NULL;
  /* Its environment stays while it runs, even if its version goes. */
  if (st->env_key[0] && l->flow && l->flow->env_use) {
    memcpy(p->env_key, st->env_key, sizeof(p->env_key));
    l->flow->env_use(l->flow->envs, p->env_key, 1);
  }
  uv_timer_init(l->loop, &p->timer);
  p->timer.data = p;
  p->next = l->sv.procs;
  l->sv.procs = p;
  l->sv.nprocs++;
  launcher_running_changed(l);
  if (l->metrics) metrics_inc(l->metrics, &l->metrics->jobs_started, 1);
}

/* Spawns the runner in a session of its own, stdout and stderr into the
 * job's log, and tracks it (proc_track). */
static int start_spawn(launcher_t *l, job_t *j, start_t *st, proc_t **out) {
  proc_t *p = calloc(1, sizeof(*p));
  if (!p) return start_nomem(st);
  p->l = l;
  int fd = st->log_fd >= 0 ? st->log_fd : STDERR_FILENO;
  uv_stdio_container_t stdio[3] = {{.flags = UV_IGNORE},
                                   {.flags = UV_INHERIT_FD, .data.fd = fd},
                                   {.flags = UV_INHERIT_FD, .data.fd = fd}};
  /* Rlimits must be set in the crawl before it runs, and uv_spawn runs no
   * code of ours in the child between fork and exec. Setting them on the
   * daemon around the spawn would hold for the daemon's own threads too
   * (a store thread's malloc under the crawl's RLIMIT_AS), so prlimit(1)
   * sets them and execs the crawl in place: same pid, session and start
   * time, so cancel, the group KILL and adoption are unchanged. */
  strv_t wrapped = {0};
  char **args = st->argv.v;
  if (l->res.mech == LIMITS_RLIMIT && limits_kernel(&st->limits)) {
    char o[3][LIMITS_OPT_MAX];
    size_t no = limits_prlimit_opts(&st->limits, o);
    int rc = strv_push(&wrapped, strdup(l->res.prlimit));
    for (size_t i = 0; !rc && i < no; i++) rc = strv_push(&wrapped, strdup(o[i]));
    if (!rc) rc = strv_push(&wrapped, strdup("--"));
    for (size_t i = 0; !rc && i < st->argv.n; i++) rc = strv_push(&wrapped, strdup(st->argv.v[i]));
    if (rc) {
      strv_release(&wrapped);
      free(p);
      return start_nomem(st);
    }
    args = wrapped.v;
  }
  uv_process_options_t opts = {.exit_cb = on_proc_exit,
                               .file = args[0],
                               .args = args,
                               .env = st->env,
                               .flags = UV_PROCESS_DETACHED,
                               .cwd = st->workdir,
                               .stdio_count = 3,
                               .stdio = stdio};
  p->process.data = p;
  int rc = uv_spawn(l->loop, &p->process, &opts);
  strv_release(&wrapped);
  if (rc) {
    snprintf(st->why, sizeof(st->why), "cannot start %s: %s", st->argv.v[0], uv_strerror(rc));
    /* Where the spider's author looks first. */
    if (st->command && st->log_fd >= 0)
      dprintf(st->log_fd, "spiderd: %s\n", st->why);
    /* A failed uv_spawn still initialised the handle: it must be closed. */
    p->open_handles = 1;
    p->adopted = 1; /* only the process handle to close */
    uv_close((uv_handle_t *)&p->process, proc_close_cb);
    return -1;
  }
  p->pid = p->process.pid;
  proc_track(l, p, j, st);
  *out = p;
  return 0;
}

/* Scrapyd's "Process started" line, with the runner's arguments. */
static void start_log(const proc_t *p, const strv_t *argv) {
  size_t len = 0;
  for (size_t i = 1; i < argv->n; i++) len += strlen(argv->v[i]) + 4;
  char *shown = malloc(len + 1), *w = shown;
  if (shown) {
    for (size_t i = 1; i < argv->n; i++) w += sprintf(w, "%s'%s'", i > 1 ? ", " : "", argv->v[i]);
    *w = '\0';
  }
  log_job(LOG_INFO, "launcher", &p->job,
          "Process started: project='%s' spider='%s' job='%s' pid=%d args=[%s]",
          p->job.project, p->job.spider, p->job.jobid, p->pid, shown ? shown : "");
  free(shown);
}

static void start_release(start_t *st) {
  if (st->log_fd >= 0) close(st->log_fd);
  env_free(st->env);
  strv_release(&st->argv);
  strv_release(&st->extra);
  free(st->python);
  free(st->egg);
  free(st->log_file);
  free(st->feed_uri);
  free(st->items_file);
  free(st->jobdir);
  free(st->stats_path);
  free(st->hb_path);
  manifest_argv_free(st->command);
  free(st->workdir);
}

/* Starts claimed job j (taken): its files, its command, its process; a job
 * that cannot start ends failed at once, with the reason in the log. */
static void start_failed(launcher_t *l, job_t *j, const start_t *st) {
  log_job(LOG_ERROR, "launcher", j,
          "cannot start job '%s' (project '%s', spider '%s'): %s", j->jobid,
          j->project, j->spider, st->why);
  supervise_end(&l->sv, j, JOB_FAILED, 0, -1, 0, NULL, NULL, NULL, NULL);
}

/* The crawl runs: Scrapyd's log line, the start recorded, the watch on. */
static void start_done(launcher_t *l, proc_t *p, const start_t *st) {
  start_log(p, &st->argv);
  supervise_started(&l->sv, p);
}

static int warm_begin(launcher_t *l, job_t *j, start_t *st);

void launcher_start_job(launcher_t *l, job_t *j) {
  start_t st = {.log_fd = -1};
  proc_t *p = NULL;
  if (limits_resolve(j->args, &l->limit_defaults, &st.limits, st.why, sizeof(st.why)) ||
      start_files(l, j, &st) || start_command(l, j, &st))
    start_failed(l, j, &st);
  else if (warm_begin(l, j, &st))
    return; /* st and j were taken */
  else if (start_spawn(l, j, &st, &p))
    start_failed(l, j, &st);
  else
    start_done(l, p, &st);
  start_release(&st);
}

/* ---- dispatch ---- */

typedef struct claim_op {
  launcher_t *l;
  jobs_claim_t c; /* flow/claim.h: the claim and what it changed */
  uint64_t t0;    /* uv_hrtime at submit (metrics) */
} claim_op_t;

static int claim_fn(store_t *s, void *arg) { return jobs_claim(s, &((claim_op_t *)arg)->c); }

static int requeue_fn(store_t *s, void *arg) { return jobs_requeue(s, arg); }

static void requeue_done(void *arg, int rc) {
  job_list_t *jobs = arg;
  if (rc) log_error("launcher", "could not put %zu claimed job(s) back: %s", jobs->n,
                    spd_strerror(rc));
  job_list_release(jobs);
  free(jobs);
}

/* Claimed jobs (taken) that will not run here go back to pending, for
 * another node or the next start (the store pool drains this write before
 * it stops). */
static void requeue(launcher_t *l, job_list_t *jobs) {
  job_list_t *back = malloc(sizeof(*back));
  if (back) {
    *back = *jobs;
    memset(jobs, 0, sizeof(*jobs));
    if (store_submit(l->store, STORE_WRITE, requeue_fn, back, requeue_done)) {
      job_list_release(back);
      free(back);
    }
  }
}


/* How often a node with jobs left for want of memory looks again: memory
 * frees as crawls end (which claims at once) and as other programs exit. */
#define MEM_RECHECK_MS 1000

/* Jobs given back for want of memory: said once per wait, and claimed
 * again a moment later. */
static void mem_deferred(launcher_t *l, const jobs_claim_t *c) {
  if (!c->mem_deferred) {
    l->mem_waiting = 0;
    return;
  }
  if (!l->mem_waiting)
    log_info("launcher", "%d job(s) wait for memory: the least needs %lld MB, this node has "
             "%lld MB free for crawls", c->mem_deferred, (long long)(c->mem_wanted >> 20),
             (long long)(c->mem_budget >> 20));
  l->mem_waiting = c->mem_wanted;
  supervise_claimed(&l->sv, clock_wall_ms() + MEM_RECHECK_MS, l->sv.delayed);
}

static void claim_done(void *arg, int rc) {
  claim_op_t *op = arg;
  launcher_t *l = op->l;
  jobs_claim_t *c = &op->c;
  l->claiming = 0;
  if (l->metrics)
    metrics_hist_observe(&l->metrics->claim, (double)(uv_hrtime() - op->t0) / 1e9);
  if (rc) {
    log_error("launcher", "claiming pending jobs failed: %s", spd_strerror(rc));
    /* A full disk, an unreachable store, or collisions with other nodes'
     * writes that outlasted the store pool's own retries: the jobs stay
     * pending, and a retry that fell due meanwhile has nothing else to
     * wake a claim. */
    if (rc == -ENOSPC || rc == SPD_ESTORE || rc == -EAGAIN)
      supervise_claimed(&l->sv, clock_wall_ms() + 1000, l->sv.delayed);
  } else if ((l->stopping || l->draining) && c->jobs.n) {
    /* Claimed as the daemon began to stop or to drain: they never ran. */
    requeue(l, &c->jobs);
  } else {
    flow_apply(l->flow, &c->change);
    l->capped = c->capped;
    mem_deferred(l, c);
    if (c->jobs.n < c->max && !c->mem_deferred) /* the store has no more that are due */
      supervise_claimed(&l->sv, c->next_due, c->change.pending_count);
    for (size_t i = 0; i < c->jobs.n; i++)
      if (!launcher_prep_start(l, &c->jobs.v[i])) launcher_start_job(l, &c->jobs.v[i]);
  }
  /* A full claim may leave more behind; a short one found all there was
   * (a new job kicks again, dispatch_again). */
  int full = c->jobs.n >= c->max && !c->limited;
  job_list_release(&c->jobs);
  free(op);
  if (l->stopping || l->draining) {
    launcher_maybe_stopped(l);
    return;
  }
  if (l->dispatch_again || (rc == 0 && full)) {
    l->dispatch_again = 0;
    launcher_dispatch(l);
  }
}

/* As a claim that lands while the daemon stops or drains: j (taken) goes
 * back to pending, for another node or the next start. */
void launcher_requeue_one(launcher_t *l, job_t *j) {
  job_list_t one = {0};
  if (job_list_append(&one, j, 1) == 0) requeue(l, &one);
  job_list_release(&one);
}

void launcher_prep_unlink(launcher_t *l, prep_t *pr) {
  for (prep_t **pp = &l->preps; *pp; pp = &(*pp)->next)
    if (*pp == pr) {
      *pp = pr->next;
      l->npreps--;
      break;
    }
  launcher_running_changed(l);
}

/* ---- warm starts (run/warm.h) ---- */

/* May this crawl fork from a template? A Scrapy crawl (not a command
 * spider) whose job does not set SPIDERD_WARM_START to a false value. */
static int warm_wanted(const launcher_t *l, const job_t *j, const start_t *st) {
  if (!l->warm || st->command) return 0;
  json_t *v = j->settings ? json_object_get(j->settings, "SPIDERD_WARM_START") : NULL;
  int on = 1;
  if (json_is_string(v)) config_parse_bool(json_string_value(v), &on);
  return !json_is_false(v) && !(json_is_integer(v) && !json_integer_value(v)) && on;
}

/* A template forked the crawl (pid > 0), or could not (why): the job,
 * which held its slot meanwhile, runs warm, or starts cold now. */
static void warm_started(void *ud, int pid, const char *why) {
  prep_t *pr = ud;
  launcher_t *l = pr->l;
  job_t *j = &pr->job;
  start_t *st = pr->st;
  proc_t *p = NULL;
  launcher_prep_unlink(l, pr);
  if (pid > 0) {
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0 || !(p = calloc(1, sizeof(*p)))) {
      /* It cannot be watched: it goes, and the job starts cold. */
      log_warn("launcher", "job '%s': cannot watch warm crawl %d (%s): starting it cold",
               j->jobid, pid, fd < 0 ? strerror(errno) : "out of memory");
      if (fd >= 0) close(fd);
      kill(pid, SIGKILL);
      waitpid(pid, NULL, 0);
      pid = 0;
    } else {
      p->l = l;
      p->warm = 1;
      p->pid = pid;
      p->pidfd = fd;
      p->pidpoll.data = p;
      uv_poll_init(l->loop, &p->pidpoll, fd);
      uv_poll_start(&p->pidpoll, UV_READABLE, on_warm_exit);
      proc_track(l, p, j, st);
      if (l->metrics) metrics_inc(l->metrics, &l->metrics->jobs_started_warm, 1);
    }
  } else {
    log_info("launcher", "job '%s' starts cold: %s", j->jobid, why ? why : "no template");
  }
  if (p) {
    start_done(l, p, st);
    if (l->stopping) {
      p->stopped = 1;
      supervise_signal(p, SIGTERM);
    } else if (pr->cancelled) {
      proc_cancel(l, p, pr->cancel_sig ? pr->cancel_sig : SIGTERM);
    }
  } else if (pr->cancelled) {
    log_job(LOG_INFO, "launcher", j, "job '%s' was cancelled before it started", j->jobid);
    supervise_end(&l->sv, j, JOB_CANCELLED, 0, -1, 0, NULL, NULL, NULL, NULL);
  } else if (l->stopping || l->draining) {
    launcher_requeue_one(l, j);
  } else if (start_spawn(l, j, st, &p)) {
    start_failed(l, j, st);
  } else {
    start_done(l, p, st);
  }
  start_release(st);
  free(st);
  job_release(j);
  free(pr);
  launcher_maybe_stopped(l);
}

/* Asks j's template to fork it: 1 when asked (j and st are taken, and the
 * job holds its slot until warm_started), 0 to start it cold now. */
static int warm_begin(launcher_t *l, job_t *j, start_t *st) {
  if (!warm_wanted(l, j, st) || st->argv.n < 4) return 0;
  limits_rlimit_t rl[3];
  size_t nrl = 0;
  if (l->res.mech == LIMITS_RLIMIT && limits_kernel(&st->limits))
    nrl = limits_rlimits(&st->limits, rl);
  prep_t *pr = calloc(1, sizeof(*pr));
  start_t *moved = malloc(sizeof(*moved));
  if (!pr || !moved) {
    free(pr);
    free(moved);
    return 0;
  }
  /* argv without "<python> -m spiderd_runner": the template is both (the
   * interpreter a cold start would exec picks the template). */
  warm_req_t req = {.python = st->argv.v[0], .project = j->project, .version = j->version,
                    .egg = st->egg, .spider = j->spider, .argv = st->argv.v + 3,
                    .env = st->env, .log_fd = st->log_fd, .rlimits = rl, .nrlimits = nrl};
  if (warm_fork(l->warm, &req, warm_started, pr)) {
    free(pr);
    free(moved);
    return 0;
  }
  *moved = *st;
  memset(st, 0, sizeof(*st));
  st->log_fd = -1;
  pr->st = moved;
  pr->l = l;
  pr->job = *j;
  job_init(j);
  pr->next = l->preps;
  l->preps = pr;
  l->npreps++;
  launcher_running_changed(l);
  return 1;
}

void launcher_dispatch(launcher_t *l) {
  if (l->stopping || l->draining) return;
  if (l->claiming) {
    l->dispatch_again = 1;
    return;
  }
  /* Delayed retries are pending but not claimable: only a due timer's wake
   * (due_check) claims when every pending job is a delayed one. */
  /* Under [concurrency] limits or accounts' caps pending jobs may wait for
   * a slot of their limit, which no counter shows: every free slot then
   * claims. */
  if ((flow_pending(l->flow) - l->sv.delayed <= 0 && !l->sv.due_check && !l->cfg->nlimits &&
       !l->capped) ||
      l->sv.nprocs + l->npreps >= l->max_proc)
    return;
  claim_op_t *op = calloc(1, sizeof(*op));
  if (!op) return;
  op->l = l;
  memfit_node_t mem;
  launcher_memory(l, &mem);
  op->c = (jobs_claim_t){.cfg = l->cfg, .node = l->cfg->node_name,
                         .max = l->max_proc - l->sv.nprocs - l->npreps,
                         .now = clock_wall_ms(), .shared = l->shared,
                         .mem_budget = mem.source ? mem.free : -1};
  l->claiming = 1;
  op->t0 = uv_hrtime();
  if (store_submit(l->store, STORE_WRITE, claim_fn, op, claim_done)) {
    l->claiming = 0;
    free(op);
  }
}

void launcher_dispatch_blind(launcher_t *l) {
  l->sv.due_check = 1;
  launcher_dispatch(l);
}

void launcher_set_shared(launcher_t *l, int shared) {
  l->shared = shared;
  l->sv.shared = shared;
}

void launcher_kill_all(launcher_t *l) {
  for (proc_t *p = l->sv.procs; p; p = p->next)
    if (!p->ended) supervise_kill_group(p);
  for (prep_t *pr = l->preps; pr; pr = pr->next) {
    pr->cancelled = 1;
    pr->cancel_sig = SIGKILL;
  }
}

/* ---- adoption after a crash ---- */

void launcher_adopt(launcher_t *l, job_list_t *running) {
  supervise_find_unrecorded(&l->sv, running);
  for (size_t i = 0; i < running->n; i++) {
    job_t *j = &running->v[i];
    char *stats_path = NULL, *hb_path = NULL;
    if (asprintf(&stats_path, "%s/%lld.json", l->stats_dir, (long long)j->id) < 0)
      stats_path = NULL;
    if (asprintf(&hb_path, "%s/%lld.hb", l->stats_dir, (long long)j->id) < 0) hb_path = NULL;
    jobs_resolve(l->cfg, j);
    if (j->pid > 0 && j->pid_start > 0 && proc_start_time(j->pid) == j->pid_start) {
      proc_t *p = calloc(1, sizeof(*p));
      if (!p) {
        free(stats_path);
        free(hb_path);
        continue;
      }
      p->l = l;
      p->adopted = 1;
      p->pid = j->pid;
      p->job = *j;
      job_init(j);
      p->stats_path = stats_path;
      p->hb_path = hb_path;
      /* Its file sizes are watched again; a bad limit (it started, so
       * it was good then) is the defaults. */
      char why[256];
      if (limits_resolve(p->job.args, &l->limit_defaults, &p->limits, why, sizeof(why)))
        p->limits = l->limit_defaults;
      p->log_path = jobs_log_path(l->cfg, p->job.project, p->job.spider, p->job.jobid);
      p->items_path = jobs_items_path(l->cfg, p->job.project, p->job.spider, p->job.jobid);
      if (l->res.mech == LIMITS_CGROUP &&
          asprintf(&p->cgroup, "%s/job-%lld", l->res.cg_dir, (long long)p->job.id) < 0)
        p->cgroup = NULL;
      if (p->cgroup && access(p->cgroup, F_OK) != 0) { /* started under rlimits */
        free(p->cgroup);
        p->cgroup = NULL;
      }
      /* A command spider's children must hear a cancel as before the restart. */
      char *egg = NULL;
      if (eggs_path(l->cfg->eggs_dir, p->job.project, p->job.version, &egg) == 0)
        p->group_signals = marchive_kind_file(egg) == MARCHIVE_MANIFEST;
      free(egg);
      if (!p->group_signals) p->state_dir = pausestate_dir(l->cfg, p->job.id);
      uv_timer_init(l->loop, &p->timer);
      p->timer.data = p;
      uv_timer_start(&p->timer, adopt_watch, ADOPT_POLL_MS, ADOPT_POLL_MS);
      p->next = l->sv.procs;
      l->sv.procs = p;
      l->sv.nprocs++;
      log_job(LOG_INFO, "launcher", &p->job,
              "Adopted running process: project='%s' spider='%s' job='%s' pid=%d",
              p->job.project, p->job.spider, p->job.jobid, p->pid);
      supervise_started(&l->sv, p);
    } else {
      log_job(LOG_WARNING, "launcher", j,
              "job '%s' (project '%s') was running when the daemon stopped and its process "
              "is gone: recording how it ended",
              j->jobid, j->project);
      supervise_end(&l->sv, j, JOB_LOST, 1, -1, 0, stats_path, hb_path, NULL, NULL);
      free(stats_path);
      free(hb_path);
    }
  }
  launcher_running_changed(l);
  job_list_release(running);
}

/* ---- cancel and stop ---- */

int launcher_cancel(launcher_t *l, const char *project, const char *jobid, int sig, int *found) {
  int fresh_only = (sig & FLOW_SIG_UNCANCELLED) != 0;
  sig &= ~FLOW_SIG_UNCANCELLED;
  *found = 0;
  for (prep_t *pr = l->preps; pr; pr = pr->next)
    if (!strcmp(pr->job.project, project) && !strcmp(pr->job.jobid, jobid) &&
        !(fresh_only && pr->cancelled)) {
      /* It never starts (prep_done records the cancel), or a template is
       * forking it: warm_started passes the signal on. */
      pr->cancelled = 1;
      if (!pr->cancel_sig || sig == SIGKILL) pr->cancel_sig = sig;
      (*found)++;
    }
  for (proc_t *p = l->sv.procs; p; p = p->next) {
    if (p->ended || strcmp(p->job.project, project) || strcmp(p->job.jobid, jobid) ||
        (fresh_only && p->cancels))
      continue;
    (*found)++;
    proc_cancel(l, p, sig);
  }
  return 0;
}

int launcher_pause(launcher_t *l, const char *project, const char *jobid, int *found) {
  *found = 0;
  for (prep_t *pr = l->preps; pr; pr = pr->next)
    if (!strcmp(pr->job.project, project) && !strcmp(pr->job.jobid, jobid)) return -EBUSY;
  for (proc_t *p = l->sv.procs; p; p = p->next) {
    if (p->ended || strcmp(p->job.project, project) || strcmp(p->job.jobid, jobid)) continue;
    if (!p->state_dir) return -ENOTSUP;
    (*found)++;
    if (p->pausing++) continue;
    log_job(LOG_INFO, "launcher", &p->job, "Pausing job '%s' (pid %d): its state is kept in %s",
            p->job.jobid, p->pid, p->state_dir);
    /* One TERM: Scrapy drains what it downloads and writes its queue; a
     * second would cut that short. KILLed when it takes longer than a
     * cancel may. */
    supervise_signal(p, SIGTERM);
    if (l->cfg->cancel_grace > 0 && !uv_is_active((uv_handle_t *)&p->timer))
      uv_timer_start(&p->timer, grace_expired, (uint64_t)(l->cfg->cancel_grace * 1000), 0);
  }
  return 0;
}

static void stop_expired(uv_timer_t *t) {
  launcher_t *l = t->data;
  for (proc_t *p = l->sv.procs; p; p = p->next) {
    log_warn("launcher", "job '%s' still running after shutdown_grace: killing pid %d",
             p->job.jobid, p->pid);
    supervise_kill_group(p);
  }
}

void launcher_maybe_stopped(launcher_t *l) {
  if (l->sv.procs || l->preps || l->claiming || l->sv.ends_in_flight) return;
  if (l->draining) run_done_fire(&l->drained);
  if (!l->stopping || !l->stopped.fn) return;
  uv_timer_stop(&l->stop_timer);
  run_done_fire(&l->stopped);
}

/* ---- drain ---- */

void launcher_drain(launcher_t *l, void (*done)(void *ud), void *ud) {
  l->draining = 1;
  run_done_set(&l->drained, done, ud);
  launcher_maybe_stopped(l);
}

void launcher_undrain(launcher_t *l) {
  if (!l->draining) return;
  l->draining = 0;
  l->drained.fn = NULL;
  /* Jobs queued meanwhile by other nodes or retries that came due are in
   * no counter of this node's. */
  launcher_dispatch_blind(l);
}

int launcher_draining(const launcher_t *l) { return l->draining; }

void launcher_stop(launcher_t *l, void (*done)(void *ud), void *ud) {
  l->stopping = 1;
  /* A build may take long: the jobs waiting for one go back now, and the
   * build's end frees what is left (api/pyenvs.h answers it at the stop). */
  for (prep_t *pr = l->preps, *next; pr; pr = next) {
    next = pr->next;
    if (!pr->interp) continue;
    launcher_prep_unlink(l, pr);
    launcher_requeue_one(l, &pr->job);
    pr->abandoned = 1;
  }
  l->drained.fn = NULL; /* the stop's done says it all */
  supervise_stop(&l->sv);
  run_done_set(&l->stopped, done, ud);
  for (proc_t *p = l->sv.procs; p; p = p->next) {
    p->stopped = 1;
    supervise_signal(p, SIGTERM);
  }
  if (l->sv.procs) {
    log_info("launcher", "stopping %u running crawl(s) (SIGTERM, KILL after %.0f s)", l->sv.nprocs,
             l->cfg->shutdown_grace);
    uv_timer_start(&l->stop_timer, stop_expired, (uint64_t)(l->cfg->shutdown_grace * 1000), 0);
  }
  launcher_maybe_stopped(l);
}

static void launcher_close_cb(uv_handle_t *h) {
  launcher_t *l = h->data;
  if (--l->open_handles > 0) return;
  jobres_release(&l->res);
  free(l->stats_dir);
  free(l->work_dir);
  free(l->envs_dir);
  free(l->cwd);
  free(l);
}

void launcher_free(launcher_t *l) {
  if (!l) return;
  warm_close(l->warm);
  uv_close((uv_handle_t *)&l->stop_timer, launcher_close_cb);
  supervise_close(&l->sv, launcher_close_cb);
}
