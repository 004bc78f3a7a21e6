/* Jobs: one crawl of one spider, from scheduling to its end.
 *
 * Ownership: a job_t owns every string and JSON value it points to;
 * job_release() frees them (not the struct), job_list_release() frees a
 * list's jobs and its array.
 *
 * Lifecycle: pending -> running -> finished | failed | cancelled | lost.
 * A pending job that is cancelled goes straight to cancelled (start_ms 0).
 * A running job may be paused (its crawl stops with its state kept) and
 * resumed (pending again): running -> paused -> pending -> running ...
 */
#ifndef SPIDERD_CORE_JOB_H
#define SPIDERD_CORE_JOB_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

typedef enum job_state {
  JOB_PENDING = 0,
  JOB_RUNNING,
  JOB_FINISHED,  /* the crawl exited 0 */
  JOB_FAILED,    /* non-zero exit or killed by a signal it was not sent by us */
  JOB_CANCELLED, /* cancelled by a user (pending or running), or by daemon stop */
  JOB_LOST,      /* its process vanished without an exit status we could read */
  JOB_PAUSED,    /* stopped with its state kept, until resumed or cancelled: not final */
  JOB_NSTATES
} job_state_t;

typedef struct job {
  int64_t id;          /* store row id: set by store_job_insert; FIFO tie-break */
  char *jobid;         /* the Scrapyd job id (validated by name_valid_job) */
  char *project;
  char *spider;
  char *version;       /* raw _version as sent, or NULL = latest at launch */
  json_t *args;        /* object: spider args in the order sent (no _job/_version) */
  json_t *settings;    /* object: setting NAME -> VALUE, in the order sent */
  double priority;     /* higher first, then lower id */
  job_state_t state;
  char *node;          /* node that claimed it, or NULL */
  int pid;             /* 0 = none */
  int64_t pid_start;   /* process start time (/proc/PID/stat field 22), 0 = unknown */
  int64_t created_ms;  /* UTC ms since the epoch */
  int64_t start_ms;    /* 0 = never started */
  int64_t end_ms;      /* 0 = not ended */
  int exit_code;       /* -1 = none (still running, or killed by a signal) */
  int term_signal;     /* 0 = none */
  json_t *stats;       /* NULL, or the crawl's stats object (see spiderd_runner) */
  /* Scheduling and robustness (all 0 = none / unlimited / Scrapyd's defaults). */
  int64_t schedule_id;     /* the schedule that fired it */
  int64_t parent_id;       /* the job that fanned it out */
  int64_t retry_of;        /* the attempt this one retries */
  int attempt;             /* 1 = first try */
  int max_retries;         /* further attempts after a failed or lost one */
  int64_t retry_backoff_ms;/* first retry delay; doubles per attempt */
  int64_t timeout_ms;      /* kill a crawl running longer than this */
  int64_t not_before_ms;   /* a pending job is not claimed before this time */
  int64_t heartbeat_ms;    /* last sign of life of a running crawl */
  /* At most one pending or running job of a project holds a given key
   * (store_job_insert); NULL = none. A retry keeps its attempt's key. */
  char *unique_key;
  /* The user's own fields (jobs.meta): NULL = none, else an object of at
   * most JOB_META_MAX bytes as compact JSON. */
  json_t *meta;
  /* History updates (jobs.history): once a review corrected its state
   * (corrected = 1), the state the job ended in (original_state); the
   * latest note (NULL = none). */
  int corrected;
  job_state_t original_state;
  char *note;
  /* A test run (jobs.test_run): 1 = it counts in no statistics and in no
   * schedule's history; it is listed and shown like any job. */
  int test;
  /* How the run compares with the previous runs like it (flow/health.h):
   * "ok", "degraded", "broken", or NULL (too little history, or not
   * checked); health_reasons an array of sentences, or NULL. */
  char *health;
  json_t *health_reasons;
  /* The memory a claim reserved for the job on its node, in bytes (0 =
   * none); known to that node only, never stored. */
  int64_t mem_expected;
  /* A job that was paused ran in segments: NULL until its first pause,
   * then an array of {node, started, ended, items, reason} objects, one per
   * run of its process, oldest first. */
  json_t *segments;
  /* A stop asked of the node running it (shared stores): 0 = none, > 0 a
   * cancel at that time, < 0 a pause at minus that time. */
  int64_t cancel_ms;
  /* The jobs this one waits for (jobs.create's `after`): NULL = none, else
   * an array of their integer ids. Set at insert, never changed. */
  json_t *after;
} job_t;

typedef struct job_list {
  job_t *v;
  size_t n;
} job_list_t;

/* Sets every field to its empty value (NULLs, exit_code -1, attempt 1). */
void job_init(job_t *j);
void job_release(job_t *j);
void job_list_release(job_list_t *l);
/* Appends the n jobs of v to out in one allocation, moving their contents
 * (v's jobs are left empty). Returns 0 or -ENOMEM (out unchanged). */
int job_list_append(job_list_t *out, job_t *v, size_t n);

/* "pending", "running", "finished", "failed", "cancelled", "lost", "paused". */
const char *job_state_name(job_state_t s);
/* Parses a name from job_state_name; -EINVAL when unknown. */
int job_state_parse(const char *name, job_state_t *out);
/* Is the state one a job never leaves? (paused is not: it is resumed.) */
int job_state_final(job_state_t s);

/* The largest meta object, in bytes of compact JSON. */
#define JOB_META_MAX 65536
/* The longest note of a history update, in bytes. */
#define JOB_NOTE_MAX 4096

/* Merges patch into *meta as RFC 7396 says (a member null removes the key,
 * an object merges recursively, anything else replaces); *meta may be NULL
 * (an empty object). 0, -EINVAL when patch is not an object, or -ENOMEM. */
int job_meta_merge(json_t **meta, const json_t *patch);

/* The longest unique_key, in bytes. */
#define JOB_UNIQUE_KEY_MAX 200

/* Is key a valid unique_key: non-empty, at most JOB_UNIQUE_KEY_MAX bytes,
 * no control character (C0, DEL, or C1 encoded as UTF-8)? 1, or 0 with
 * the reason in why ("it must not be empty", ...: the caller names the
 * parameter). UTF-8 validity is the caller's (the API faces check
 * every parameter). */
int job_unique_key_valid(const char *key, char *why, size_t whylen);

/* Retry delays never grow past this, however many attempts. */
#define JOB_RETRY_DELAY_MAX_MS (3600LL * 1000)

/* How long the retry after failed attempt `attempt` (1 = first try) waits:
 * backoff_ms * 2^(attempt-1), capped at JOB_RETRY_DELAY_MAX_MS, plus up to
 * 10% jitter scaled by rnd (uniform over uint32), so jobs that failed
 * together do not all come back in the same millisecond. backoff_ms <= 0
 * gives 0. Pure: the caller supplies the randomness. */
int64_t job_retry_delay_ms(int64_t backoff_ms, int attempt, uint32_t rnd);

/* The Scrapyd job id of attempt `attempt` (>= 2), given `jobid`, the id of
 * attempt - 1: "<base>.r<attempt>", where the previous retry's own suffix
 * ".r<attempt-1>" is replaced, not stacked, so a user sees one family of
 * ids. The base is shortened (on a UTF-8 boundary) to
 * keep the id within name_valid's 200 bytes, and trailing dots are dropped
 * so the id never contains "..". Writes into out (cap >= 201); 0, or
 * -EINVAL when nothing valid can be made. */
int job_retry_jobid(const char *jobid, int attempt, char *out, size_t cap);

/* ms as "YYYY-MM-DDTHH:MM:SS.mmmZ" (UTC), or JSON null for 0. */
json_t *job_time_json(int64_t ms);

/* The job as webhooks' and hooks' bodies give it (docs/api.md, Webhooks):
 * a new object, NULL on allocation failure. */
json_t *job_event_json(const job_t *j);

#endif
