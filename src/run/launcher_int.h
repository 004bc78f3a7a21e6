/* The launcher's insides, shared by run/launcher.c (claims, starts, ends)
 * and run/launcher_prep.c (what a claimed job waits for before it starts:
 * its command project extracted, its environment built). Not an interface:
 * only those two files include it. */
#ifndef SPIDERD_RUN_LAUNCHER_INT_H
#define SPIDERD_RUN_LAUNCHER_INT_H

#include <uv.h>

#include "core/job.h"
#include "core/limits.h"
#include "run/done.h"
#include "run/jobres.h"
#include "run/launcher.h"
#include "run/supervise.h"

struct launcher {
  uv_loop_t *loop;
  const config_t *cfg;
  store_pool_t *store;
  const flow_hooks_t *flow; /* every job's state change is applied there */
  supervisor_t sv;    /* watches the crawls: sv.procs is the list of them */
  /* Claimed jobs whose command project is being extracted on libuv's
   * thread pool, or that a template forks: they hold a slot but are not
   * processes yet. */
  struct prep *preps;
  unsigned npreps;
  unsigned max_proc;
  int claiming;       /* a claim is in flight */
  int dispatch_again; /* a kick arrived while claiming */
  int capped;         /* the last claim saw an account's cap (jobs_claim_t) */
  int stopping;
  int draining;       /* claims nothing (launcher_drain) */
  run_done_t drained; /* once nothing runs while draining; then disarmed */
  int open_handles;   /* launcher timers still to close */
  uv_timer_t stop_timer;
  run_done_t stopped;
  char *cwd;
  char *stats_dir;
  char *work_dir;     /* <dbs_dir>/spiders: command projects, extracted */
  char *envs_dir;     /* <dbs_dir>/envs: versions' Python environments */
  int64_t left[16];   /* jobs this node left for another (no environment) */
  unsigned nleft;
  const char *job_secret; /* borrowed: signs each job's SPIDERD_TOKEN (NULL: none) */
  int shared;         /* the store is shared with other nodes (run/cluster.c) */
  struct metrics *metrics; /* borrowed; NULL = none (launcher_set_metrics) */
  struct warm *warm;  /* templates for warm starts; NULL = cold starts only */
  jobres_t res;       /* how memory, CPU and process limits are enforced */
  job_limits_t limit_defaults; /* [spiderd] job_memory_limit, ... */
  int64_t mem_waiting; /* the last claim's least expected memory that did not fit */
};

/* A job whose command project is extracted on libuv's thread pool before it
 * starts (the first job of each stored archive): the loop keeps serving. */
typedef struct prep {
  uv_work_t req;
  struct prep *next;
  launcher_t *l;
  job_t job; /* owned; read-only while the work runs */
  char *egg;
  int rc;
  int cancelled; /* cancel asked, or this node was declared dead */
  int cancel_sig; /* the signal asked for */
  char err[256];
  struct start *st; /* a warm start's, while its template forks; else NULL */
  char *interp, *reqs; /* an environment being built for the job (prep_env) */
  int abandoned;       /* the launcher stopped first: the job went back */
} prep_t;

/* launcher.c */
void launcher_running_changed(launcher_t *l);
void launcher_start_job(launcher_t *l, job_t *j);
void launcher_requeue_one(launcher_t *l, job_t *j);
void launcher_prep_unlink(launcher_t *l, prep_t *pr);
void launcher_maybe_stopped(launcher_t *l);

/* launcher_prep.c: takes j into preparation when its command project is not
 * extracted yet or its environment not built here: 1, and the preparation
 * starts it. 0: start it now. */
int launcher_prep_start(launcher_t *l, job_t *j);

#endif
