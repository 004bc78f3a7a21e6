/* Supervision policy of the launcher: per-job timeouts, crawl heartbeats,
 * retries with exponential backoff, the wake-up for delayed jobs, and the
 * store writes (with their events) that record a job starting and ending.
 *
 * This is the launcher's private half: launcher.c spawns, reaps, cancels
 * and adopts processes; this file decides what their ends mean and watches
 * them while they run. Both run on the loop thread only and share the
 * structures below, which nothing outside src/run/launcher.c and
 * src/run/supervise.c may touch.
 *
 * Ownership: a proc_t owns its job and paths; supervise_end() takes the
 * job's contents it is given.
 */
#ifndef SPIDERD_RUN_SUPERVISE_H
#define SPIDERD_RUN_SUPERVISE_H

#include <stdint.h>
#include <uv.h>

#include "core/limits.h"
#include "run/jobres.h"
#include "run/launcher.h"

typedef struct proc {
  struct proc *next;
  launcher_t *l;
  uv_process_t process; /* our child; unused when adopted or warm */
  int warm;             /* forked by a template (run/warm.h): watched by pidfd */
  int pidfd;
  uv_poll_t pidpoll;
  uv_timer_t timer;     /* cancel grace, or the adopted process's watch */
  int open_handles;     /* closed handles still to come back */
  int adopted;
  int pid;
  int cancels;          /* user cancels received */
  int stopped;          /* TERM'd by a daemon stop */
  int ended;            /* exit seen, end submitted */
  job_t job;            /* owned; robustness fields resolved (jobs_resolve) */
  char *stats_path;
  char *hb_path;        /* the heartbeat file the runner touches */
  /* Watched by the supervision sweep (monotonic ms = uv_now; wall ms). */
  int64_t timeout_at;   /* mono; 0 = no timeout */
  int64_t kill_at;      /* mono; a timed-out crawl's group is KILLed then */
  int64_t hb_seen;      /* wall; mtime of the newest heartbeat, 0 = none yet */
  int64_t hb_stored;    /* wall; the heartbeat last written to the store */
  int64_t hb_stored_at; /* mono; when it was written */
  int timed_out;
  int hb_lost;
  /* Resource limits (core/limits.h, run/jobres.h). */
  job_limits_t limits;  /* resolved: the job's own, else the daemon's defaults */
  char *log_path;       /* the job's log, NULL = none (its size is watched) */
  char *items_path;     /* the job's local items file, NULL = none */
  char *cgroup;         /* the job's cgroup directory, NULL = none */
  jobres_usage_t usage; /* what the sweep saw it use */
  const char *over;     /* the size or CPU limit the sweep stopped it for */
  /* A command spider (spiderd.json): TERM and INT go to its whole process
   * group, since a shell or node command's own children must hear them
   * too; a Scrapy runner gets them alone, as under Scrapyd. */
  int group_signals;
  char *workdir;        /* a command spider's directory (owned), else NULL */
} proc_t;

struct launcher {
  uv_loop_t *loop;
  const config_t *cfg;
  store_pool_t *store;
  job_counters_t *counters;
  proc_t *procs;
  unsigned nprocs;
  /* Claimed jobs whose command project is being extracted on libuv's
   * thread pool (launcher.c): they hold a slot but are not processes yet. */
  struct prep *preps;
  unsigned npreps;
  unsigned max_proc;
  int claiming;       /* a claim is in flight */
  int dispatch_again;     /* a kick arrived while claiming */
  unsigned ends_in_flight;
  int stopping;
  int draining;       /* claims nothing (launcher_drain) */
  void (*drained)(void *ud); /* once nothing runs while draining; then NULL */
  void *drained_ud;
  int open_handles;   /* launcher timers still to close */
  uv_timer_t stop_timer;
  void (*stop_done)(void *ud);
  void *stop_ud;
  char *cwd;
  char *stats_dir;
  char *work_dir;     /* <dbs_dir>/spiders: command projects, extracted */
  /* Delayed jobs (retries waiting out their backoff): they are pending but
   * not claimable, so the counters alone cannot tell dispatch to claim. */
  int64_t delayed;    /* pending jobs known to be not yet due */
  int due_check;      /* a delayed job may be due: claim even if none seem pending */
  int64_t due_at;     /* wall ms the due timer is armed for; 0 = unarmed */
  uv_timer_t due_timer;
  uv_timer_t watch_timer; /* one sweep for every job's timeout and heartbeat */
  /* Ends the store could not record for a full disk, written again every
   * END_RETRY_MS until they are (supervise.c); counted in ends_in_flight. */
  struct end_op *ends_waiting;
  uv_timer_t end_timer;
  int64_t next_sweep; /* mono */
  uint64_t rng;       /* retry jitter */
  void (*on_end)(void *ud, const job_t *job); /* after a job's end is committed */
  void *on_end_ud;
  void (*on_start)(void *ud, const job_t *job); /* a crawl started or was adopted */
  const char *job_secret; /* borrowed: signs each job's SPIDERD_TOKEN (NULL: none) */
  int shared;         /* the store is shared with other nodes (run/cluster.c) */
  struct metrics *metrics; /* borrowed; NULL = none (launcher_set_metrics) */
  struct warm *warm;  /* templates for warm starts; NULL = cold starts only */
  jobres_t res;       /* how memory, CPU and process limits are enforced */
  job_limits_t limit_defaults; /* [spiderd] job_memory_limit, ... */
};

/* KILLs the crawl's whole process group. */
void launcher_kill_group(proc_t *p);
/* Sends sig to the crawl: to its process, or to its group when
 * p->group_signals. */
void launcher_signal(proc_t *p, int sig);
/* After every commit that may finish the daemon's stop or a drain. */
void launcher_maybe_stopped(launcher_t *l);

/* Opens the supervision timers (3 handles, counted in l->open_handles). */
void supervise_init(launcher_t *l);
/* Stops them (daemon stop); ends still waiting for disk space are given up
 * (the next start finds their jobs running without a process). */
void supervise_stop(launcher_t *l);
/* Closes them; cb runs once per handle. */
void supervise_close(launcher_t *l, uv_close_cb cb);

/* Jobs of `running` (a previous daemon's, before launcher_adopt) without
 * a recorded pid: that daemon was killed between spawning the crawl and
 * recording its pid. A crawl of one that still runs gets its pid and start
 * time filled in, so it is adopted rather than ended lost and retried
 * beside itself. Found by the stats file its environment names (this
 * daemon's and the job's own); single-node stores only (on a shared store
 * a crawl dies with its node). */
void supervise_find_unrecorded(launcher_t *l, job_list_t *running);

/* A process of p->job is running (spawned or adopted): records the pid and
 * the job.started event (spawned only) and starts watching it. */
void supervise_started(launcher_t *l, proc_t *p);

/* A crawl's resources at its end, for its stats and its end reason. */
typedef struct supervise_usage {
  limits_mech_t mech;
  job_limits_t limits;
  jobres_usage_t usage;
  const char *log_path; /* copied; its tail tells a MemoryError under rlimits */
} supervise_usage_t;

/* Records the end of job (its contents are taken): store_job_finish, the
 * end event(s) and, when the job failed or was lost with attempts left, the
 * retry, all in one store op. from_stats: the state is decided by the stats
 * file (an adopted or vanished crawl: finished, failed, or lost when there
 * is none). end_reason ("timeout", "heartbeat", "log_limit", ... or NULL)
 * is recorded in the stats as "end_reason". hb_path may be NULL. usage
 * (NULL = unknown) adds peak memory and CPU time to the stats, and a failed
 * crawl's end reason when one of its limits explains it (limits_end_reason). */
void supervise_end(launcher_t *l, job_t *job, job_state_t state, int from_stats,
                   int exit_code, int term_signal, const char *stats_path,
                   const char *hb_path, const char *end_reason,
                   const supervise_usage_t *usage);

/* A claim came back short: next_due is the earliest not_before of the
 * pending jobs left (0 = none), delayed how many there are. */
void supervise_claimed(launcher_t *l, int64_t next_due, int64_t delayed);

/* Process start time in clock ticks since boot (/proc/PID/stat field 22):
 * with the pid it names one process for good, so a recycled pid is never
 * mistaken for our crawl. 0 when the process does not exist. */
int64_t proc_start_time(int pid);

#endif
