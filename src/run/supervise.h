/* The supervisor: watches the launcher's crawls while they run (per-job
 * timeouts, crawl heartbeats, resource limits), records their starts and
 * ends through flow/jobs.h (each end with its retry, in one store op), and
 * wakes the launcher when a delayed retry comes due.
 *
 * It sits below the launcher: launcher.c spawns, reaps, cancels and adopts
 * processes and hands them here (supervise_started, supervise_end); this
 * file never calls the launcher, and reaches it only through the two
 * up-calls of supervisor_t (wake, settled). Both run on the loop thread
 * only. What an end changed reaches the job counts through flow_apply.
 *
 * Ownership: a proc_t owns its job and paths; supervise_end() takes the
 * job's contents it is given. The supervisor borrows everything it points
 * at for its whole life.
 */
#ifndef SPIDERD_RUN_SUPERVISE_H
#define SPIDERD_RUN_SUPERVISE_H

#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "core/limits.h"
#include "flow/flow.h"
#include "run/jobres.h"
#include "store/pyenv.h"
#include "store/async.h"

typedef struct proc {
  struct proc *next;
  struct launcher *l;   /* the launcher that spawned or adopted it */
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
  /* Pause (flow/pause.h): the crawl keeps its state in state_dir (owned;
   * NULL = it cannot be paused), and a pause asked for stops it with
   * SIGTERM: its end is then recorded as paused. */
  char *state_dir;
  int pausing;
  char env_key[PYENV_KEY_LEN + 1]; /* the environment it runs in ("" = none) */
} proc_t;

typedef struct supervisor {
  uv_loop_t *loop;
  const config_t *cfg;
  store_pool_t *store;
  const flow_hooks_t *flow; /* where what an end changed is applied */
  jobres_t *res;            /* the launcher's: how limits are enforced */
  const char *stats_dir;    /* <dbs_dir>/run: each crawl's stats file */
  struct metrics *metrics;  /* NULL = none */
  /* The launcher's crawls (its list, which it links and unlinks). */
  proc_t *procs;
  unsigned nprocs;
  int shared;         /* the store is shared with other nodes */
  int stopping;       /* supervise_stop ran */
  /* Up-calls to the launcher (the only ones): wake claims pending jobs
   * (launcher_dispatch); settled runs after every commit that may finish
   * the daemon's stop or a drain. */
  void (*wake)(void *ud);
  void (*settled)(void *ud);
  void *ud;
  void (*on_end)(void *ud, const job_t *job); /* after a job's end is committed */
  void *on_end_ud;
  void (*on_start)(void *ud, const job_t *job); /* a crawl started or was adopted */
  unsigned ends_in_flight;
  /* Ends in the store's queue (not those waiting for disk), in order of
   * their seq, and the reads that wait for them (supervise_after_ends). */
  struct end_op *ends_writing;
  struct ends_waiter *waiters, *waiters_last;
  uint64_t end_seq; /* the last seq given to an end written */
  /* Delayed jobs (retries waiting out their backoff): they are pending but
   * not claimable, so the counters alone cannot tell dispatch to claim. */
  int64_t delayed;    /* pending jobs known to be not yet due */
  int due_check;      /* a delayed job may be due: claim even if none seem pending */
  int64_t due_at;     /* wall ms the due timer is armed for; 0 = unarmed */
  uv_timer_t due_timer;
  uv_timer_t watch_timer; /* one sweep for every job's timeout and heartbeat */
  /* Ends the store could not record for a full disk, written again every
   * END_RETRY_MS until they are; counted in ends_in_flight. */
  struct end_op *ends_waiting;
  uv_timer_t end_timer;
  int64_t next_sweep; /* mono */
  /* The state directory of the paused crawl whose end supervise_end
   * records next (taken by it, malloc'd): set just before that call. */
  char *state_dir;
  uint64_t rng;       /* retry jitter */
} supervisor_t;

/* Runs cb(ud) once every end this node counted so far (daemonstatus's
 * finished counts an end when the crawl exits) is in the store, or has met a
 * full disk or an unreachable store: a read submitted from cb lists each of
 * them ended. 0: cb will run (at the latest at supervise_stop); 1: nothing
 * to wait for, cb does not run (the caller goes on); -ENOMEM. */
int supervise_after_ends(supervisor_t *sv, void (*cb)(void *ud), void *ud);

/* KILLs the crawl's whole process group. */
void supervise_kill_group(proc_t *p);
/* Sends sig to the crawl: to its process, or to its group when
 * p->group_signals. */
void supervise_signal(proc_t *p, int sig);

/* Opens the supervision timers of sv, whose other fields the launcher
 * filled; returns how many handles (supervise_close closes them). */
int supervise_init(supervisor_t *sv);
/* Stops them (daemon stop); ends still waiting for disk space are given up
 * (the next start finds their jobs running without a process). */
void supervise_stop(supervisor_t *sv);
/* Closes them; cb runs once per handle, with the handle's data set to
 * sv->ud (the owner: the timers' own callbacks will not run again). */
void supervise_close(supervisor_t *sv, uv_close_cb cb);

/* Jobs of `running` (a previous daemon's, before launcher_adopt) without
 * a recorded pid: that daemon was killed between spawning the crawl and
 * recording its pid. A crawl of one that still runs gets its pid and start
 * time filled in, so it is adopted rather than ended lost and retried
 * beside itself. Found by the stats file its environment names (this
 * daemon's and the job's own); single-node stores only (on a shared store
 * a crawl dies with its node). */
void supervise_find_unrecorded(supervisor_t *sv, job_list_t *running);

/* A process of p->job is running (spawned or adopted): records the pid and
 * the job.started event (spawned only) and starts watching it. */
void supervise_started(supervisor_t *sv, proc_t *p);

/* A crawl's resources at its end, for its stats and its end reason. */
typedef struct supervise_usage {
  limits_mech_t mech;
  job_limits_t limits;
  jobres_usage_t usage;
  const char *log_path; /* copied; its tail tells a MemoryError under rlimits */
} supervise_usage_t;

/* Records the end of job (its contents are taken); state JOB_PAUSED records
 * a pause (with sv->state_dir, when set): store_job_finish, the
 * end event(s) and, when the job failed or was lost with attempts left, the
 * retry, all in one store op. from_stats: the state is decided by the stats
 * file (an adopted or vanished crawl: finished, failed, or lost when there
 * is none). end_reason ("timeout", "heartbeat", "log_limit", ... or NULL)
 * is recorded in the stats as "end_reason". hb_path may be NULL. usage
 * (NULL = unknown) adds peak memory and CPU time to the stats, and a failed
 * crawl's end reason when one of its limits explains it (limits_end_reason). */
void supervise_end(supervisor_t *sv, job_t *job, job_state_t state, int from_stats,
                   int exit_code, int term_signal, const char *stats_path,
                   const char *hb_path, const char *end_reason,
                   const supervise_usage_t *usage);

/* A claim came back short: next_due is the earliest not_before of the
 * pending jobs left (0 = none), delayed how many there are. */
void supervise_claimed(supervisor_t *sv, int64_t next_due, int64_t delayed);

/* Process start time in clock ticks since boot (/proc/PID/stat field 22):
 * with the pid it names one process for good, so a recycled pid is never
 * mistaken for our crawl. 0 when the process does not exist. */
int64_t proc_start_time(int pid);

#endif
