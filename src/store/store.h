/* The store: the single source of truth for jobs, schedules and their runs,
 * events, leases, task queues, nodes and (on a shared store) eggs. One
 * interface, one table of operations per backend (as SQLite's VFS), the
 * ops listed once in store/ops.h: SQLite (store/sqlite/, one node), and
 * PostgreSQL (store/pg/) and Redis (store/redis/), shared by many nodes.
 *
 * The API is synchronous and must never be called on the loop thread: the
 * loop reaches it through store_submit() (store/async.h), which runs calls on
 * store threads. Each store_t is one connection and is used by one thread at
 * a time.
 *
 * Ownership: jobs and lists filled by these functions belong to the caller
 * (job_release / job_list_release); input pointers are only borrowed.
 *
 * Transactions: every call outside store_tx_begin/commit is its own
 * transaction. Inside one, store_sp_* mark a savepoint so one failed
 * operation of a group commit is rolled back alone.
 *
 * Errors: 0, -ENOENT (no such row), -EINVAL (bad argument), SPD_ESTORE
 * (database failure; the backend logs the reason).
 */
#ifndef SPIDERD_STORE_H
#define SPIDERD_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "core/event.h"
#include "core/job.h"
#include "core/principal.h"
#include "core/queue.h"
#include "core/schedule.h"

typedef struct store store_t;

/* Opens a store. url: "sqlite:PATH", "sqlite://PATH" or a bare PATH
 * (SQLite), "postgresql://..." (any libpq URL, plus schema=NAME) or
 * "redis://host:port/db?prefix=NAME". Creates the schema (versioned
 * migrations, applied here) and, for SQLite, the file and its directory's
 * missing last component. SQLite runs in WAL mode with synchronous=NORMAL:
 * a commit survives kill -9 of the daemon.
 * Returns 0 and *out, or a negative code with a reason in err. */
int store_open(const char *url, store_t **out, char *err, size_t errlen);
void store_close(store_t *s);

int store_tx_begin(store_t *s);   /* a write transaction (BEGIN IMMEDIATE) */
int store_tx_commit(store_t *s);
int store_tx_rollback(store_t *s);
int store_sp_begin(store_t *s);   /* SAVEPOINT; only inside a transaction */
int store_sp_release(store_t *s);
int store_sp_rollback(store_t *s); /* rolls back to and releases the savepoint */

/* ---- jobs ---- */

/* Inserts j (state as given, normally JOB_PENDING); sets j->id, and
 * j->created_ms when it is 0. Job ids are not unique (as in Scrapyd).
 *
 * Unique jobs: a pending or running job with a unique_key holds that key
 * within its project until it ends (any final state frees it; a requeue
 * keeps it). Inserting a pending or running job whose unique_key is held
 * inserts nothing and returns SPD_ECONFLICT with j->id set to the holder's
 * id (the rest of j untouched). The check and the insert are one atomic
 * step, so of two concurrent inserts with one key exactly one succeeds,
 * whatever the connections. A NULL key never conflicts; an empty one is
 * -EINVAL. A job inserted in a final state takes no key. */
int store_job_insert(store_t *s, job_t *j);

/* Atomically moves up to max pending jobs to running on `node`, highest
 * priority first, then lowest id (first come, first served), across all
 * projects; sets node and start_ms = now_ms. Appends the claimed jobs to out
 * (which may be empty or hold jobs already). 0 jobs is not an error. */
int store_job_claim(store_t *s, const char *node, size_t max, int64_t now_ms,
                    job_list_t *out);

/* A project's jobs (spider NULL) or one spider's. */
typedef struct job_key {
  const char *project;
  const char *spider;
} job_key_t;

/* store_job_claim, skipping pending jobs that match any of skip[0..nskip)
 * (concurrency limits at their maximum). nskip 0 is store_job_claim. At
 * most STORE_CLAIM_SKIP_MAX keys (-EINVAL above). */
#define STORE_CLAIM_SKIP_MAX 16
int store_job_claim_skip(store_t *s, const char *node, size_t max, int64_t now_ms,
                         const job_key_t *skip, size_t nskip, job_list_t *out);

/* Serializes, to the end of the current transaction, every claim that
 * applies concurrency limits on every connection sharing the store, so the
 * running counts it reads stay true until it commits. Inside a transaction
 * only. */
int store_claim_lock(store_t *s);

/* Records the process of a running job. */
int store_job_started(store_t *s, int64_t id, int pid, int64_t pid_start);

/* Puts a running job that never got a process back to pending (its claim is
 * undone: node, start_ms, pid cleared; priority and id kept, so it keeps its
 * place). -ENOENT when no running job has this id. */
int store_job_requeue(store_t *s, int64_t id);

/* Ends a job: state must be final; stats may be NULL. -ENOENT if no row. */
int store_job_finish(store_t *s, int64_t id, job_state_t state, int64_t end_ms,
                     int exit_code, int term_signal, const json_t *stats);

/* Cancels every pending job with this project and job id (state cancelled,
 * end_ms = now_ms). *count = how many. */
int store_job_cancel_pending(store_t *s, const char *project, const char *jobid,
                             int64_t now_ms, int *count);

int store_job_get(store_t *s, int64_t id, job_t *out);

/* Scrapyd's status.json lookup: among jobs with this job id (and project
 * when not NULL), the state of the first found in the order finished
 * (any final state with start_ms != 0), running, pending. -ENOENT when none.
 * A pending job cancelled before it started does not count. */
int store_job_status(store_t *s, const char *project, const char *jobid,
                     job_state_t *out);

typedef struct job_filter {
  const char *project;   /* NULL = all */
  const char *jobid;     /* NULL = all */
  const char *node;      /* NULL = all */
  unsigned states;       /* bit mask of (1u << job_state_t); 0 = all */
  int started_only;      /* 1 = only jobs with start_ms != 0 */
  size_t limit;          /* 0 = no limit */
  /* The native API's filters. Any of these set switches the order to
   * newest id first (a stable cursor order). */
  const char *spider;    /* NULL = all */
  int64_t schedule_id;   /* 0 = all */
  int64_t parent_id;     /* 0 = all */
  int64_t created_from_ms, created_to_ms; /* [from, to); 0 = unbounded */
  int64_t before_id;     /* > 0: only ids below (the next page's cursor) */
  int newest_first;      /* 1 = order by id DESC whatever else is set */
  /* Text search: jobs whose Scrapyd job id, spider, project or one of
   * whose args' values contains text, ASCII letters compared without
   * case (other bytes as they are). NULL or "" = all. At most
   * JOB_FILTER_TEXT_MAX bytes (-EINVAL above). Scans the rows the other
   * conditions leave. */
  const char *text;
  /* A set of projects (a token limited to several): with nprojects > 0,
   * only jobs whose project is one of projects[0..nprojects); at most
   * JOB_FILTER_PROJECTS_MAX, none NULL or "" (-EINVAL). Applies with
   * `project` when both are set. Not a native-API field: it leaves the
   * order to the other fields, so a limited caller sees the lists in the
   * order an unlimited one does. */
  const char *const *projects;
  size_t nprojects; /* 0 = no such limit (project above still applies) */
  /* A native-API field: jobs whose meta has, for each i < nmeta, the
   * string meta[2i + 1] at top-level key meta[2i] (string equality: a
   * number 5 is not "5"). At most JOB_FILTER_META_MAX pairs; keys valid
   * by job_meta_key_valid (-EINVAL else). */
  const char *const *meta;
  size_t nmeta;
  /* A native-API field: 1 = test runs only, -1 = no test runs, 0 = both,
   * except with schedule_id set, where 0 is -1: a test run is no part of
   * its schedule's history (its overlap, its listings, its figures). */
  int test;
  /* A native-API field: jobs whose health (flow/health.h) is this one of
   * "ok", "degraded", "broken", or "none" (not rated). NULL = all. */
  const char *health;
  /* With project, spider and only final states: newest end first (a
   * project/spider's history index), not newest id; a backend without such
   * an index keeps the id order. For the runs before a job, not for pages. */
  int ended_first;
} job_filter_t;

#define JOB_FILTER_TEXT_MAX 200
#define JOB_FILTER_META_MAX 8
#define JOB_META_KEY_MAX 128

/* May key be a meta filter's key: 1 to JOB_META_KEY_MAX bytes, no control
 * character, no '"' nor '\\' (the SQL backends quote it in a JSON path)? */
int job_meta_key_valid(const char *key);
#define JOB_FILTER_PROJECTS_MAX 64

/* Lists jobs matching f, appended to out. Order: pending jobs by priority
 * DESC, id ASC; running by start_ms ASC, id ASC; final states by end_ms DESC,
 * id DESC. When several states are asked for, groups come in state order.
 * With any native-API field set, newest id first. */
int store_jobs_list(store_t *s, const job_filter_t *f, job_list_t *out);

/* Scrapyd's three job lists (listjobs.json, the /jobs page) read a page at
 * a time, so a million jobs never sit in memory at once. A group is one of
 * store_jobs_list's state groups, in its order: JOB_GROUP_PENDING (priority
 * DESC, id), JOB_GROUP_RUNNING (start_ms, id), JOB_GROUP_ENDED (every final
 * state of a job that started, end_ms DESC, id DESC). */
enum { JOB_GROUP_PENDING, JOB_GROUP_RUNNING, JOB_GROUP_ENDED, JOB_NGROUPS };

/* Where the next page of a group starts: past the job with this id and sort
 * key (priority for pending, start_ms for running, end_ms for ended). A
 * zeroed key is the group's start. Pages are keyset pages: a job that stays
 * in its group is read once, whatever moves around it between pages. */
typedef struct job_page_key {
  int64_t id;      /* 0 = from the start */
  double priority; /* JOB_GROUP_PENDING */
  int64_t t_ms;    /* JOB_GROUP_RUNNING: start_ms; JOB_GROUP_ENDED: end_ms */
} job_page_key_t;

#define JOB_PAGE_MAX 10000

/* The key of job j in group (for a backend that pages by the last job). */
static inline void job_page_key_of(job_page_key_t *k, int group, const job_t *j) {
  k->id = j->id;
  k->priority = j->priority;
  k->t_ms = group == JOB_GROUP_RUNNING ? j->start_ms : j->end_ms;
}

/* Appends to out at most limit (1..JOB_PAGE_MAX) jobs of group (of project
 * when not NULL) that come after *after, in the group's order, and moves
 * *after past what was read. *more = 0 once the group has nothing past
 * *after; a page may hold fewer than limit jobs, even none, with *more = 1
 * (a backend that bounds what one call reads). */
int store_jobs_page(store_t *s, int group, const char *project, size_t limit,
                    job_page_key_t *after, job_list_t *out, int *more);

/* Counts per state (counts[JOB_NSTATES]); final states count only jobs that
 * started (start_ms != 0). project NULL = all projects. */
int store_job_counts(store_t *s, const char *project, int64_t counts[JOB_NSTATES]);

/* store_job_counts with final states counted only when they ended at or
 * after ended_since_ms (end_ms >= it), started or not: a pending job
 * cancelled in the window counts as cancelled. Pending and running are
 * counted as they are now. ended_since_ms 0 is store_job_counts. Reads the
 * ended jobs of the window only (the end-time index). */
int store_job_counts_since(store_t *s, const char *project, int64_t ended_since_ms,
                           int64_t counts[JOB_NSTATES]);

/* One time bucket of store_job_throughput. */
typedef struct job_bucket {
  int64_t t_ms;     /* the bucket's start */
  int64_t finished; /* jobs that ended finished in [t_ms, t_ms + step) */
  int64_t failed;   /* jobs that ended failed */
  int64_t items;    /* the stats' item_scraped_count of the jobs that ended
                     * in the bucket, whatever their state (0 when absent) */
} job_bucket_t;

#define JOB_BUCKETS_MAX 2000

/* Jobs that ended in [from_ms, to_ms), by end time, in n buckets of
 * step_ms: buckets[i] covers [from_ms + i*step_ms, from_ms + (i+1)*step_ms)
 * (the last one is cut at to_ms). The caller gives buckets[n] (n =
 * ceil((to_ms - from_ms) / step_ms), at most JOB_BUCKETS_MAX, else
 * -EINVAL); every bucket is filled, empty ones with zeros. project NULL =
 * all. Reads the ended jobs of the window only (the end-time index). */
int store_job_throughput(store_t *s, const char *project, int64_t from_ms, int64_t to_ms,
                         int64_t step_ms, job_bucket_t *buckets, size_t n);

/* ---- job statistics (store/stats.c) ---- */

typedef enum {
  JOB_STATS_BY_PROJECT,
  JOB_STATS_BY_SPIDER,   /* (project, spider) */
  JOB_STATS_BY_SCHEDULE, /* schedule_id; jobs no schedule fired are left out */
  JOB_STATS_BY_ACCOUNT,  /* the account of the job's project ("" for none) */
  JOB_STATS_NBY
} job_stats_by_t;

/* Which ended jobs count: those that started and ended in [from_ms, to_ms)
 * (end time), of project / spider / schedule when set; never test runs. */
typedef struct job_stats_query {
  const char *project;  /* NULL = all */
  const char *spider;   /* NULL = all */
  int64_t schedule_id;  /* 0 = all */
  const char *account;  /* NULL = all; else the jobs of this account's projects */
  const json_t *accounts; /* the accounts (core/account.h): needed by account and
                             BY_ACCOUNT (-EINVAL without) */
  int64_t from_ms, to_ms;
  job_stats_by_t by;
} job_stats_query_t;

/* One group's figures. Durations are end - start of the group's jobs;
 * percentiles are nearest-rank (the ceil(p * n)-th shortest). */
typedef struct job_stats_group {
  char *project;       /* BY_PROJECT, BY_SPIDER */
  char *spider;        /* BY_SPIDER */
  int64_t schedule_id; /* BY_SCHEDULE */
  char *account;       /* BY_ACCOUNT ("" : projects of no account) */
  int64_t runs[JOB_NSTATES]; /* final states only */
  int64_t ended;             /* the sum of runs */
  int64_t dur_p50_ms, dur_p95_ms, dur_max_ms;
  int64_t items;             /* the stats' item_scraped_count, summed */
  int64_t last_success_ms;   /* end of the newest finished job; 0 = none */
  int64_t *durs;             /* the durations, sorted (freed by job_stats_release) */
  size_t ndurs, durcap;
} job_stats_group_t;

typedef struct job_stats {
  job_stats_group_t *v;
  size_t n, cap;
  int64_t scanned; /* jobs read from the window */
} job_stats_t;

/* One ended job as the stats read it (strings borrowed for the call). */
typedef struct job_stats_row {
  const char *project, *spider;
  int64_t schedule_id;
  int state;
  int64_t start_ms, end_ms;
  int64_t items; /* the stats' "items", else item_scraped_count, else 0 */
} job_stats_row_t;
typedef int (*job_stats_row_fn)(void *ud, const job_stats_row_t *row);

/* Adds the figures of the jobs q selects to out (zeroed, or filled by an
 * earlier call with the same by and window over other projects: groups
 * are keyed, so calls over disjoint projects add up). Walks the window
 * down the end-time index a page at a time (JOB_GROUP_ENDED through
 * store_jobs_page, so every backend's own index), newest first, and stops
 * past from_ms: the cost is the window's jobs, not the history's. Groups
 * come out in key order. -EINVAL for a bad query. */
int store_job_stats(store_t *s, const job_stats_query_t *q, job_stats_t *out);
void job_stats_release(job_stats_t *st);

/* Keeps the `keep` most recently ended started jobs (final states) and
 * deletes older ones, along with cancelled-before-start jobs older than the
 * oldest kept. keep 0 = keep all. *deleted = rows removed (may be NULL). */
int store_trim_finished(store_t *s, int keep, int *deleted);

/* Replaces a job's meta with meta (an object; NULL = none): jobs.meta
 * merges in the flow and writes the result here. -ENOENT if no row. */
int store_job_set_meta(store_t *s, int64_t id, const json_t *meta);

/* A history update of an ended job: its state, whether it was corrected
 * and from what (original), and its note (NULL = none), written as given.
 * -ENOENT when there is no such job in a final state. */
int store_job_set_history(store_t *s, int64_t id, job_state_t state, int corrected,
                          job_state_t original, const char *note);

/* A job's health and its reasons (an array of strings; NULL = none):
 * health one of "ok", "degraded", "broken", or NULL (not rated).
 * -ENOENT if no row. */
int store_job_set_health(store_t *s, int64_t id, const char *health, const json_t *reasons);
/* Replaces a paused job's segments (an array; NULL = none). -ENOENT if no row. */
int store_job_set_segments(store_t *s, int64_t id, const json_t *segments);

/* A paused job is pending again (jobs.resume): no node, pid, start, end or
 * exit any more, due at once; its segments stay. -ENOENT when it is not
 * paused. */
int store_job_resume(store_t *s, int64_t id);

/* The pending jobs whose `after` names job upstream (jobs it waits for),
 * by id, appended to out. */
int store_jobs_waiting(store_t *s, int64_t upstream, job_list_t *out);
/* A pending job is due from now_ms on (a waiting job released). -ENOENT
 * when it is not pending. */
int store_job_wake(store_t *s, int64_t id, int64_t now_ms);

/* Records a sign of life of a running job. -ENOENT when it is not running. */
int store_job_heartbeat(store_t *s, int64_t id, int64_t now_ms);

/* The earliest not_before_ms later than now_ms among pending jobs (*out = 0
 * when there is none): when the dispatcher must look again. */
int store_job_next_due(store_t *s, int64_t now_ms, int64_t *out);

/* ---- schedules ---- */

/* Inserts sc; sets sc->id and created_ms/updated_ms (now when 0).
 * SPD_ECONFLICT when the name is taken. */
int store_schedule_insert(store_t *s, schedule_t *sc);
/* Replaces every field of schedule sc->id (bookkeeping included).
 * -ENOENT when no such schedule; SPD_ECONFLICT when the new name is taken. */
int store_schedule_update(store_t *s, const schedule_t *sc);
/* Deletes a schedule and its runs (jobs and events stay). -ENOENT. */
int store_schedule_delete(store_t *s, int64_t id);
int store_schedule_get(store_t *s, int64_t id, schedule_t *out);          /* -ENOENT */
int store_schedule_find(store_t *s, const char *name, schedule_t *out);   /* -ENOENT */
/* Schedules with id > after_id in id order, at most limit (0 = all). */
int store_schedules_list(store_t *s, int64_t after_id, size_t limit,
                         schedule_list_t *out);
/* A schedule's state: an opaque text its crawls hand on from one run to
 * the next (the Sneakpeek face's scraper state), kept apart from the
 * definition so an update of the schedule leaves it alone. *state is
 * malloc'd, NULL when none was set. -ENOENT when no such schedule. */
int store_schedule_state_get(store_t *s, int64_t id, char **state);
/* Sets it (NULL clears it). -ENOENT when no such schedule. */
int store_schedule_state_set(store_t *s, int64_t id, const char *state);

/* ---- runs: a schedule's due times, materialised ---- */

/* Adds upcoming runs of a schedule (due[i], fire[i]) and sets its
 * horizon_ms and refill_ms. A due time the schedule already has is left as
 * it is, so a run is never fired twice. -ENOENT when no such schedule. */
int store_runs_add(store_t *s, int64_t schedule_id, const int64_t *due,
                   const int64_t *fire, size_t n, int64_t horizon_ms, int64_t refill_ms);
/* Deletes a schedule's upcoming runs, sets its horizon to from_ms (runs are
 * computed again after it) and asks for a refill now (refill_ms 0): after
 * an update, a pause or a resume. -ENOENT when no such schedule. */
int store_runs_clear(store_t *s, int64_t schedule_id, int64_t from_ms);
/* Unpaused schedules whose refill_ms <= now_ms, most overdue first, at most
 * limit (0 = all), appended to out. */
int store_schedules_refill(store_t *s, int64_t now_ms, size_t limit,
                           schedule_list_t *out);
/* Notes why an upcoming run waits (its reason); it stays upcoming.
 * -ENOENT when it is not upcoming. */
int store_run_defer(store_t *s, int64_t run_id, const char *reason);
/* Upcoming runs with fire_ms <= until_ms, earliest first, at most max,
 * appended to out. */
int store_runs_due(store_t *s, int64_t until_ms, size_t max, sched_run_list_t *out);

typedef struct run_filter {
  int64_t schedule_id;  /* 0 = all */
  unsigned states;      /* bit mask of (1u << run_state_t); 0 = all */
  int64_t from_ms;      /* due_ms >= from; 0 = unbounded */
  int64_t to_ms;        /* due_ms < to; 0 = unbounded */
  int64_t after_id;     /* id > after_id */
  size_t limit;         /* 0 = no limit */
} run_filter_t;

/* Runs matching f in due time order (then id). */
int store_runs_list(store_t *s, const run_filter_t *f, sched_run_list_t *out);

/* Ends an upcoming run as fired (with job_id), missed or skipped, and sets
 * the schedule's last_due_ms. -ENOENT when the run is no longer upcoming
 * (it ended already: each run ends once). */
int store_run_end(store_t *s, int64_t run_id, run_state_t state, int64_t job_id,
                  const char *reason, int64_t now_ms);

/* ---- events ---- */

/* Appends e; sets e->id and, when 0, e->ts_ms. */
int store_event_add(store_t *s, event_t *e);
/* Who the ops run next on s act for, until set again (NULL: nobody): each
 * event store_event_add records meanwhile gets data.actor and data.addr
 * (unless it has them), the audit trail. The strings are borrowed. */
void store_set_actor(store_t *s, const char *actor, const char *addr);
#define STORE_ACTOR_MAX 112 /* bytes of an actor kept by store_submit_as, with its NUL */
#define STORE_ADDR_MAX 48

typedef struct event_filter {
  int64_t after_id;        /* id > after_id */
  const char *type_prefix; /* "job." matches every job event; NULL = all */
  int64_t schedule_id;     /* 0 = all */
  int64_t job_id;          /* 0 = all */
  size_t limit;            /* 0 = no limit */
  int64_t before_id;       /* > 0: id < before_id (with after_id, a window);
                            * 0 = unbounded; negative is -EINVAL */
  int newest_first;        /* 1: highest id first, so limit keeps the newest */
} event_filter_t;

/* Events matching f, oldest first (newest first with f->newest_first).
 * Either way a page walks an index on id (or on schedule or job, then id)
 * and stops after limit rows. */
int store_events_list(store_t *s, const event_filter_t *f, event_list_t *out);
/* The newest event's id (0 when there are none): where "from now on" starts. */
int store_events_head(store_t *s, int64_t *id);

/* ---- leases: one holder at a time, with a fencing token ---- */

/* Takes lease `name` for holder until now_ms + ttl_ms, or renews it when
 * holder already holds it unexpired. *token is the fencing token of this
 * tenure: it grows every time the lease changes hands or is taken again
 * after expiring, so work stamped with an old token can be refused.
 * -EBUSY when another holder's lease is still valid. */
int store_lease_acquire(store_t *s, const char *name, const char *holder,
                        int64_t now_ms, int64_t ttl_ms, int64_t *token);
/* 0 when token is the lease's current token and it is unexpired at now_ms;
 * SPD_EFENCED otherwise. Call inside the transaction of the fenced work. */
int store_lease_check(store_t *s, const char *name, int64_t token, int64_t now_ms);
/* Gives the lease up early (expires it) when holder + token still hold it. */
int store_lease_release(store_t *s, const char *name, const char *holder,
                        int64_t token);
/* The current holder (malloc'd), token and expiry. -ENOENT when never taken. */
int store_lease_get(store_t *s, const char *name, char **holder, int64_t *token,
                    int64_t *expires_ms);

/* ---- history retention ---- */

/* How much history one project (spider NULL: the project's default) or one
 * project/spider pair keeps. keep: the newest `keep` ended jobs that started
 * (0 = no count limit); ended_before_ms: ended jobs that ended earlier go
 * (0 = no age limit). */
typedef struct prune_rule {
  const char *project;
  const char *spider;
  int keep;
  int64_t ended_before_ms;
} prune_rule_t;

/* Deletes ended jobs (final states) of every project/spider pair beyond its
 * count limit, newest kept by end_ms then id, and those that ended before
 * its cut-off. A pair's limits come from the most specific rule (its own,
 * then its project's, then keep_default / ended_before_default_ms); a rule
 * with both limits 0 keeps everything of its pair. An ended job that never
 * started (cancelled while pending) takes no place in the count: it goes
 * once it is older than the keep-th newest started one. Pending and running
 * jobs are never deleted, nor a job with children (parent_id) still pending
 * or running. At most max jobs go per call: call again while max came back.
 * Each deleted job is appended to `deleted` with only id, jobid, project,
 * spider, state, start_ms and end_ms filled, so the caller can remove its
 * files. Ids are never reused: a later insert gets an id above every id
 * ever given. -EINVAL for a rule without a project or with a negative
 * limit. */
int store_jobs_prune(store_t *s, const prune_rule_t *rules, size_t nrules,
                     int keep_default, int64_t ended_before_default_ms, size_t max,
                     job_list_t *deleted);

/* Deletes events with ts_ms < before_ms, then ended (not upcoming) schedule
 * runs with done_ms < before_ms, oldest first, at most max rows in all;
 * *deleted = how many. Event ids are never reused either. */
int store_events_prune(store_t *s, int64_t before_ms, size_t max, int *deleted);

/* ---- task queues (core/queue.h, docs/queues.md) ----
 *
 * A queue is created by its first put or by store_queue_set. Every call
 * keeps the queue's counters and its keys' politeness state in the same
 * transaction, so they are never recounted. -ENOENT: no such queue (except
 * put, which creates it). */

/* Puts n elements into queue `name` (created with queue_conf_defaults when
 * new). Each element is added, or, when the queue holds it already, handled
 * by its policy: waiting elements move (overwrite; keep-earliest keeps the
 * earlier due time and the higher priority), in-flight ones are left to
 * their lease and take the new due time when acked (QPUT_DEFERRED, not under
 * keep-existing), dead and done ones come back as new under overwrite and
 * keep-earliest and stay under keep-existing. Sets items[i].result and .id.
 * -EINVAL for an element over QUEUE_ELEMENT_MAX or a key over QUEUE_KEY_MAX
 * (nothing is put). */
int store_queue_put(store_t *s, const char *name, queue_put_t *items, size_t n,
                    int64_t now_ms);

/* Takes up to max due elements: highest priority first, then earliest due,
 * among the keys whose limits allow (per-queue and per-key in-flight limits,
 * per-key token buckets, Retry-After blocks). Each becomes in flight until
 * now + visibility_ms (0 = the queue's default) with a new lease token and
 * one more delivery. Elements whose lease ended before now come back first
 * (or go dead after max_deliveries). A paused or unknown queue gives none.
 * Appends to out; *next_ms (may be NULL) = when more may become takeable
 * (the next due time, lease end or key wake-up; 0 = nothing pending). */
int store_queue_take(store_t *s, const char *name, size_t max, int64_t visibility_ms,
                     int64_t now_ms, queue_item_list_t *out, int64_t *next_ms);

/* Acks n leases: the element goes (or becomes a done tombstone under
 * keep_done, or waiting again at a due time a put deferred). Sets each
 * lease's result; returns 0 even when some were not held. */
int store_queue_ack(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                    int64_t now_ms);

/* Nacks n leases: each element is due again after its delay (or the
 * queue's backoff with jitter, and never before its retry_after), or goes
 * dead when it has had max_deliveries deliveries. retry_after also blocks
 * its key. A lease with `release` set gives its delivery back: the count
 * drops by one and it never goes dead. Sets result and dead per lease. */
int store_queue_nack(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                     int64_t now_ms);

/* Extends n held leases to now + visibility_ms (0 = queue default). */
int store_queue_extend(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                       int64_t visibility_ms, int64_t now_ms);

/* Creates or updates a queue's settings from c (its name, paused,
 * keep_done, visibility_ms, max_deliveries, backoff_*, max_inflight, key_*;
 * counters and id are ignored). Fills c->id, created_ms and the counters.
 * A changed key_mode applies to elements put afterwards. */
int store_queue_set(store_t *s, queue_conf_t *c);
int store_queue_get(store_t *s, const char *name, queue_conf_t *out);
/* Queues in name order after `after` (NULL = from the start), at most limit
 * (0 = all). */
int store_queues_list(store_t *s, const char *after, size_t limit,
                      queue_conf_list_t *out);
/* Deletes a queue and all its elements. */
int store_queue_delete(store_t *s, const char *name);

int store_queue_stats(store_t *s, const char *name, int64_t now_ms, queue_stats_t *out);
/* Every queue with its stats as of now_ms, in name order: fn(ud, conf,
 * stats) once each (a queue deleted meanwhile is skipped); a non-zero
 * return from fn stops the walk and is returned. */
int store_queues_each(store_t *s, int64_t now_ms,
                      int (*fn)(void *ud, const queue_conf_t *q, const queue_stats_t *st),
                      void *ud);

/* One politeness key as a person watching a queue sees it. */
typedef struct queue_key_info {
  char *key;                /* "" = the key of elements without one */
  int64_t ready;            /* due elements waiting in it (as of the last take's
                               sweep: one due since then still counts as delayed) */
  int64_t inflight;         /* its leases */
  double tokens;            /* its token bucket refilled up to now; -1 = no key_rate */
  int64_t blocked_until_ms; /* a Retry-After's end; 0 = none, or over */
  int open;                 /* a take may lease from it now */
  int64_t wake_ms;          /* closed: when it may open by time; 0 = when one of
                               its leases ends, or nothing to wait for */
} queue_key_info_t;

typedef struct queue_key_list {
  queue_key_info_t *v;
  size_t n, cap;
} queue_key_list_t;

void queue_key_list_release(queue_key_list_t *l);

/* The keys of queue `name` holding state (those store_queue_stats counts),
 * in byte order of the key after `after` (NULL = from the first), at most
 * limit (0 = all), appended to out; state as of now_ms. -ENOENT: no such
 * queue. */
int store_queue_keys(store_t *s, const char *name, const char *after, size_t limit,
                     int64_t now_ms, queue_key_list_t *out);

/* Elements matching f in id order, at most f->limit (all when 0). */
int store_queue_items(store_t *s, const char *name, const queue_filter_t *f,
                      queue_item_list_t *out);
/* Elements matching f (f->limit ignored; in-flight ones lose their lease)
 * become waiting, due at due_ms, with no deliveries. *count = how many. */
int store_queue_requeue(store_t *s, const char *name, const queue_filter_t *f,
                        int64_t due_ms, int64_t now_ms, int64_t *count);
/* Deletes elements matching f (f->limit ignored). *count = how many. */
int store_queue_purge(store_t *s, const char *name, const queue_filter_t *f,
                      int64_t now_ms, int64_t *count);

/* ---- nodes: the daemons sharing a store ---- */

typedef struct node_info {
  char *name;          /* node_name, unique in the cluster */
  char *url;           /* where other nodes reach its HTTP API */
  char *version;       /* its spiderd version; NULL when it never said (a
                        * row written before the store recorded it) */
  int slots;           /* its max_proc */
  int running;         /* its crawl processes, as it last reported */
  int64_t started_ms;  /* when the daemon started */
  int64_t heartbeat_ms;
  int dead;            /* declared dead by store_nodes_reap */
  int draining;        /* it claims no jobs (spiderd drain, or a SIGTERM's
                        * drain): others should take its share */
  /* Its memory for crawls as it last reported, in bytes: free (what the
   * machine or its cgroup has available, less the reserve) and reserved
   * (what its running jobs are expected to use still); 0 = not said. */
  int64_t mem_free;
  int64_t mem_reserved;
} node_info_t;

typedef struct node_list {
  node_info_t *v;
  size_t n, cap;
} node_list_t;

void node_info_release(node_info_t *n);
void node_list_release(node_list_t *l);

/* Records a node's sign of life: inserts or updates its row (url, version,
 * slots, running, started_ms, draining) with heartbeat_ms = now_ms and dead = 0.
 * *was_dead (may be NULL) = 1 when a reaper had declared it dead: its
 * running jobs were ended as lost and may run elsewhere already, so the
 * node must stop every crawl it still has. */
int store_node_beat(store_t *s, const node_info_t *n, int64_t now_ms, int *was_dead);
/* Every node that ever beat, by name, appended to out. */
int store_nodes_list(store_t *s, node_list_t *out);
/* Declares dead every live node other than `self` whose heartbeat is older
 * than now_ms - timeout_ms, and ends each running job of a dead node as
 * lost (end_ms = now_ms), whole rows appended to `lost` (state still
 * running in the copy, so the caller sees what it was) for the caller to
 * retry in the same transaction. Running jobs whose node is unknown to the
 * nodes table are left alone (a single node never beats). */
int store_nodes_reap(store_t *s, const char *self, int64_t now_ms, int64_t timeout_ms,
                     job_list_t *lost);

/* ---- eggs in the store: shared backends only ----
 * On a shared store every node must run every version, so an egg's bytes
 * are kept in the store and each node copies them to its eggs_dir. On
 * SQLite they stay on disk and these return -ENOTSUP. version is the
 * sanitized stem the egg has on disk. */
typedef struct egg_ref {
  char *project;
  char *version;
  int64_t size;
  int64_t created_ms;
} egg_ref_t;

typedef struct egg_list {
  egg_ref_t *v;
  size_t n, cap;
} egg_list_t;

void egg_list_release(egg_list_t *l);

/* Stores (or replaces) an egg. data NULL stores its metadata alone (size
 * len, no bytes): its bytes are in the object store (flow/eggsync.h), and
 * store_egg_get then gives 0 bytes. */
int store_egg_put(store_t *s, const char *project, const char *version, const void *data,
                  size_t len, int64_t now_ms);
/* Reads an egg's bytes (malloc'd into *data). -ENOENT when missing. */
int store_egg_get(store_t *s, const char *project, const char *version, void **data,
                  size_t *len);
/* Every egg, by project then version (no bytes). */
int store_eggs_list(store_t *s, egg_list_t *out);
/* Deletes one version, or every version of the project (version NULL).
 * *count (may be NULL) = how many; 0 is not an error. */
int store_egg_delete(store_t *s, const char *project, const char *version, int *count);

/* Is this store shared by several nodes (eggs in the store, nodes reaped,
 * notifications)? 0 for SQLite. */
int store_shared(const store_t *s);

/* A paused crawl's state (its JOBDIR or state directory, as a tarball) kept
 * in a shared store, so that any node can resume it: put replaces, get
 * (-ENOENT when none; *data is the caller's to free), delete (0 when there
 * was none). A private store answers -ENOTSUP: the state stays on disk. */
int store_job_state_put(store_t *s, int64_t id, const void *data, size_t len, int64_t now_ms);
int store_job_state_get(store_t *s, int64_t id, void **data, size_t *len);
int store_job_state_delete(store_t *s, int64_t id);

/* ---- notifications between nodes sharing a store ----
 * A watch is a connection of its own that hears what other nodes (and this
 * one) commit: new pending jobs, eggs, cancels, queue puts. Notices are
 * hints; a missed one costs only latency, as every consumer also polls.
 * Shared backends only (-ENOTSUP for SQLite). */
typedef struct store_watch store_watch_t;

enum {
  STORE_NOTE_JOBS = 1u << 0,   /* jobs became claimable or ended */
  STORE_NOTE_EGGS = 1u << 1,   /* an egg was stored or deleted */
  STORE_NOTE_CANCEL = 1u << 2, /* a running job was asked to stop */
  STORE_NOTE_QUEUES = 1u << 3, /* elements were put or released */
  STORE_NOTE_NODES = 1u << 4,  /* a node was declared dead */
  STORE_NOTE_RECONNECT = 1u << 5, /* the watch reconnected: notices may be lost */
};

int store_watch_open(const char *url, store_watch_t **out, char *err, size_t errlen);
/* The socket to poll for reading; -1 while disconnected (call
 * store_watch_read on a timer then: it reconnects). */
int store_watch_fd(store_watch_t *w);
/* Reads what arrived without blocking; ORs STORE_NOTE_* into *what. Never
 * blocks for long; on a lost connection it tries one reconnect and returns
 * SPD_ESTORE when that fails (call again later). */
int store_watch_read(store_watch_t *w, unsigned *what);
void store_watch_close(store_watch_t *w);
/* Sends a notice to every watch (also this node's), delivered at commit
 * when inside a transaction. No-op (0) on SQLite. */
int store_notify(store_t *s, unsigned what);

/* Asks the node running job `id` to stop it (cancel.json on another node):
 * sets the job's cancel request and notifies. -ENOENT unless running. */
int store_job_cancel_request(store_t *s, int64_t id, int64_t now_ms);
/* (A pause is asked with -now_ms: the job's cancel_ms says which.) */
/* Running jobs of `node` with a cancel request, appended to out. */
int store_jobs_cancel_requested(store_t *s, const char *node, job_list_t *out);

/* ---- users and API tokens (core/principal.h) ----
 * Kept in the store so every node sharing it knows the same principals.
 * store.c checks kind (PRINCIPAL_USER or PRINCIPAL_TOKEN), a non-empty
 * name and a role in ROLE_READ..ROLE_ADMIN (-EINVAL otherwise); a NULL
 * label, secret, owner or projects is stored as "". */

/* Inserts p, or replaces every field of the row of the same kind and name. */
int store_principal_put(store_t *s, const principal_t *p);
/* Deletes the principal of that kind and name; *count = rows deleted (0 or
 * 1; may be NULL). Deleting nothing is not an error. */
int store_principal_delete(store_t *s, principal_kind_t kind, const char *name, int *count);
/* store_principal_put and store_principal_delete that keep an admin: they
 * write nothing and return SPD_ECONFLICT when the write would take away the
 * last usable admin credential, that is when the principal is one now, is
 * none after the write (deleted, or put with another role, no secret or an
 * expiry at or before now_ms), and no other principal is one. A usable
 * admin credential has the role admin, a secret (a hash to check a password
 * or token against) and no expiry or one after now_ms; the configured
 * Scrapyd login is not in the store and not counted here. The check and
 * the write are one atomic step on every backend (SQLite: one statement of
 * the only writer; PostgreSQL: the principals table locked against every
 * other writer until the transaction ends, then one statement; Redis: one
 * script), so two nodes taking away the last two admins at once cannot
 * both succeed. now_ms must be > 0 (-EINVAL). */
int store_principal_put_keep_admin(store_t *s, const principal_t *p, int64_t now_ms);
int store_principal_delete_keep_admin(store_t *s, principal_kind_t kind, const char *name,
                                      int64_t now_ms, int *count);
/* Every principal, appended to out: users first, then tokens, each kind by
 * name (byte order). */
int store_principals_list(store_t *s, principal_list_t *out);
/* The auth generation: a string that changes with every put and every
 * delete that deleted a row, on every node sharing the store, so a node
 * that caches principals knows when to read them again (NULL-free: "" when
 * nothing was ever written). It is meta "auth.gen", written by put and
 * delete after their row with a value no other node writes too (time and
 * random bytes): inside the caller's transaction the two commit together
 * (store_submit always opens one); on Redis, or outside a transaction, a
 * failure in between leaves the row written and the put or delete
 * failed, so the caller retries and the retry bumps it. The caller frees
 * *gen. */
int store_auth_gen(store_t *s, char **gen);

/* ---- accounts (core/account.h) ----
 * The accounts' document, kept whole as meta "accounts" (few accounts, read
 * whole by every node's cache of users and tokens). */

/* The document as JSON text into *doc (the caller frees; "{}" when none was
 * ever written). */
int store_accounts_get(store_t *s, char **doc);
/* Replaces the document (a JSON object's text) and bumps the auth
 * generation, so every node reads its callers' accounts again. Callers
 * read, change and write it inside one store op holding store_claim_lock,
 * which orders such changes on PostgreSQL (SQLite has one writer). */
int store_accounts_put(store_t *s, const char *doc);

/* ---- key/value (daemon metadata: node identity, schema notes, ...) ---- */
int store_meta_get(store_t *s, const char *key, char **value); /* -ENOENT */
int store_meta_set(store_t *s, const char *key, const char *value);

#endif
