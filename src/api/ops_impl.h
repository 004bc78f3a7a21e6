/* For operation handlers only (ops*.c): the call they fill and answer.
 *
 * A handler reads its validated parameters with op_str/op_int/..., may
 * submit store ops or other async work with the call as the argument, and
 * ends every path with exactly one op_ok or op_fail, which free the call.
 * Scratch fields below are released by the call's end.
 */
#ifndef SPIDERD_API_OPS_IMPL_H
#define SPIDERD_API_OPS_IMPL_H

#include <uv.h>

#include "api/ops.h"
#include "core/job.h"

struct op_call {
  app_t *app;
  const op_def_t *def;
  json_t *params;
  const void *blob;
  size_t blob_len;
  unsigned char *blob_owned;
  op_reply_fn reply;
  void *ud;
  http_req_t *req; /* the request answered, or NULL (see op_start) */
  const struct auth_who *who; /* who asked (api/auth.h); never NULL once validated */
  char **mine;     /* the projects who is limited to; nmine 0 = every project */
  size_t nmine;
  /* scratch for handlers */
  job_t job;
  job_list_t list;
  json_t *result;
  json_t *details;
  char *egg_path;
  char *path;
  char *text;
  int64_t num[8];
  size_t idx;
  char **names;
  size_t nnames;
  int err_code;
  char err[512];
  uv_work_t work;
  int (*read_fn)(store_t *, void *); /* op_store's read, waiting for ends counted */
  void (*read_done)(void *, int);
  void *priv;                 /* a handler's own state, freed with the call */
  void (*priv_free)(void *priv);
};

void op_ok(op_call_t *c, json_t *result); /* takes result (may be NULL) */
/* op_ok with the result a store step left in c->result. */
void op_ok_result(op_call_t *c);
/* op_ok with another REST success status than the op's own (0 = its own). */
void op_ok_status(op_call_t *c, json_t *result, int status);
/* takes details (may be NULL) */
void op_fail(op_call_t *c, int code, json_t *details, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* A store step's error ends the call (op_fail with the store's message);
 * returns rc != 0, so a done callback says `if (op_store_failed(c, rc)) return;`. */
int op_store_failed(op_call_t *c, int rc);
/* Submits fn on the store; a refusal (stopping) fails the call. A read
 * waits for the job ends this node counted (flow_after_ends). */
void op_store(op_call_t *c, int kind, int (*fn)(store_t *, void *),
              void (*done)(void *, int));

const char *op_str(const op_call_t *c, const char *name); /* NULL when absent */
long long op_int(const op_call_t *c, const char *name, long long dflt);
double op_num(const op_call_t *c, const char *name, double dflt);
const json_t *op_json(const op_call_t *c, const char *name);

/* Spider args and settings (OPT_OBJ, values already strings) become
 * `-a K=V` / `-s K=V`: keys must be non-empty, without '=', and args must not
 * use the names the runner reserves. 1 after failing the call, else 0. */
int op_check_pairs(op_call_t *c, const char *field);

/* Keeps in c->names (c->nnames) the projects the caller may see. */
void op_names_keep_mine(op_call_t *c);

/* A string, or JSON null for NULL. */
json_t *op_str_or_null(const char *s);

/* A job as the native API shows it. */
json_t *op_render_job(const job_t *j);
/* "2024-05-01T12:00:00.123Z", or null for 0. */
json_t *op_iso_time(int64_t ms);

/* A time parameter `name`: digits are ms since the epoch, else ISO 8601
 * (UTC unless it has an offset); absent = dflt. 1 after failing the call
 * (SPD_EBADPARAM, details.field), else 0 and *out. */
int op_time_param(op_call_t *c, const char *name, int64_t dflt, int64_t *out);

/* Finds a job by row id or Scrapyd job id (on a store thread) into c->job;
 * on failure sets c->err_code, c->err and c->details. */
int op_job_resolve(store_t *s, op_call_t *c);
/* Ends c with the error op_job_resolve left. */
void op_fail_resolve(op_call_t *c, int rc);
/* A spiders_list callback's answer for c->job's project and spider: 0 when
 * the spider is listed; else c has failed (the listing's error, or
 * SPD_ENOSPIDER) and the caller returns. */
int op_spider_listed(op_call_t *c, int rc, char *const *names, size_t n, const char *error);

/* ---- the handlers ---- */
void op_status_get(op_call_t *c);
void op_nodes_list(op_call_t *c);
void op_nodes_drain(op_call_t *c); /* nodes.drain and nodes.undrain */
void op_projects_list(op_call_t *c);
void op_projects_get(op_call_t *c);
void op_projects_delete(op_call_t *c);
void op_versions_list(op_call_t *c);
void op_versions_add(op_call_t *c);
void op_versions_delete(op_call_t *c);
void op_versions_env(op_call_t *c);
void op_versions_rebuild(op_call_t *c);
void op_spiders_list(op_call_t *c);
void op_scrapers_list(op_call_t *c);
void op_jobs_list(op_call_t *c);
void op_jobs_get(op_call_t *c);
void op_jobs_create(op_call_t *c);
void op_jobs_cancel(op_call_t *c);
void op_jobs_pause(op_call_t *c);  /* api/ops_pause.c: jobs.pause */
void op_jobs_resume(op_call_t *c); /* jobs.resume */
void op_jobs_rerun(op_call_t *c);
void op_jobs_test_run(op_call_t *c); /* api/ops_testrun.c */
/* jobs.create's steps, for jobs.test_run: the project's egg into
 * c->egg_path (1 after failing c), and c->job queued and answered (the job
 * id's check first when the call gave one). */
int op_job_egg(op_call_t *c, const char *project, const char *version);
void op_job_submit(op_call_t *c);
void op_jobs_states(op_call_t *c);
void op_jobs_meta(op_call_t *c);
void op_jobs_history(op_call_t *c);
void op_jobs_history_batch(op_call_t *c);
void op_jobs_history_by_status(op_call_t *c);
/* ops_multiproc.c */
void op_jobs_multiprocess(op_call_t *c);
void op_jobs_add_urls(op_call_t *c);
/* A job's meta as jobs.create and jobs.meta take it (a JSON object, or its
 * text from a form): 0 and *out (new reference), or 1 after failing c. */
int op_meta_param(op_call_t *c, json_t **out);
void op_jobs_log(op_call_t *c);
void op_jobs_items(op_call_t *c);
void op_jobs_counts(op_call_t *c);
void op_stats_throughput(op_call_t *c);
void op_jobs_stats(op_call_t *c); /* api/ops_stats.c */
/* api/ops_accounts.c */
void op_accounts_list(op_call_t *c);
void op_accounts_get(op_call_t *c);
void op_accounts_create(op_call_t *c);
void op_accounts_update(op_call_t *c);
void op_accounts_delete(op_call_t *c);
void op_accounts_member(op_call_t *c); /* accounts.assign and accounts.unassign */
void op_accounts_upcoming(op_call_t *c);
void op_schedules_next(op_call_t *c);
void op_schedules_next_all(op_call_t *c);
void op_runs_missed(op_call_t *c);
void op_schedules_list(op_call_t *c);
void op_schedules_create(op_call_t *c);
void op_schedules_get(op_call_t *c);
void op_schedules_update(op_call_t *c);
void op_schedules_delete(op_call_t *c);
void op_schedules_pause(op_call_t *c); /* and resume, by the op's name */
void op_health_get(op_call_t *c);      /* api/ops_health.c: a schedule's or a project's */
void op_health_set(op_call_t *c);
void op_schedules_run(op_call_t *c);
void op_schedules_runs(op_call_t *c);
void op_schedules_preview(op_call_t *c);
/* ops_calendars.c */
void op_schedules_backfill(op_call_t *c);
void op_backfills_list(op_call_t *c);
void op_backfills_get(op_call_t *c);
void op_backfills_pause(op_call_t *c); /* and resume, by the op's name */
void op_backfills_cancel(op_call_t *c);
void op_calendars_list(op_call_t *c);
void op_calendars_get(op_call_t *c);
void op_calendars_put(op_call_t *c); /* create and update, by the op's name */
void op_calendars_delete(op_call_t *c);
void op_events_list(op_call_t *c);
/* ops_queues.c: docs/queues.md */
void op_queues_list(op_call_t *c);
void op_queues_get(op_call_t *c);
void op_queues_set(op_call_t *c);
void op_queues_delete(op_call_t *c);
void op_queues_put(op_call_t *c);
void op_queues_take(op_call_t *c);
void op_queues_ack(op_call_t *c); /* and nack, extend, by the op's name */
void op_queues_pause(op_call_t *c); /* and resume */
void op_queues_items(op_call_t *c);
void op_queues_keys(op_call_t *c);
void op_queues_requeue(op_call_t *c); /* and purge */
/* ops_auth.c */
void op_auth_whoami(op_call_t *c);
void op_tokens_list(op_call_t *c);
void op_tokens_create(op_call_t *c);
void op_tokens_delete(op_call_t *c);
void op_users_list(op_call_t *c);
void op_users_create(op_call_t *c);
void op_users_update(op_call_t *c);
void op_users_delete(op_call_t *c);

#endif
