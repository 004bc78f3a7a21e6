#include "run/supervise.h"

#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"
#include "log.h"

/* A crawl's heartbeat reaches the store at most this often: other nodes only
 * need to see it is alive, and every write costs a commit. */
#define HB_RECORD_MS 10000
/* Bounds of the sweep period: short enough to notice a heartbeat interval
 * of 0.2 s, long enough not to spin. */
#define SWEEP_MIN_MS 50
#define SWEEP_MAX_MS 1000

static int64_t secs_to_ms(double s) {
  /* Ten years: beyond it a timeout means "never", and int64 stays safe. */
  if (!(s > 0)) return 0;
  if (s > 315360000.0) s = 315360000.0;
  return (int64_t)llround(s * 1000.0);
}

static uint32_t next_rand(launcher_t *l) {
  /* xorshift64*: jitter needs spread, not secrecy. */
  uint64_t x = l->rng ? l->rng : 0x9E3779B97F4A7C15ull;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  l->rng = x;
  return (uint32_t)((x * 0x2545F4914F6CDD1Dull) >> 32);
}

static void due_fire(uv_timer_t *t);
static void watch_fire(uv_timer_t *t);

void supervise_init(launcher_t *l) {
  uv_timer_init(l->loop, &l->due_timer);
  l->due_timer.data = l;
  uv_timer_init(l->loop, &l->watch_timer);
  l->watch_timer.data = l;
  l->open_handles += 2;
  l->rng = (uint64_t)clock_wall_ms() * 6364136223846793005ull ^ (uint64_t)getpid();
}

void supervise_stop(launcher_t *l) {
  uv_timer_stop(&l->due_timer);
  uv_timer_stop(&l->watch_timer);
  l->due_at = 0;
}

void supervise_close(launcher_t *l, uv_close_cb cb) {
  uv_close((uv_handle_t *)&l->due_timer, cb);
  uv_close((uv_handle_t *)&l->watch_timer, cb);
}

void supervise_resolve(const config_t *cfg, job_t *j) {
  if (j->timeout_ms <= 0) j->timeout_ms = secs_to_ms(cfg->job_timeout);
  if (j->max_retries <= 0) j->max_retries = cfg->job_retries;
  if (j->retry_backoff_ms <= 0) j->retry_backoff_ms = secs_to_ms(cfg->retry_backoff);
  if (j->attempt < 1) j->attempt = 1;
}

/* ---- events ---- */

/* The small description every job event carries; NULL on allocation failure
 * (the event is then recorded without data rather than not at all). */
static json_t *event_data(const job_t *j, int exit_code, int term_signal) {
  json_t *d = json_pack("{s:s,s:s,s:s,s:i}", "project", j->project, "spider", j->spider,
                        "jobid", j->jobid, "attempt", j->attempt);
  if (!d) return NULL;
  json_object_set_new(d, "exit_code", exit_code >= 0 ? json_integer(exit_code) : json_null());
  json_object_set_new(d, "signal", term_signal ? json_integer(term_signal) : json_null());
  return d;
}

static int add_event(store_t *s, const char *type, const job_t *j, json_t *data /* taken */) {
  event_t e = {0};
  e.type = (char *)type;
  e.schedule_id = j->schedule_id;
  e.job_id = j->id;
  e.data = data;
  int rc = store_event_add(s, &e);
  json_decref(data);
  return rc;
}

/* ---- start ---- */

typedef struct started_op {
  job_t job; /* the identity fields only: id, names, attempt, schedule */
  int pid;
  int64_t pid_start;
  int record_event;
} started_op_t;

static int started_fn(store_t *s, void *arg) {
  started_op_t *op = arg;
  int rc = store_job_started(s, op->job.id, op->pid, op->pid_start);
  if (rc || !op->record_event) return rc;
  json_t *d = event_data(&op->job, -1, 0);
  if (d) json_object_set_new(d, "pid", json_integer(op->pid));
  return add_event(s, "job.started", &op->job, d);
}

static void started_done(void *arg, int rc) {
  started_op_t *op = arg;
  if (rc)
    log_error("launcher", "could not record the start of job #%lld: %s",
              (long long)op->job.id, spd_strerror(rc));
  job_release(&op->job);
  free(op);
}

static void watch_arm(launcher_t *l);

void supervise_started(launcher_t *l, proc_t *p) {
  int64_t now = (int64_t)uv_now(l->loop);
  if (p->job.timeout_ms > 0) {
    /* From the claim's start time, so an adopted crawl keeps its deadline. */
    int64_t left = p->job.start_ms + p->job.timeout_ms - clock_wall_ms();
    p->timeout_at = now + (left > 0 ? left : 0);
    if (p->timeout_at == 0) p->timeout_at = 1;
  }
  watch_arm(l);
  if (p->adopted) return;
  started_op_t *op = calloc(1, sizeof(*op));
  if (!op) return;
  job_init(&op->job);
  op->job.id = p->job.id;
  op->job.schedule_id = p->job.schedule_id;
  op->job.attempt = p->job.attempt;
  op->job.jobid = strdup(p->job.jobid);
  op->job.project = strdup(p->job.project);
  op->job.spider = strdup(p->job.spider);
  op->pid = p->pid;
  op->pid_start = p->job.pid_start;
  op->record_event = op->job.jobid && op->job.project && op->job.spider;
  if (store_submit(l->store, STORE_WRITE, started_fn, op, started_done)) {
    job_release(&op->job);
    free(op);
  }
}

/* ---- end, and the retry it may queue ---- */

typedef struct end_op {
  launcher_t *l;
  job_t job;          /* the attempt that ended: also the retry's template */
  job_state_t state;
  int from_stats;
  int64_t end_ms;
  int exit_code;
  int term_signal;
  char *stats_path;
  char *hb_path;
  const char *end_reason;
  uint32_t rnd;
  int finished_count; /* -1 unless the history was trimmed */
  int ended_elsewhere; /* the store had ended it already (its node was reaped) */
  /* the retry, when one was queued */
  int64_t retry_id;
  int64_t retry_not_before;
} end_op_t;

static const char *end_event(job_state_t st) {
  switch (st) {
  case JOB_FINISHED: return "job.finished";
  case JOB_CANCELLED: return "job.cancelled";
  case JOB_LOST: return "job.lost";
  default: return "job.failed";
  }
}

/* Queues the next attempt of op->job. A cancelled or finished job never
 * gets here; neither does one whose attempts are used up. */
static int queue_retry(store_t *s, end_op_t *op) {
  const job_t *t = &op->job;
  char jobid[256];
  int rc = job_retry_jobid(t->jobid, t->attempt + 1, jobid, sizeof(jobid));
  if (rc) return 0; /* no valid id can be made: the failure stands */
  job_t r;
  job_init(&r);
  r.jobid = strdup(jobid);
  r.project = strdup(t->project);
  r.spider = strdup(t->spider);
  r.version = t->version ? strdup(t->version) : NULL;
  r.args = json_incref(t->args);
  r.settings = json_incref(t->settings);
  /* The attempt that ended gave its key up in this transaction (end_fn
   * finished it first), so the retry takes it over: no one can slip a
   * second job with the key in between. */
  r.unique_key = t->unique_key ? strdup(t->unique_key) : NULL;
  if (!r.jobid || !r.project || !r.spider || (t->version && !r.version) ||
      (t->unique_key && !r.unique_key)) {
    job_release(&r);
    return -ENOMEM;
  }
  r.priority = t->priority;
  r.state = JOB_PENDING;
  r.schedule_id = t->schedule_id;
  r.parent_id = t->parent_id;
  r.retry_of = t->id;
  r.attempt = t->attempt + 1;
  r.max_retries = t->max_retries;
  r.retry_backoff_ms = t->retry_backoff_ms;
  r.timeout_ms = t->timeout_ms;
  int64_t delay = job_retry_delay_ms(t->retry_backoff_ms, t->attempt, op->rnd);
  r.not_before_ms = op->end_ms + delay;
  rc = store_job_insert(s, &r);
  if (rc == SPD_ECONFLICT) {
    /* Another live job holds the key (it cannot, unless the attempt
     * was not holding it): that job does the work; the failure stands
     * rather than the end going unrecorded. */
    log_warn("launcher", "job '%s' is not retried: job #%lld holds its unique key '%s'",
             t->jobid, (long long)r.id, r.unique_key);
    job_release(&r);
    return 0;
  }
  if (rc == 0) {
    json_t *d = event_data(t, op->exit_code, op->term_signal);
    if (d) {
      json_object_set_new(d, "retry_jobid", json_string(r.jobid));
      json_object_set_new(d, "retry_id", json_integer(r.id));
      json_object_set_new(d, "delay_ms", json_integer(delay));
    }
    rc = add_event(s, "job.retried", t, d);
  }
  if (rc == 0) /* every job's timeline starts with its job.queued */
    rc = add_event(s, "job.queued", &r,
                   json_pack("{s:s, s:s, s:s, s:I, s:i}", "project", r.project, "spider",
                             r.spider, "jobid", r.jobid, "retry_of", (json_int_t)t->id,
                             "attempt", r.attempt));
  if (rc == 0) {
    op->retry_id = r.id;
    op->retry_not_before = r.not_before_ms;
  }
  job_release(&r);
  return rc;
}

int supervise_reaped(store_t *s, const config_t *cfg, job_t *job, int64_t now_ms,
                     uint32_t rnd, int64_t *retry_id) {
  end_op_t op;
  memset(&op, 0, sizeof(op));
  supervise_resolve(cfg, job);
  /* Its node died, not the crawl: it runs again at once, and once even
   * with no retries configured. */
  job->retry_backoff_ms = 0;
  op.job = *job; /* borrowed: never released here */
  op.state = JOB_LOST;
  op.end_ms = now_ms;
  op.exit_code = -1;
  op.rnd = rnd;
  json_t *d = event_data(job, -1, 0);
  if (d) {
    json_object_set_new(d, "reason", json_string("node_dead"));
    if (job->node) json_object_set_new(d, "node", json_string(job->node));
  }
  int rc = add_event(s, "job.lost", job, d);
  if (!rc && job->attempt <= (job->max_retries > 0 ? job->max_retries : 1))
    rc = queue_retry(s, &op);
  if (retry_id) *retry_id = rc ? 0 : op.retry_id;
  return rc;
}

static int end_fn(store_t *s, void *arg) {
  end_op_t *op = arg;
  json_t *stats = NULL;
  if (op->l->shared) {
    /* On a shared store a node declared dead has had its jobs ended as
     * lost by another node, which queued their retries: its own late end
     * must not record them twice. */
    job_t cur;
    int rc = store_job_get(s, op->job.id, &cur);
    int gone = rc == -ENOENT || (!rc && (cur.state != JOB_RUNNING || !cur.node ||
                                         strcmp(cur.node, op->l->cfg->node_name)));
    job_release(&cur);
    if (rc && rc != -ENOENT) return rc;
    if (gone) {
      if (op->stats_path) unlink(op->stats_path);
      if (op->hb_path) unlink(op->hb_path);
      op->ended_elsewhere = 1;
      return 0;
    }
  }
  if (op->stats_path) {
    stats = json_load_file(op->stats_path, 0, NULL);
    unlink(op->stats_path);
  }
  if (op->hb_path) unlink(op->hb_path);
  if (op->from_stats) {
    const char *reason = json_string_value(json_object_get(stats, "finish_reason"));
    op->state = (reason && strcmp(reason, "finished") == 0) ? JOB_FINISHED
                : stats                                     ? JOB_FAILED
                                                            : JOB_LOST;
  }
  if (op->end_reason) {
    /* The stats are the only free-form part of a job record: the marker
     * goes there, next to (never inside) what the runner wrote. */
    if (!json_is_object(stats)) {
      json_decref(stats);
      stats = json_object();
    }
    json_object_set_new(stats, "end_reason", json_string(op->end_reason));
  }
  int rc = store_job_finish(s, op->job.id, op->state, op->end_ms, op->exit_code,
                            op->term_signal, stats);
  json_decref(stats);
  /* A limit's slot is free: nodes whose jobs wait on it claim again. */
  if (!rc && op->l->cfg->nlimits) rc = store_notify(s, STORE_NOTE_JOBS);
  if (rc) return rc;
  const job_t *j = &op->job;
  if (op->end_reason && !strcmp(op->end_reason, "timeout")) {
    json_t *d = event_data(j, op->exit_code, op->term_signal);
    if (d) json_object_set_new(d, "timeout_ms", json_integer(j->timeout_ms));
    if ((rc = add_event(s, "job.timeout", j, d))) return rc;
  }
  json_t *d = event_data(j, op->exit_code, op->term_signal);
  if (d && op->end_reason) json_object_set_new(d, "reason", json_string(op->end_reason));
  if ((rc = add_event(s, end_event(op->state), j, d))) return rc;
  if ((op->state == JOB_FAILED || op->state == JOB_LOST) && j->attempt <= j->max_retries &&
      (rc = queue_retry(s, op)))
    return rc;
  int keep = op->l->cfg->finished_to_keep, deleted = 0;
  if (keep > 0) {
    rc = store_trim_finished(s, keep, &deleted);
    if (rc == 0 && deleted > 0) {
      int64_t counts[JOB_NSTATES];
      rc = store_job_counts(s, NULL, counts);
      if (rc == 0)
        op->finished_count = (int)(counts[JOB_FINISHED] + counts[JOB_FAILED] +
                                   counts[JOB_CANCELLED] + counts[JOB_LOST]);
    }
  }
  return rc;
}

static void due_arm(launcher_t *l, int64_t at);

static void end_op_free(end_op_t *op) {
  job_release(&op->job);
  free(op->stats_path);
  free(op->hb_path);
  free(op);
}

static void end_done(void *arg, int rc) {
  end_op_t *op = arg;
  launcher_t *l = op->l;
  l->ends_in_flight--;
  if (rc) {
    log_error("launcher", "could not record the end of job #%lld: %s", (long long)op->job.id,
              spd_strerror(rc));
    l->counters->finished--;
  } else if (op->ended_elsewhere) {
    log_warn("launcher", "job #%lld ('%s') was ended as lost while this node was declared "
             "dead; its end here is not recorded", (long long)op->job.id, op->job.jobid);
    l->counters->finished--;
  } else {
    if (op->finished_count >= 0) {
      /* The store's count after the trim, plus the ends submitted after this
       * one: they are counted already but not yet committed. */
      l->counters->finished = op->finished_count + l->ends_in_flight;
    }
    if (op->retry_id) {
      log_info("launcher", "job '%s' (attempt %d) will be retried after %lld ms", op->job.jobid,
               op->job.attempt, (long long)(op->retry_not_before - clock_wall_ms()));
      l->counters->pending++;
      if (op->retry_not_before > clock_wall_ms()) {
        l->delayed++;
        due_arm(l, op->retry_not_before);
      } else {
        launcher_kick(l);
      }
    }
  }
  if (!rc && l->on_end) l->on_end(l->on_end_ud, &op->job);
  end_op_free(op);
  launcher_maybe_stopped(l);
}

void supervise_end(launcher_t *l, job_t *job, job_state_t state, int from_stats,
                   int exit_code, int term_signal, const char *stats_path,
                   const char *hb_path, const char *end_reason) {
  end_op_t *op = calloc(1, sizeof(*op));
  if (!op) {
    log_error("launcher", "out of memory recording job #%lld", (long long)job->id);
    job_release(job);
    return;
  }
  op->l = l;
  op->job = *job;
  job_init(job);
  op->state = state;
  op->from_stats = from_stats;
  op->end_ms = clock_wall_ms();
  op->exit_code = exit_code;
  op->term_signal = term_signal;
  op->stats_path = stats_path ? strdup(stats_path) : NULL;
  op->hb_path = hb_path ? strdup(hb_path) : NULL;
  op->end_reason = end_reason;
  op->rnd = next_rand(l);
  op->finished_count = -1;
  /* Slots are counted by live processes, so the caller kicks dispatch at
   * once rather than after the commit; the job counts as finished from now
   * on too, so pending + running + finished never dips. */
  l->ends_in_flight++;
  l->counters->finished++;
  if (store_submit(l->store, STORE_WRITE, end_fn, op, end_done) != 0) {
    l->ends_in_flight--;
    l->counters->finished--;
    log_error("launcher", "store closed: end of job #%lld not recorded", (long long)op->job.id);
    end_op_free(op);
  }
}

/* ---- waking for delayed jobs ---- */

static void due_fire(uv_timer_t *t) {
  launcher_t *l = t->data;
  l->due_at = 0;
  l->due_check = 1;
  launcher_kick(l);
}

/* Arms the one due timer for `at` (wall ms) unless it is armed earlier
 * already: a later time is found again by the claim that the earlier wake
 * makes. */
static void due_arm(launcher_t *l, int64_t at) {
  if (at <= 0 || l->stopping) return;
  if (l->due_at && l->due_at <= at) return;
  l->due_at = at;
  int64_t wait = at - clock_wall_ms();
  uv_timer_start(&l->due_timer, due_fire, wait > 0 ? (uint64_t)wait : 0, 0);
}

void supervise_claimed(launcher_t *l, int64_t next_due, int64_t delayed) {
  l->due_check = 0;
  l->delayed = delayed;
  if (next_due) {
    /* The claim saw the truth: drop an armed wake that may be stale. */
    uv_timer_stop(&l->due_timer);
    l->due_at = 0;
    due_arm(l, next_due);
  }
}

/* ---- the sweep: timeouts and heartbeats ---- */

static int64_t sweep_period(const launcher_t *l) {
  int64_t ms = secs_to_ms(l->cfg->heartbeat_interval);
  if (ms < SWEEP_MIN_MS) ms = SWEEP_MIN_MS;
  if (ms > SWEEP_MAX_MS) ms = SWEEP_MAX_MS;
  return ms;
}

/* Restarts the sweep timer for the earliest thing it must do: the next
 * periodic heartbeat check, or a timeout or kill deadline before it. */
static void watch_arm(launcher_t *l) {
  if (l->stopping) return;
  int64_t now = (int64_t)uv_now(l->loop), next = 0;
  for (proc_t *p = l->procs; p; p = p->next) {
    if (p->ended) continue;
    if (!l->next_sweep || l->next_sweep < now) l->next_sweep = now + sweep_period(l);
    if (!next || l->next_sweep < next) next = l->next_sweep;
    if (p->timeout_at && !p->timed_out && p->timeout_at < next) next = p->timeout_at;
    if (p->kill_at && p->kill_at < next) next = p->kill_at;
  }
  if (!next) {
    uv_timer_stop(&l->watch_timer);
    l->next_sweep = 0;
    return;
  }
  uv_timer_start(&l->watch_timer, watch_fire, next > now ? (uint64_t)(next - now) : 0, 0);
}

static void time_out(launcher_t *l, proc_t *p, int64_t now) {
  p->timed_out = 1;
  log_warn("launcher", "job '%s' (pid %d) ran longer than its timeout of %lld ms: stopping it",
           p->job.jobid, p->pid, (long long)p->job.timeout_ms);
  /* TERM first, as a cancel: Scrapy closes the spider and its stats and
   * feeds are written; the group is KILLed if it does not exit in time. */
  kill(p->pid, SIGTERM);
  int64_t grace = secs_to_ms(l->cfg->cancel_grace);
  if (grace > 0) {
    p->kill_at = now + grace;
  } else {
    launcher_kill_group(p);
  }
}

static int64_t file_mtime_ms(const char *path) {
  struct stat st;
  if (!path || stat(path, &st) != 0) return 0;
  return (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000;
}

typedef struct hb_op {
  size_t n;
  int64_t ids[];
} hb_op_t;
/* beats follow ids in the same allocation: ids[n + i] */

static int hb_fn(store_t *s, void *arg) {
  hb_op_t *op = arg;
  for (size_t i = 0; i < op->n; i++) {
    int rc = store_job_heartbeat(s, op->ids[i], op->ids[op->n + i]);
    if (rc && rc != -ENOENT) return rc; /* -ENOENT: it ended meanwhile */
  }
  return 0;
}

static void hb_done(void *arg, int rc) {
  if (rc) log_warn("launcher", "could not record crawl heartbeats: %s", spd_strerror(rc));
  free(arg);
}

static void watch_fire(uv_timer_t *t) {
  launcher_t *l = t->data;
  int64_t now = (int64_t)uv_now(l->loop), wall = clock_wall_ms();
  int64_t hb_timeout = secs_to_ms(l->cfg->heartbeat_timeout);
  int sweep = l->next_sweep && now >= l->next_sweep;
  if (sweep) l->next_sweep = now + sweep_period(l);
  hb_op_t *batch = NULL;
  size_t nb = 0;
  if (sweep && l->nprocs) {
    batch = malloc(sizeof(*batch) + 2 * l->nprocs * sizeof(int64_t));
    if (batch) batch->n = l->nprocs;
  }
  for (proc_t *p = l->procs; p; p = p->next) {
    if (p->ended) continue;
    if (p->kill_at && now >= p->kill_at) {
      p->kill_at = 0;
      log_warn("launcher", "job '%s' did not stop within cancel_grace after its timeout: "
               "killing pid %d", p->job.jobid, p->pid);
      launcher_kill_group(p);
    }
    if (p->timeout_at && !p->timed_out && !p->cancels && !p->stopped && now >= p->timeout_at)
      time_out(l, p, now);
    if (!sweep) continue;
    int64_t beat = file_mtime_ms(p->hb_path);
    if (beat > p->hb_seen) p->hb_seen = beat;
    /* Only a crawl that has beaten once is held to it: a command that
     * never heartbeats is not killed for its silence. */
    if (hb_timeout > 0 && p->hb_seen && !p->hb_lost && !p->cancels && !p->stopped &&
        wall - p->hb_seen > hb_timeout) {
      p->hb_lost = 1;
      log_error("launcher", "job '%s' (pid %d) sent no heartbeat for %lld ms: killing it as lost",
                p->job.jobid, p->pid, (long long)(wall - p->hb_seen));
      /* No TERM: a wedged reactor would never act on it. */
      launcher_kill_group(p);
    }
    if (batch && p->hb_seen > p->hb_stored && nb < batch->n &&
        (!p->hb_stored_at || now - p->hb_stored_at >= HB_RECORD_MS)) {
      batch->ids[nb] = p->job.id;
      batch->ids[batch->n + nb] = p->hb_seen;
      nb++;
      p->hb_stored = p->hb_seen;
      p->hb_stored_at = now;
    }
  }
  if (batch && nb) {
    /* Compact: beats move down next to the ids actually used. */
    memmove(&batch->ids[nb], &batch->ids[batch->n], nb * sizeof(int64_t));
    batch->n = nb;
    if (store_submit(l->store, STORE_WRITE, hb_fn, batch, hb_done)) free(batch);
  } else {
    free(batch);
  }
  watch_arm(l);
}
