/* Stub: filled in by its implementation. */
#include <errno.h>

#include "store/pg_int.h"

const char pg_schema_sched[] = "";

int pg_schedule_insert(store_t *s, schedule_t *sc) {
  return -ENOSYS;
}

int pg_schedule_update(store_t *s, const schedule_t *sc) {
  return -ENOSYS;
}

int pg_schedule_delete(store_t *s, int64_t id) {
  return -ENOSYS;
}

int pg_schedule_get(store_t *s, int64_t id, const char *name, schedule_t *out) {
  return -ENOSYS;
}

int pg_schedules_list(store_t *s, int64_t after_id, size_t limit, schedule_list_t *out) {
  return -ENOSYS;
}

int pg_runs_add(store_t *s, int64_t schedule_id, const int64_t *due, const int64_t *fire,
                size_t n, int64_t horizon_ms, int64_t refill_ms) {
  return -ENOSYS;
}

int pg_runs_clear(store_t *s, int64_t schedule_id, int64_t from_ms) {
  return -ENOSYS;
}

int pg_schedules_refill(store_t *s, int64_t now_ms, size_t limit, schedule_list_t *out) {
  return -ENOSYS;
}

int pg_run_defer(store_t *s, int64_t run_id, const char *reason) {
  return -ENOSYS;
}

int pg_runs_due(store_t *s, int64_t until_ms, size_t max, sched_run_list_t *out) {
  return -ENOSYS;
}

int pg_runs_list(store_t *s, const run_filter_t *f, sched_run_list_t *out) {
  return -ENOSYS;
}

int pg_run_end(store_t *s, int64_t run_id, run_state_t state, int64_t job_id,
               const char *reason, int64_t now_ms) {
  return -ENOSYS;
}

int pg_run_add_ended(store_t *s, sched_run_t *r) {
  return -ENOSYS;
}

int pg_event_add(store_t *s, event_t *e) {
  return -ENOSYS;
}

int pg_events_list(store_t *s, const event_filter_t *f, event_list_t *out) {
  return -ENOSYS;
}

int pg_events_head(store_t *s, int64_t *id) {
  return -ENOSYS;
}

int pg_events_prune(store_t *s, int64_t before_ms, size_t max, int *deleted) {
  return -ENOSYS;
}

int pg_lease_acquire(store_t *s, const char *name, const char *holder, int64_t now_ms,
                     int64_t ttl_ms, int64_t *token) {
  return -ENOSYS;
}

int pg_lease_check(store_t *s, const char *name, int64_t token, int64_t now_ms) {
  return -ENOSYS;
}

int pg_lease_release(store_t *s, const char *name, const char *holder, int64_t token) {
  return -ENOSYS;
}

int pg_lease_get(store_t *s, const char *name, char **holder, int64_t *token,
                 int64_t *expires_ms) {
  return -ENOSYS;
}
