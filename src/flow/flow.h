/* What the API asks of the parts that own processes and timers (run/), and
 * the job counts both keep, without the API knowing run/: main.c fills a
 * flow_hooks_t with the launcher's and the scheduler's entry points when it
 * starts them, so api/ includes flow/ and never run/.
 *
 * Loop thread only. A hook that is not set (before start-up, in a tool that
 * runs no launcher) does nothing and answers 0.
 *
 * What goes through flow/: every change of the state of spiderd's objects --
 * a job (flow/jobs.h), a schedule (flow/schedules.h), a queue's settings
 * and an operator's bulk moves of its elements (flow/queues.h), users and
 * tokens (flow/auth.h), a project's versions (flow/projects.h) -- is one
 * flow function per transition, run on a store thread inside the caller's
 * store op with the event that records it; api/ and run/ parse, call it,
 * then hand what it did (flow_change_t) to flow_apply. What may stay a
 * direct store call: reads, and a queue's data path (an element put,
 * taken, acked, nacked, extended or given back), which records no event
 * and changes no setting, so there is no transition to write once.
 */
#ifndef SPIDERD_FLOW_FLOW_H
#define SPIDERD_FLOW_FLOW_H

#include <stdint.h>

struct metrics;

/* Job counts kept on the loop thread (a cache of the store's counts, updated
 * by every change this daemon makes), so daemonstatus never waits on I/O. */
typedef struct job_counters {
  int64_t pending;
  int64_t running;
  int64_t finished; /* started jobs in a final state still in history */
} job_counters_t;

struct memfit_node;

typedef struct flow_hooks {
  void *launcher;  /* the first argument of the launcher's hooks */
  void *scheduler; /* the first argument of the scheduler's */
  /* Jobs were queued on this node: claim and start them while slots are
   * free (launcher_dispatch). */
  void (*dispatch)(void *launcher);
  /* A job that waited for others is due now: claim even when every
   * pending job looked delayed (launcher_dispatch_blind). */
  void (*dispatch_due)(void *launcher);
  /* Sends sig to this node's processes of project + jobid (launcher_cancel);
   * *found = how many. With FLOW_SIG_UNCANCELLED or'd into sig, only to
   * those no cancel has reached yet. */
  int (*signal)(void *launcher, const char *project, const char *jobid, int sig, int *found);
  /* Pauses this node's processes of project + jobid (launcher_pause);
   * *found = how many; -ENOTSUP when one cannot be paused, -EBUSY while
   * one is starting. */
  int (*pause)(void *launcher, const char *project, const char *jobid, int *found);
  /* cb(ud) once the ends this node counted are in the store
   * (launcher_after_ends): 0 it will run, else it does not. */
  int (*after_ends)(void *launcher, void (*cb)(void *ud), void *ud);
  /* Is job `id` a live process of this node (launcher_job_running)? */
  int (*running_here)(void *launcher, int64_t id);
  /* A schedule changed: the scheduler ticks now (scheduler_kick). */
  void (*schedules_changed)(void *scheduler);
  void *cluster; /* the first argument of last_beat */
  /* Wall ms of this node's last heartbeat the store took; 0 = none yet
   * (cluster_last_beat). */
  int64_t (*last_beat)(void *cluster);
  void *node; /* the first argument of drain (main.c's daemon) */
  /* This node stops claiming jobs (on = 1; the crawls running go on) or
   * claims again (on = 0). 0, or SPD_ESHUTDOWN when the daemon is stopping
   * (a signal's drain ends in the stop: it cannot be undone). */
  int (*drain)(void *node, int on);
  /* This node's memory for crawls, now (launcher_memory). */
  void (*memory)(void *launcher, struct memfit_node *out);
  job_counters_t *counters; /* the node's job counts (app.h); NULL = none kept */
  struct metrics *metrics;  /* metrics.h; NULL = none */
  void *envs; /* the first argument of env_ensure (api/pyenvs.c) */
  /* Builds the Python environment of (interp, reqs) unless this node has
   * it; cb once it is (rc 0) or cannot be (why). 0, or cb never runs. */
  int (*env_ensure)(void *envs, const char *interp, const char *reqs,
                    void (*cb)(void *ud, int rc, const char *key, const char *why), void *ud);
  /* A crawl runs in environment key (on = 1) or has ended (0): an
   * environment is not removed while a crawl runs in it. */
  void (*env_use)(void *envs, const char *key, int on);
} flow_hooks_t;

/* What one state change did, as the loop must learn it. A flow function
 * fills one on its store thread (beside the store writes and events it made,
 * in the same transaction); the caller hands it to flow_apply on the loop
 * once the op has committed (never after a failed op: it was rolled back),
 * and nothing else touches the counters, the jobs_queued metric or the
 * wake-ups. Zero = nothing changed. */
typedef struct flow_change {
  int64_t queued;    /* jobs put in the queue: pending += n, jobs_queued += n */
  int64_t unqueued;  /* pending jobs that left it (claimed, cancelled): pending -= n */
  int64_t finished;  /* started jobs that reached a final state (+) or left history (-) */
  /* The store's own count, read in the same transaction, replaces the
   * loop's after the deltas above (which it includes): */
  int64_t pending_count;  /* when has_pending: pending = this */
  int64_t finished_count; /* when has_finished: finished = this (the caller adds
                             the ends it counted ahead of the store first) */
  unsigned has_pending : 1;
  unsigned has_finished : 1;
  unsigned dispatch : 1;  /* jobs may be claimable now: wake this node's launcher */
  unsigned woken : 1;     /* a waiting job is due now (jobs_after_ended): dispatch_due */
  unsigned schedules : 1; /* a schedule changed: the scheduler ticks now */
} flow_change_t;

/* Applies c on the loop: counters (never below 0), metrics, then the
 * wake-ups. */
void flow_apply(const flow_hooks_t *h, const flow_change_t *c);

/* The pending jobs this node knows of (0 when no counts are kept): the
 * launcher claims only when some may be claimable. */
int64_t flow_pending(const flow_hooks_t *h);

/* The crawls this node runs now (its launcher's processes, and the claimed
 * jobs holding a slot before theirs starts): running is theirs, not the
 * store's. */
void flow_running(const flow_hooks_t *h, int64_t n);

/* A read of jobs waits for the ends this node counted (its finished count
 * takes an end when the crawl exits, and the store a moment later), so a
 * client that saw daemonstatus count an end finds that job ended in
 * listjobs and status: 0, and cb(ud) runs once they are in the store (it
 * makes the read); 1 when none is being written: the caller reads now,
 * and cb never runs. */
int flow_after_ends(const flow_hooks_t *h, void (*cb)(void *ud), void *ud);

/* Or'd into flow_signal's sig: only the processes no cancel reached yet (a
 * job claimed when the cancel began, started since), so that one cancel is
 * one signal: Scrapy takes a second TERM as "stop now". */
#define FLOW_SIG_UNCANCELLED 0x10000

void flow_dispatch(const flow_hooks_t *h);
int flow_signal(const flow_hooks_t *h, const char *project, const char *jobid, int sig,
                int *found);
int flow_running_here(const flow_hooks_t *h, int64_t id);
int flow_pause(const flow_hooks_t *h, const char *project, const char *jobid, int *found);
void flow_schedules_changed(const flow_hooks_t *h);
int64_t flow_last_beat(const flow_hooks_t *h);
/* -ENOTSUP when no daemon runs the hook. */
int flow_drain(const flow_hooks_t *h, int on);

#endif
