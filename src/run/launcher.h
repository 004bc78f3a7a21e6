/* The launcher: claims pending jobs for free slots and supervises their
 * processes (spawn, log, cancel, reap, adopt after a crash).
 *
 * Dispatch is event-driven: launcher_dispatch() after a job is queued and every
 * exit frees a slot, so a job starts the moment a slot is free. The launcher
 * is the only owner of crawl processes and runs on the loop thread only.
 *
 * Every process runs `<python> -m spiderd_runner crawl SPIDER ...` with
 * Scrapyd's argv and environment (scrapyd-api.md §5.1-5.2), in its own
 * session (so a forced cancel can KILL the whole group), stdout and stderr
 * appended to the job's log file. Its crawl stats are read from the stats
 * file the runner writes (SPIDERD_STATS_FILE). A project stored as a
 * spiderd.json archive (store/marchive.h) runs its spider's command instead,
 * in the archive extracted under <dbs_dir>/spiders, with the same log,
 * stats file and variables, and signals sent to its whole group
 * (docs/spiders.md); the first job of each stored archive waits on libuv's
 * thread pool while it is extracted, holding its slot.
 *
 * A Scrapy crawl forks from its version's warm start template when one is
 * ready (run/warm.h): the same argv, environment and log, the daemon's
 * child all the same, watched through a pidfd instead of libuv's process
 * handle; the job holds its slot while the template forks it.
 *
 * A job's state changes (claim, start, end, retry, give back) are flow's
 * (flow/claim.h, flow/jobs.h), applied on the loop through flow_apply;
 * timeouts, heartbeats (SPIDERD_HEARTBEAT_FILE) and the recording of
 * starts and ends are the supervisor's (run/supervise.h), which sits below
 * the launcher and never calls it.
 *
 * Ownership: the launcher borrows cfg, the store pool and flow for its
 * whole life; launcher_free() frees it once its handles are closed.
 */
#ifndef SPIDERD_RUN_LAUNCHER_H
#define SPIDERD_RUN_LAUNCHER_H

#include <stdint.h>
#include <uv.h>

#include "config.h"
#include "core/job.h"
#include "flow/flow.h"
#include "flow/memfit.h"
#include "store/async.h"

typedef struct launcher launcher_t;

int launcher_init(launcher_t **out, uv_loop_t *loop, const config_t *cfg,
                  store_pool_t *store, const flow_hooks_t *flow);

/* Takes over jobs a previous daemon left running (list from
 * store_jobs_list, state running; a job without a recorded pid whose crawl
 * still runs is found first, supervise_find_unrecorded): a process that
 * still lives with the same
 * start time is adopted and watched until it exits; any other is ended at
 * once as finished (when its stats file shows it finished) or lost. Takes
 * ownership of the list's jobs. */
void launcher_adopt(launcher_t *l, job_list_t *running);

/* Claims and starts pending jobs while slots are free, when this node's
 * counters show some claimable: after this node queued jobs, and after
 * every exit. Cheap to call often. */
void launcher_dispatch(launcher_t *l);
/* As launcher_dispatch, but claims without trusting this node's counters,
 * which cannot show jobs another node queued (a notice says it did, or may
 * have) or a delayed retry that came due. */
void launcher_dispatch_blind(launcher_t *l);
/* The store is shared with other nodes: ends are checked against a reap,
 * and claimed jobs' eggs are fetched from the store into eggs_dir. */
void launcher_set_shared(launcher_t *l, int shared);
/* KILLs every crawl at once (this node was declared dead: its jobs are
 * lost and may run elsewhere already). */
void launcher_kill_all(launcher_t *l);

/* Sends sig to every running process of project + jobid (the process only, as
 * Scrapyd: Scrapy drains on the first INT/TERM and forces on the second).
 * SIGKILL, or cancel_grace seconds after the first cancel, KILLs the whole
 * process group. *found = number of processes signalled. */
int launcher_cancel(launcher_t *l, const char *project, const char *jobid,
                    int sig, int *found);

/* Pauses every running process of project + jobid (flow/pause.h): SIGTERM
 * once, its group KILLed cancel_grace later, its end recorded as paused.
 * *found = processes asked. -ENOTSUP when one cannot be paused (a command
 * spider not declared resumable), -EBUSY while one is still starting. */
int launcher_pause(launcher_t *l, const char *project, const char *jobid, int *found);

/* fn(ud, job) runs on the loop after each job's end (and any retry it
 * spawned) is committed, e.g. to wake modules that act on job events. */
void launcher_on_end(launcher_t *l, void (*fn)(void *ud, const job_t *job), void *ud);

/* fn(on_end's ud, job) runs on the loop when a crawl started or was adopted. */
void launcher_on_start(launcher_t *l, void (*fn)(void *ud, const job_t *job));

/* Number of crawl processes alive. */
unsigned launcher_running(const launcher_t *l);

/* This node's memory for crawls, now (flow/memfit.h, run/memory.h). */
void launcher_memory(const launcher_t *l, memfit_node_t *out);

/* Is the job with this row id a process of this launcher that has not
 * exited (spawned or adopted)? */
int launcher_job_running(const launcher_t *l, int64_t job_id);

/* cb(ud) once the ends of the crawls that exited so far are in the store
 * (supervise_after_ends): 0 it will run, 1 nothing to wait for, -ENOMEM. */
int launcher_after_ends(launcher_t *l, void (*cb)(void *ud), void *ud);

/* The secret that signs each job's SPIDERD_TOKEN (flow/jobtoken.h);
 * borrowed for the launcher's life. NULL: jobs get no token. */
void launcher_set_job_secret(launcher_t *l, const char *secret);
/* Counts starts, ends (by final state) and times claims into m (metrics.h),
 * which outlives the launcher. */
struct metrics;
void launcher_set_metrics(launcher_t *l, struct metrics *m);

/* Draining: from now on claims nothing, not even jobs already due (they
 * stay pending, for other nodes or for launcher_undrain), while the crawls
 * running go on to their end. done(ud), when not NULL, runs once no crawl
 * runs and no claim or end is in flight: at once, before this returns,
 * when the launcher is idle already. A second drain replaces done. */
void launcher_drain(launcher_t *l, void (*done)(void *ud), void *ud);
/* Claims again, at once (every pending job due is looked for, wherever it
 * was queued); a pending done of launcher_drain never runs. */
void launcher_undrain(launcher_t *l);
int launcher_draining(const launcher_t *l);

/* Graceful stop: no new starts; TERM every crawl (recorded as cancelled),
 * KILL after shutdown_grace; done(ud) runs once every process has exited and
 * its end is committed to the store. */
void launcher_stop(launcher_t *l, void (*done)(void *ud), void *ud);

/* Frees the launcher after launcher_stop completed (handles close async). */
void launcher_free(launcher_t *l);

#endif
