/* Schedules and their runs: the records the scheduler keeps in the store. A schedule says when (cron / interval / once, in a zone)
 * and what (a job template); each due time becomes a run, materialised
 * ahead of time, which ends fired (a job was queued), missed or skipped.
 *
 * Ownership: a schedule_t or sched_run_t owns every string and
 * JSON value it points to; *_release frees them (not the struct), the list
 * releases free the array too.
 */
#ifndef SPIDERD_CORE_SCHEDULE_H
#define SPIDERD_CORE_SCHEDULE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/cron.h"
#include "core/job.h"

typedef enum sched_kind { SCHED_CRON = 0, SCHED_INTERVAL, SCHED_ONCE, SCHED_NKINDS } sched_kind_t;

/* When the previous run of a schedule is still pending or running. */
typedef enum sched_overlap {
  OVERLAP_ALLOW = 0, /* queue another job anyway */
  OVERLAP_SKIP,      /* record the run as skipped */
  OVERLAP_QUEUE,     /* queue it; it starts when the previous one ends */
  OVERLAP_REPLACE,   /* cancel the previous job(s), then queue */
  OVERLAP_N
} sched_overlap_t;

/* Runs whose time passed while no scheduler was active. */
typedef enum sched_missed {
  MISSED_SKIP = 0, /* record every one as missed */
  MISSED_ONCE,     /* record them, and fire the latest one now */
  MISSED_CATCHUP,  /* fire up to catchup_max of the latest, record the rest */
  MISSED_N
} sched_missed_t;

typedef struct schedule {
  int64_t id;
  char *name;             /* unique; validated as a project name */
  sched_kind_t kind;
  char *expr;             /* cron: the expression; interval: "<ms>"; once: ISO time */
  int64_t interval_ms;    /* interval kind */
  int64_t once_ms;        /* once kind */
  char *tz;               /* IANA zone; "UTC" by default */
  int64_t start_ms;       /* 0 = no bound */
  int64_t end_ms;         /* 0 = no bound */
  int64_t jitter_ms;      /* random delay in [0, jitter) per run */
  sched_overlap_t overlap;
  sched_missed_t missed;
  int catchup_max;        /* for MISSED_CATCHUP */
  int paused;
  /* job template */
  char *project;
  char *spider;
  char *version;          /* NULL = latest at launch */
  json_t *args;           /* object or NULL */
  json_t *settings;       /* object or NULL */
  double priority;
  int64_t timeout_ms;
  int max_retries;
  int64_t retry_backoff_ms;
  json_t *webhooks;       /* array of URLs or NULL */
  json_t *meta;           /* object or NULL: copied into each job's meta */
  int64_t created_ms;
  int64_t updated_ms;
  /* scheduler bookkeeping */
  int64_t horizon_ms;     /* runs are materialised up to here (0 = none yet) */
  int64_t refill_ms;      /* when the scheduler materialises more */
  int64_t last_due_ms;    /* due time of the newest run fired, missed or skipped */
} schedule_t;

typedef struct schedule_list {
  schedule_t *v;
  size_t n;
} schedule_list_t;

typedef enum run_state {
  RUN_UPCOMING = 0,
  RUN_FIRED,    /* a job was queued (job_id) */
  RUN_MISSED,   /* its time passed while no scheduler fired it */
  RUN_SKIPPED,  /* overlap policy skip, or the schedule was paused */
  RUN_NSTATES
} run_state_t;

typedef struct sched_run {
  int64_t id;
  int64_t schedule_id;
  int64_t due_ms;     /* the schedule's time */
  int64_t fire_ms;    /* due_ms + jitter: when it is fired */
  run_state_t state;
  int64_t job_id;     /* 0 = none */
  int64_t done_ms;    /* when it left upcoming */
  char *reason;       /* why missed / skipped; on an upcoming run: why it
                         waits (overlap policy queue), else NULL */
} sched_run_t;

typedef struct sched_run_list {
  sched_run_t *v;
  size_t n;
} sched_run_list_t;

void schedule_init(schedule_t *s);   /* empty values: tz NULL, catchup_max 1 */
void schedule_release(schedule_t *s);
void schedule_list_release(schedule_list_t *l);
void sched_run_release(sched_run_t *r);
void sched_run_list_release(sched_run_list_t *l);

/* Compiles sc's timing (kind, expr / interval / once time, zone, start and
 * end, jitter) into spec (initialised here; cron_spec_release it). An
 * interval counts from start_ms, else from created_ms. Returns 0 or
 * SPD_EBADPARAM with a reason in err. */
int schedule_compile(const schedule_t *sc, cron_spec_t *spec, char *err, size_t errlen);

/* Fills j (initialised here) with the schedule's job template: a pending
 * job of its project, spider, version, args, settings, meta, priority,
 * timeout and retries, with schedule_id set, job id jobid, created at
 * now_ms. 0 or -ENOMEM. */
int schedule_job(const schedule_t *sc, const char *jobid, int64_t now_ms, job_t *j);

/* Names as used in the API ("cron", "interval", "once"; "allow", "skip",
 * "queue", "replace"; "skip", "once", "catchup"; "upcoming", "fired",
 * "missed", "skipped") and their parsers (-EINVAL when unknown). */
const char *sched_kind_name(sched_kind_t k);
int sched_kind_parse(const char *s, sched_kind_t *out);
const char *sched_overlap_name(sched_overlap_t o);
int sched_overlap_parse(const char *s, sched_overlap_t *out);
const char *sched_missed_name(sched_missed_t m);
int sched_missed_parse(const char *s, sched_missed_t *out);
const char *run_state_name(run_state_t s);
int run_state_parse(const char *s, run_state_t *out);

#endif
