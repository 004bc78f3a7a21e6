/* Stub: filled in by its implementation. */
#include <errno.h>

#include "store/pg_int.h"

const char pg_schema_jobs[] = "";

int pg_job_insert(store_t *s, job_t *j) {
  return -ENOSYS;
}

int pg_job_claim(store_t *s, const char *node, size_t max, int64_t now_ms, job_list_t *out) {
  return -ENOSYS;
}

int pg_job_started(store_t *s, int64_t id, int pid, int64_t pid_start) {
  return -ENOSYS;
}

int pg_job_requeue(store_t *s, int64_t id) {
  return -ENOSYS;
}

int pg_job_finish(store_t *s, int64_t id, job_state_t state, int64_t end_ms, int exit_code,
                  int term_signal, const json_t *stats) {
  return -ENOSYS;
}

int pg_job_cancel_pending(store_t *s, const char *project, const char *jobid,
                          int64_t now_ms, int *count) {
  return -ENOSYS;
}

int pg_job_get(store_t *s, int64_t id, job_t *out) {
  return -ENOSYS;
}

int pg_job_status(store_t *s, const char *project, const char *jobid, job_state_t *out) {
  return -ENOSYS;
}

int pg_jobs_list(store_t *s, const job_filter_t *f, job_list_t *out) {
  return -ENOSYS;
}

int pg_job_counts(store_t *s, const char *project, int64_t counts[JOB_NSTATES]) {
  return -ENOSYS;
}

int pg_trim_finished(store_t *s, int keep, int *deleted) {
  return -ENOSYS;
}

int pg_job_heartbeat(store_t *s, int64_t id, int64_t now_ms) {
  return -ENOSYS;
}

int pg_job_next_due(store_t *s, int64_t now_ms, int64_t *out) {
  return -ENOSYS;
}

int pg_jobs_prune(store_t *s, const prune_rule_t *rules, size_t nrules, int keep_default,
                  int64_t ended_before_default_ms, size_t max, job_list_t *deleted) {
  return -ENOSYS;
}

int pg_node_beat(store_t *s, const node_info_t *n, int64_t now_ms, int *was_dead) {
  return -ENOSYS;
}

int pg_nodes_list(store_t *s, node_list_t *out) {
  return -ENOSYS;
}

int pg_nodes_reap(store_t *s, const char *self, int64_t now_ms, int64_t timeout_ms,
                  job_list_t *lost) {
  return -ENOSYS;
}

int pg_node_delete(store_t *s, const char *name) {
  return -ENOSYS;
}

int pg_job_cancel_request(store_t *s, int64_t id, int64_t now_ms) {
  return -ENOSYS;
}

int pg_jobs_cancel_requested(store_t *s, const char *node, job_list_t *out) {
  return -ENOSYS;
}

int pg_egg_put(store_t *s, const char *project, const char *version, const void *data,
               size_t len, int64_t now_ms) {
  return -ENOSYS;
}

int pg_egg_get(store_t *s, const char *project, const char *version, void **data,
               size_t *len) {
  return -ENOSYS;
}

int pg_eggs_list(store_t *s, egg_list_t *out) {
  return -ENOSYS;
}

int pg_egg_delete(store_t *s, const char *project, const char *version, int *count) {
  return -ENOSYS;
}
