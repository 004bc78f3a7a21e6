/* The store: the single source of truth for jobs (and, later, schedules,
 * queues, leases and nodes). One interface, one table of operations per
 * backend (as SQLite's VFS); only SQLite exists today.
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

#include "core/job.h"

typedef struct store store_t;

/* Opens a store. url: "sqlite:PATH", "sqlite://PATH" or a bare PATH (SQLite).
 * Creates the file, its directory's missing last component, and the schema
 * (versioned migrations, applied here). SQLite runs in WAL mode with
 * synchronous=NORMAL: a commit survives kill -9 of the daemon.
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
 * j->created_ms when it is 0. Job ids are not unique (as in Scrapyd). */
int store_job_insert(store_t *s, job_t *j);

/* Atomically moves up to max pending jobs to running on `node`, highest
 * priority first, then lowest id (first come, first served), across all
 * projects; sets node and start_ms = now_ms. Appends the claimed jobs to out
 * (which may be empty or hold jobs already). 0 jobs is not an error. */
int store_job_claim(store_t *s, const char *node, size_t max, int64_t now_ms,
                    job_list_t *out);

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
} job_filter_t;

/* Lists jobs matching f, appended to out. Order: pending jobs by priority
 * DESC, id ASC; running by start_ms ASC, id ASC; final states by end_ms DESC,
 * id DESC. When several states are asked for, groups come in state order. */
int store_jobs_list(store_t *s, const job_filter_t *f, job_list_t *out);

/* Counts per state (counts[JOB_NSTATES]); final states count only jobs that
 * started (start_ms != 0). project NULL = all projects. */
int store_job_counts(store_t *s, const char *project, int64_t counts[JOB_NSTATES]);

/* Keeps the `keep` most recently ended started jobs (final states) and
 * deletes older ones, along with cancelled-before-start jobs older than the
 * oldest kept. keep 0 = keep all. *deleted = rows removed (may be NULL). */
int store_trim_finished(store_t *s, int keep, int *deleted);

/* ---- key/value (daemon metadata: node identity, schema notes, ...) ---- */
int store_meta_get(store_t *s, const char *key, char **value); /* -ENOENT */
int store_meta_set(store_t *s, const char *key, const char *value);

#endif
