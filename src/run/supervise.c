#include "run/supervise.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "error.h"
#include "flow/jobs.h"
#include "log.h"
#include "metrics.h"

/* A crawl's heartbeat reaches the store at most this often: other nodes only
 * need to see it is alive, and every write costs a commit. */
#define HB_RECORD_MS 10000
/* Bounds of the sweep period: short enough to notice a heartbeat interval
 * of 0.2 s, long enough not to spin. */
#define SWEEP_MIN_MS 50
#define SWEEP_MAX_MS 1000

static uint32_t next_rand(supervisor_t *sv) {
  /* xorshift64*: jitter needs spread, not secrecy. */
  uint64_t x = sv->rng ? sv->rng : 0x9E3779B97F4A7C15ull;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  sv->rng = x;
  return (uint32_t)((x * 0x2545F4914F6CDD1Dull) >> 32);
}

static void due_fire(uv_timer_t *t);
static void watch_fire(uv_timer_t *t);
static void ends_give_up(supervisor_t *sv);
static void waiters_run(supervisor_t *sv);

int supervise_init(supervisor_t *sv) {
  uv_timer_init(sv->loop, &sv->due_timer);
  sv->due_timer.data = sv;
  uv_timer_init(sv->loop, &sv->watch_timer);
  sv->watch_timer.data = sv;
  uv_timer_init(sv->loop, &sv->end_timer);
  sv->end_timer.data = sv;
  sv->rng = (uint64_t)clock_wall_ms() * 6364136223846793005ull ^ (uint64_t)getpid();
  return 3;
}

void supervise_stop(supervisor_t *sv) {
  sv->stopping = 1;
  uv_timer_stop(&sv->due_timer);
  uv_timer_stop(&sv->watch_timer);
  uv_timer_stop(&sv->end_timer);
  sv->due_at = 0;
  ends_give_up(sv);
  waiters_run(sv);
}

void supervise_close(supervisor_t *sv, uv_close_cb cb) {
  sv->due_timer.data = sv->watch_timer.data = sv->end_timer.data = sv->ud;
  uv_close((uv_handle_t *)&sv->due_timer, cb);
  uv_close((uv_handle_t *)&sv->watch_timer, cb);
  uv_close((uv_handle_t *)&sv->end_timer, cb);
}

/* ---- signals ---- */

void supervise_signal(proc_t *p, int sig) {
  if (p->group_signals && kill(-p->pid, sig) == 0) return;
  kill(p->pid, sig);
}

void supervise_kill_group(proc_t *p) {
  /* The crawl leads its own session (UV_PROCESS_DETACHED): -pid reaches
   * everything it started too. */
  if (kill(-p->pid, SIGKILL) != 0) kill(p->pid, SIGKILL);
}

int64_t proc_start_time(int pid) {
  char path[64], buf[1024];
  snprintf(path, sizeof(path), "/proc/%d/stat", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof(buf) - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  char *p = strrchr(buf, ')');
  if (!p) return 0;
  p++;
  /* After the command name: field 3 (state) is token 0, field 22 token 19. */
  char *save = NULL;
  char *tok = strtok_r(p, " ", &save);
  for (int i = 0; tok && i < 19; i++) tok = strtok_r(NULL, " ", &save);
  return tok ? strtoll(tok, NULL, 10) : 0;
}

/* ---- crawls whose pid was never recorded ---- */

/* Whether the NUL-separated environment of pid holds the entry `want`. */
static int environ_has(int pid, const char *want) {
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/environ", pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  size_t cap = 65536, len = 0;
  char *buf = malloc(cap + 1);
  ssize_t n = 0;
  while (buf && (n = read(fd, buf + len, cap - len)) > 0) {
    len += (size_t)n;
    if (len == cap) {
      char *nb = cap < (1u << 22) ? realloc(buf, 2 * cap + 1) : NULL;
      if (!nb) break;
      buf = nb;
      cap *= 2;
    }
  }
  close(fd);
  int found = 0;
  if (buf) {
    buf[len] = '\0';
    for (size_t i = 0; i < len && !found; i += strlen(buf + i) + 1)
      found = strcmp(buf + i, want) == 0;
  }
  free(buf);
  return found;
}

void supervise_find_unrecorded(supervisor_t *sv, job_list_t *running) {
  if (sv->shared) return;
  size_t missing = 0;
  for (size_t i = 0; i < running->n; i++) missing += running->v[i].pid <= 0;
  if (!missing) return;
  DIR *d = opendir("/proc");
  if (!d) return;
  struct dirent *e;
  char want[4096];
  while (missing && (e = readdir(d))) {
    char *end = NULL;
    long pid = strtol(e->d_name, &end, 10);
    if (pid <= 1 || *end || pid == (long)getpid()) continue;
    for (size_t i = 0; i < running->n; i++) {
      job_t *j = &running->v[i];
      if (j->pid > 0) continue;
      snprintf(want, sizeof(want), "SPIDERD_STATS_FILE=%s/%lld.json", sv->stats_dir,
               (long long)j->id);
      if (!environ_has((int)pid, want)) continue;
      int64_t started = proc_start_time((int)pid);
      if (started <= 0) break;
      j->pid = (int)pid;
      j->pid_start = started;
      missing--;
      log_warn("launcher", "job '%s' (project '%s') has a crawl the previous daemon started "
               "but did not record: pid %ld", j->jobid, j->project, pid);
      break;
    }
  }
  closedir(d);
}

/* ---- start ---- */

typedef struct started_op {
  job_t job; /* the identity fields only: id, names, attempt, schedule */
  int pid;
  int64_t pid_start;
  int record_event;
  int warm;
} started_op_t;

static int started_fn(store_t *s, void *arg) {
  started_op_t *op = arg;
  if (!op->record_event) return jobs_adopted(s, op->job.id, op->pid, op->pid_start);
  return jobs_started(s, &op->job, op->pid, op->pid_start, op->warm);
}

static void started_done(void *arg, int rc) {
  started_op_t *op = arg;
  if (rc)
    log_error("launcher", "could not record the start of job #%lld: %s",
              (long long)op->job.id, spd_strerror(rc));
  job_release(&op->job);
  free(op);
}

static void watch_arm(supervisor_t *sv);

void supervise_started(supervisor_t *sv, proc_t *p) {
  int64_t now = (int64_t)uv_now(sv->loop);
  if (p->job.timeout_ms > 0) {
    /* From the claim's start time, so an adopted crawl keeps its deadline. */
    int64_t left = p->job.start_ms + p->job.timeout_ms - clock_wall_ms();
    p->timeout_at = now + (left > 0 ? left : 0);
    if (p->timeout_at == 0) p->timeout_at = 1;
  }
  watch_arm(sv);
  if (sv->on_start) sv->on_start(sv->on_end_ud, &p->job);
  /* An adopted crawl has its pid written again, without an event: one
   * found by supervise_find_unrecorded had none in the store. */
  started_op_t *op = calloc(1, sizeof(*op));
  if (!op) return;
  job_init(&op->job);
  op->job.id = p->job.id;
  op->job.schedule_id = p->job.schedule_id;
  op->job.test = p->job.test; /* its events stay out of the schedule's */
  op->job.attempt = p->job.attempt;
  op->job.jobid = strdup(p->job.jobid);
  op->job.project = strdup(p->job.project);
  op->job.spider = strdup(p->job.spider);
  op->pid = p->pid;
  op->pid_start = p->job.pid_start;
  op->warm = p->warm;
  op->record_event = !p->adopted && op->job.jobid && op->job.project && op->job.spider;
  if (store_submit(sv->store, STORE_WRITE, started_fn, op, started_done)) {
    job_release(&op->job);
    free(op);
  }
}

/* ---- end, and the retry it may queue ---- */

typedef struct end_op {
  struct end_op *next; /* in sv->ends_waiting */
  struct end_op *wnext; /* in sv->ends_writing */
  uint64_t seq;         /* sv->end_seq when (last) handed to the store */
  supervisor_t *sv;
  job_t job;          /* the attempt that ended: also the retry's template */
  job_state_t state;
  int from_stats;
  int64_t end_ms;
  int exit_code;
  int term_signal;
  char *stats_path;
  char *hb_path;
  const char *end_reason;
  int has_usage;
  supervise_usage_t usage; /* usage.log_path is log_path */
  char *log_path;
  uint32_t rnd;
  flow_change_t change; /* jobs_end's: the retry, the count after a trim */
  int ended_elsewhere; /* the store had ended it already (its node was reaped) */
  json_t *stats;      /* the runner's stats, read once: a retried write reuses them */
  int stats_read;
  int waited;         /* writes that met a full disk or an unreachable store */
  int wait_rc;        /* the last of their errors */
  /* the retry, when one was queued */
  int64_t retry_id;
  int64_t retry_not_before;
  char *state_dir;    /* a paused crawl's state directory (owned), or NULL */
} end_op_t;

/* Adds what the crawl used to its stats (a new object when the runner
 * wrote none), and names the limit that ended a failed crawl when one
 * explains it; returns the stats. */
static json_t *usage_stats(end_op_t *op, json_t *stats) {
  const jobres_usage_t *u = &op->usage.usage;
  if (!op->end_reason && op->state == JOB_FAILED) {
    limits_end_t e = {.failed = 1, .term_signal = op->term_signal, .peak_vm = u->peak_vm,
                      .cpu_ms = u->cpu_ms, .oom_kills = u->oom_kills,
                      .pids_max_hits = u->pids_max_hits};
    /* The log's tail is read only when it can matter: a failed crawl
     * under a memory rlimit. */
    if (op->usage.mech == LIMITS_RLIMIT && op->usage.limits.memory > 0)
      e.memory_error = jobres_log_says_oom(op->log_path);
    op->end_reason = limits_end_reason(op->usage.mech, &op->usage.limits, &e);
  }
  if (!u->sampled) return stats;
  if (!json_is_object(stats)) {
    json_decref(stats);
    stats = json_object();
  }
  /* The runner may have measured itself (exactly, at its end); the sweep
   * saw the process until its last pass: the larger is the truer. */
  json_int_t rss = json_integer_value(json_object_get(stats, "peak_memory_bytes"));
  double cpu = json_number_value(json_object_get(stats, "cpu_time_seconds"));
  if (u->peak_rss > rss) json_object_set_new(stats, "peak_memory_bytes", json_integer(u->peak_rss));
  if ((double)u->cpu_ms / 1000.0 > cpu)
    json_object_set_new(stats, "cpu_time_seconds", json_real((double)u->cpu_ms / 1000.0));
  return stats;
}

/* The stats the end records: the runner's (read once: a retried write
 * reuses them), what the crawl used, and why it was stopped; decides the
 * state of an end judged by its stats file. Returns a new reference. */
static json_t *end_stats(end_op_t *op) {
  if (op->stats_path && !op->stats_read) {
    op->stats = json_load_file(op->stats_path, 0, NULL);
    op->stats_read = 1;
    unlink(op->stats_path);
  }
  json_t *stats = op->stats ? json_deep_copy(op->stats) : NULL;
  if (op->hb_path) unlink(op->hb_path);
  if (op->from_stats) {
    const char *reason = json_string_value(json_object_get(stats, "finish_reason"));
    op->state = (reason && strcmp(reason, "finished") == 0) ? JOB_FINISHED
                : stats                                     ? JOB_FAILED
                                                            : JOB_LOST;
  }
  if (op->has_usage) stats = usage_stats(op, stats);
  if (op->end_reason) {
    /* The stats are the only free-form part of a job record: the marker
     * goes there, next to (never inside) what the runner wrote. */
    if (!json_is_object(stats)) {
      json_decref(stats);
      stats = json_object();
    }
    json_object_set_new(stats, "end_reason", json_string(op->end_reason));
  }
  return stats;
}

static int end_fn(store_t *s, void *arg) {
  end_op_t *op = arg;
  /* A run the store pool repeats after a collision starts afresh. */
  op->change = (flow_change_t){0};
  op->retry_id = 0;
  if (op->sv->shared) {
    int ours = 0, rc = jobs_still_ours(s, op->job.id, op->sv->cfg->node_name, &ours);
    if (rc) return rc;
    if (!ours) {
      if (op->stats_path) unlink(op->stats_path);
      if (op->hb_path) unlink(op->hb_path);
      op->ended_elsewhere = 1;
      return 0;
    }
  }
  json_t *stats = end_stats(op);
  char *items = jobs_items_path(op->sv->cfg, op->job.project, op->job.spider, op->job.jobid);
  jobs_end_t e = {.items_path = items, .job = &op->job, .state = op->state, .end_ms = op->end_ms,
                  .exit_code = op->exit_code, .term_signal = op->term_signal,
                  .stats = stats, .end_reason = op->end_reason, .rnd = op->rnd,
                  .notify = op->sv->cfg->nlimits > 0, .keep = op->sv->cfg->finished_to_keep,
                  .state_dir = op->state_dir};
  int rc = jobs_end(s, &e);
  free(items);
  json_decref(stats);
  if (rc) return rc;
  op->retry_id = e.retry_id;
  op->retry_not_before = e.retry_not_before;
  op->change = e.change;
  return 0;
}

static void due_arm(supervisor_t *sv, int64_t at);

static void end_op_free(end_op_t *op) {
  free(op->state_dir);
  json_decref(op->stats);
  job_release(&op->job);
  free(op->stats_path);
  free(op->hb_path);
  free(op->log_path);
  free(op);
}

/* How often an end that met a full disk or an unreachable store is written
 * again. */
#define END_RETRY_MS 1000

static void end_done(void *arg, int rc);

/* ---- reads that wait for the ends counted ---- */

typedef struct ends_waiter {
  struct ends_waiter *next;
  uint64_t seq; /* runs once no end of seq <= this is being written */
  void (*cb)(void *ud);
  void *ud;
} ends_waiter_t;

/* Runs the waiters whose ends are all written (every waiter when none is,
 * or at a stop, which waits for nothing). */
static void waiters_run(supervisor_t *sv) {
  uint64_t oldest = UINT64_MAX;
  for (end_op_t *o = sv->ends_writing; o && !sv->stopping; o = o->wnext)
    if (o->seq < oldest) oldest = o->seq;
  while (sv->waiters && sv->waiters->seq < oldest) {
    ends_waiter_t *w = sv->waiters;
    if (!(sv->waiters = w->next)) sv->waiters_last = NULL;
    w->cb(w->ud);
    free(w);
  }
}

int supervise_after_ends(supervisor_t *sv, void (*cb)(void *ud), void *ud) {
  if (!sv->ends_writing || sv->stopping) return 1;
  ends_waiter_t *w = malloc(sizeof(*w));
  if (!w) return -ENOMEM;
  *w = (ends_waiter_t){.seq = sv->end_seq, .cb = cb, .ud = ud};
  if (sv->waiters_last) sv->waiters_last->next = w;
  else sv->waiters = w;
  sv->waiters_last = w;
  return 0;
}

/* op's write is done, or waits for disk: reads no longer wait for it. */
static void end_written(supervisor_t *sv, end_op_t *op) {
  for (end_op_t **pp = &sv->ends_writing; *pp; pp = &(*pp)->wnext)
    if (*pp == op) {
      *pp = op->wnext;
      break;
    }
  op->wnext = NULL;
  waiters_run(sv);
}

/* Hands op to the store's writer; reads that start from now wait for it. */
static int end_submit(supervisor_t *sv, end_op_t *op) {
  int rc = store_submit(sv->store, STORE_WRITE, end_fn, op, end_done);
  if (rc) return rc;
  op->seq = ++sv->end_seq;
  op->wnext = sv->ends_writing;
  sv->ends_writing = op;
  return 0;
}

/* Writes the waiting ends again: the disk may have space by now. */
static void ends_retry(uv_timer_t *t) {
  supervisor_t *sv = t->data;
  end_op_t *op = sv->ends_waiting;
  sv->ends_waiting = NULL;
  while (op) {
    end_op_t *next = op->next;
    op->next = NULL;
    if (end_submit(sv, op) != 0) end_done(op, SPD_ESHUTDOWN);
    op = next;
  }
}

/* The daemon stops with ends still waiting: they are not recorded here. */
static void ends_give_up(supervisor_t *sv) {
  end_op_t *op = sv->ends_waiting;
  sv->ends_waiting = NULL;
  while (op) {
    end_op_t *next = op->next;
    op->next = NULL;
    end_done(op, op->wait_rc);
    op = next;
  }
}

/* The end is in the store: its counts, and its retry's wake-up (at once,
 * or when its backoff is over). */
static void end_recorded(supervisor_t *sv, end_op_t *op) {
  if (sv->metrics) metrics_job_ended(sv->metrics, job_state_name(op->state));
  /* The store's count after a trim, plus the ends submitted after this
   * one: they are counted already but not yet committed. */
  if (op->change.has_finished) op->change.finished_count += sv->ends_in_flight;
  flow_apply(sv->flow, &op->change);
  if (!op->retry_id) return;
  log_job(LOG_INFO, "launcher", &op->job,
          "job '%s' (attempt %d) will be retried after %lld ms", op->job.jobid,
          op->job.attempt, (long long)(op->retry_not_before - clock_wall_ms()));
  if (op->retry_not_before > clock_wall_ms()) {
    sv->delayed++;
    due_arm(sv, op->retry_not_before);
  } else if (!op->change.dispatch) {
    sv->wake(sv->ud);
  }
}

static void end_done(void *arg, int rc) {
  end_op_t *op = arg;
  supervisor_t *sv = op->sv;
  end_written(sv, op);
  /* A full disk rolled it back, the store cannot be reached (down,
   * restarting, cut off), or collisions with other nodes' writes outlasted
   * the store pool's own retries (-EAGAIN: it ran the write again already):
   * written again once a second until it takes it, or the job would be
   * listed running, without a process, its slot taken and its retry never
   * queued, until the next start. Not at a stop, which must not wait on the
   * store. On a shared store the write checks first that the job is still
   * this node's. */
  if ((rc == -ENOSPC || rc == SPD_ESTORE || rc == -EAGAIN) && !sv->stopping) {
    if (!op->waited++)
      log_error("launcher", "could not record the end of job #%lld ('%s'): %s; trying again "
                "every %d ms", (long long)op->job.id, op->job.jobid, spd_strerror(rc),
                END_RETRY_MS);
    op->wait_rc = rc;
    op->next = sv->ends_waiting;
    sv->ends_waiting = op;
    if (!uv_is_active((uv_handle_t *)&sv->end_timer))
      uv_timer_start(&sv->end_timer, ends_retry, END_RETRY_MS, 0);
    return;
  }
  int kick = 0;
  if (!rc && op->waited) {
    log_info("launcher", "recorded the end of job #%lld ('%s') at last",
             (long long)op->job.id, op->job.jobid);
    /* A claim that met the same full disk or store left its jobs pending,
     * and nothing else may come to claim them. */
    kick = !sv->stopping;
  }
  sv->ends_in_flight--;
  if (rc) {
    log_error("launcher", "could not record the end of job #%lld: %s", (long long)op->job.id,
              spd_strerror(rc));
    flow_change_t undo = op->state == JOB_PAUSED ? (flow_change_t){0} : jobs_end_dropped();
    flow_apply(sv->flow, &undo);
  } else if (op->ended_elsewhere) {
    log_warn("launcher", "job #%lld ('%s') was ended as lost while this node was declared "
             "dead; its end here is not recorded", (long long)op->job.id, op->job.jobid);
    flow_change_t undo = op->state == JOB_PAUSED ? (flow_change_t){0} : jobs_end_dropped();
    flow_apply(sv->flow, &undo);
  } else {
    end_recorded(sv, op);
  }
  if (!rc && sv->on_end) sv->on_end(sv->on_end_ud, &op->job);
  end_op_free(op);
  if (kick) sv->wake(sv->ud);
  sv->settled(sv->ud);
}

void supervise_end(supervisor_t *sv, job_t *job, job_state_t state, int from_stats,
                   int exit_code, int term_signal, const char *stats_path,
                   const char *hb_path, const char *end_reason,
                   const supervise_usage_t *usage) {
  end_op_t *op = calloc(1, sizeof(*op));
  if (!op) {
    log_error("launcher", "out of memory recording job #%lld", (long long)job->id);
    job_release(job);
    return;
  }
  op->sv = sv;
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
  if (usage) {
    op->has_usage = 1;
    op->usage = *usage;
    op->log_path = usage->log_path ? strdup(usage->log_path) : NULL;
    op->usage.log_path = NULL;
  }
  op->rnd = next_rand(sv);
  /* A job cgroup whose killed processes had not exited yet waits for a
   * sweep, even when no crawl is left to need one. */
  if (sv->res->ngraves) watch_arm(sv);
  /* Slots are counted by live processes, so the caller kicks dispatch at
   * once rather than after the commit; the job counts as finished from now
   * on too, so pending + running + finished never dips. */
  sv->ends_in_flight++;
  /* A paused job is not finished: it is pending again once resumed. */
  flow_change_t counted = state == JOB_PAUSED ? (flow_change_t){0} : jobs_end_submitted();
  flow_apply(sv->flow, &counted);
  op->state_dir = sv->state_dir;
  sv->state_dir = NULL;
  if (end_submit(sv, op) != 0) {
    sv->ends_in_flight--;
    flow_change_t undo = state == JOB_PAUSED ? (flow_change_t){0} : jobs_end_dropped();
    flow_apply(sv->flow, &undo);
    log_error("launcher", "store closed: end of job #%lld not recorded", (long long)op->job.id);
    end_op_free(op);
  }
}

/* ---- waking for delayed jobs ---- */

static void due_fire(uv_timer_t *t) {
  supervisor_t *sv = t->data;
  sv->due_at = 0;
  sv->due_check = 1;
  sv->wake(sv->ud);
}

/* Arms the one due timer for `at` (wall ms) unless it is armed earlier
 * already: a later time is found again by the claim that the earlier wake
 * makes. */
static void due_arm(supervisor_t *sv, int64_t at) {
  if (at <= 0 || sv->stopping) return;
  if (sv->due_at && sv->due_at <= at) return;
  sv->due_at = at;
  int64_t wait = at - clock_wall_ms();
  uv_timer_start(&sv->due_timer, due_fire, wait > 0 ? (uint64_t)wait : 0, 0);
}

void supervise_claimed(supervisor_t *sv, int64_t next_due, int64_t delayed) {
  sv->due_check = 0;
  sv->delayed = delayed;
  if (next_due) {
    /* The claim saw the truth: drop an armed wake that may be stale. */
    uv_timer_stop(&sv->due_timer);
    sv->due_at = 0;
    due_arm(sv, next_due);
  }
}

/* ---- the sweep: timeouts and heartbeats ---- */

static int64_t sweep_period(const supervisor_t *sv) {
  int64_t ms = clock_secs_ms(sv->cfg->heartbeat_interval);
  if (ms < SWEEP_MIN_MS) ms = SWEEP_MIN_MS;
  if (ms > SWEEP_MAX_MS) ms = SWEEP_MAX_MS;
  return ms;
}

/* Restarts the sweep timer for the earliest thing it must do: the next
 * periodic heartbeat check (also while killed job cgroups wait to be
 * removed), or a timeout or kill deadline before it. */
static void watch_arm(supervisor_t *sv) {
  if (sv->stopping) return;
  int64_t now = (int64_t)uv_now(sv->loop), next = 0;
  for (proc_t *p = sv->procs; p; p = p->next) {
    if (p->ended) continue;
    if (!sv->next_sweep || sv->next_sweep < now) sv->next_sweep = now + sweep_period(sv);
    if (!next || sv->next_sweep < next) next = sv->next_sweep;
    if (p->timeout_at && !p->timed_out && p->timeout_at < next) next = p->timeout_at;
    if (p->kill_at && p->kill_at < next) next = p->kill_at;
  }
  if (sv->res->ngraves) { /* job cgroups to remove (jobres_reap) */
    if (!sv->next_sweep || sv->next_sweep < now) sv->next_sweep = now + sweep_period(sv);
    if (!next || sv->next_sweep < next) next = sv->next_sweep;
  }
  if (!next) {
    uv_timer_stop(&sv->watch_timer);
    sv->next_sweep = 0;
    return;
  }
  uv_timer_start(&sv->watch_timer, watch_fire, next > now ? (uint64_t)(next - now) : 0, 0);
}

/* TERM first, as a cancel: Scrapy closes the spider and its stats and
 * feeds are written; the group is KILLed if it does not exit in time. */
static void stop_crawl(supervisor_t *sv, proc_t *p, int64_t now) {
  supervise_signal(p, SIGTERM);
  int64_t grace = clock_secs_ms(sv->cfg->cancel_grace);
  if (grace > 0) {
    p->kill_at = now + grace;
  } else {
    supervise_kill_group(p);
  }
}

static void time_out(supervisor_t *sv, proc_t *p, int64_t now) {
  p->timed_out = 1;
  log_job(LOG_WARNING, "launcher", &p->job,
          "job '%s' (pid %d) ran longer than its timeout of %lld ms: stopping it",
          p->job.jobid, p->pid, (long long)p->job.timeout_ms);
  stop_crawl(sv, p, now);
}

static int64_t file_size(const char *path) {
  struct stat st;
  if (!path || stat(path, &st) != 0) return 0;
  return (int64_t)st.st_size;
}

/* The sweep's look at a crawl's resources: what it used so far, and the
 * limits only the daemon can hold (file sizes; CPU under a cgroup, which
 * has no CPU-seconds limit of its own). The first one over stops the crawl
 * as a timeout does; the reason is recorded at its end. */
static void limits_check(supervisor_t *sv, proc_t *p, int64_t now) {
  if (p->cgroup) jobres_sample_cgroup(p->cgroup, &p->usage);
  else jobres_sample_pid(p->pid, &p->usage);
  if (p->over || p->timed_out || p->cancels || p->stopped) return;
  const job_limits_t *lim = &p->limits;
  int64_t size = 0, limit = 0;
  if (lim->log > 0 && (size = file_size(p->log_path)) > lim->log) {
    p->over = "log_limit";
    limit = lim->log;
  } else if (lim->items > 0 && (size = file_size(p->items_path)) > lim->items) {
    p->over = "items_limit";
    limit = lim->items;
  } else if (p->cgroup && lim->cpu_s > 0 && p->usage.cpu_ms >= lim->cpu_s * 1000) {
    p->over = "cpu_limit";
    size = p->usage.cpu_ms / 1000;
    limit = lim->cpu_s;
  }
  if (!p->over) return;
  log_job(LOG_WARNING, "launcher", &p->job,
          "job '%s' (pid %d) went over its %s (%lld > %lld): stopping it",
          p->job.jobid, p->pid, p->over, (long long)size, (long long)limit);
  stop_crawl(sv, p, now);
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
  supervisor_t *sv = t->data;
  int64_t now = (int64_t)uv_now(sv->loop), wall = clock_wall_ms();
  int64_t hb_timeout = clock_secs_ms(sv->cfg->heartbeat_timeout);
  int sweep = sv->next_sweep && now >= sv->next_sweep;
  if (sweep) sv->next_sweep = now + sweep_period(sv);
  if (sweep) jobres_reap(sv->res);
  hb_op_t *batch = NULL;
  size_t nb = 0;
  if (sweep && sv->nprocs) {
    batch = malloc(sizeof(*batch) + 2 * sv->nprocs * sizeof(int64_t));
    if (batch) batch->n = sv->nprocs;
  }
  for (proc_t *p = sv->procs; p; p = p->next) {
    if (p->ended) continue;
    if (p->kill_at && now >= p->kill_at) {
      p->kill_at = 0;
      log_job(LOG_WARNING, "launcher", &p->job,
              "job '%s' did not stop within cancel_grace after its %s: "
              "killing pid %d", p->job.jobid, p->over ? p->over : "timeout", p->pid);
      supervise_kill_group(p);
    }
    if (p->timeout_at && !p->timed_out && !p->over && !p->cancels && !p->stopped &&
        now >= p->timeout_at)
      time_out(sv, p, now);
    if (!sweep) continue;
    limits_check(sv, p, now);
    int64_t beat = file_mtime_ms(p->hb_path);
    if (beat > p->hb_seen) p->hb_seen = beat;
    /* Only a crawl that has beaten once is held to it: a command that
     * never heartbeats is not killed for its silence. */
    if (hb_timeout > 0 && p->hb_seen && !p->hb_lost && !p->cancels && !p->stopped &&
        wall - p->hb_seen > hb_timeout) {
      p->hb_lost = 1;
      log_job(LOG_ERROR, "launcher", &p->job,
              "job '%s' (pid %d) sent no heartbeat for %lld ms: killing it as lost",
              p->job.jobid, p->pid, (long long)(wall - p->hb_seen));
      /* No TERM: a wedged reactor would never act on it. */
      supervise_kill_group(p);
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
    if (store_submit(sv->store, STORE_WRITE, hb_fn, batch, hb_done)) free(batch);
  } else {
    free(batch);
  }
  watch_arm(sv);
}
