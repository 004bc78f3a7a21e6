/* The store's operations, written once. Each line is
 *   STORE_OP(name, (parameters))
 * for an op returning int; the includer defines STORE_OP before including
 * this file (it is #undef'd at the end), so one list makes the slots of
 * struct store_ops (store_impl.h), every backend's prototypes (its
 * internal.h, via STORE_BACKEND_PROTOS) and every backend's table
 * (STORE_BACKEND_TABLE). The contract of each op is its store_<name>
 * function in store.h; store.c checks the arguments before it calls one.
 *
 * A new op touches these files and no others: its contract in store.h, a
 * line here, its argument checks in store.c (the store_<name> wrapper), one
 * implementation per backend (sqlite/, pg/, and redis/: its C and the Lua
 * script it runs, "-- @script name" in redis/lua/FILE.lua, which the build
 * reads into the Redis script table) and a test. No other list of ops is
 * kept by hand: not the struct, the prototypes, the backends' tables, nor
 * Redis's scripts.
 *
 * No include guard: included once per use. */

/* ---- connection (open and close are in store_impl.h: no store_t yet) ---- */
STORE_OP(tx_begin, (store_t *s))
STORE_OP(tx_commit, (store_t *s))
STORE_OP(tx_rollback, (store_t *s))
STORE_OP(sp_begin, (store_t *s))
STORE_OP(sp_release, (store_t *s))
STORE_OP(sp_rollback, (store_t *s))

/* ---- jobs ---- */
STORE_OP(job_insert, (store_t *s, job_t *j))
STORE_OP(job_claim, (store_t *s, const char *node, size_t max, int64_t now_ms,
                     job_list_t *out))
STORE_OP(job_claim_skip, (store_t *s, const char *node, size_t max, int64_t now_ms,
                          const job_key_t *skip, size_t nskip, job_list_t *out))
STORE_OP(claim_lock, (store_t *s))
STORE_OP(job_started, (store_t *s, int64_t id, int pid, int64_t pid_start))
STORE_OP(job_requeue, (store_t *s, int64_t id))
STORE_OP(job_finish, (store_t *s, int64_t id, job_state_t state, int64_t end_ms,
                      int exit_code, int term_signal, const json_t *stats))
STORE_OP(job_cancel_pending, (store_t *s, const char *project, const char *jobid,
                              int64_t now_ms, int *count))
STORE_OP(job_get, (store_t *s, int64_t id, job_t *out))
STORE_OP(job_status, (store_t *s, const char *project, const char *jobid,
                      job_state_t *out))
STORE_OP(jobs_list, (store_t *s, const job_filter_t *f, job_list_t *out))
STORE_OP(jobs_page, (store_t *s, int group, const char *project, size_t limit,
                    job_page_key_t *after, job_list_t *out, int *more))
/* ended_since_ms 0: store_job_counts; else store_job_counts_since */
STORE_OP(job_counts, (store_t *s, const char *project, int64_t ended_since_ms,
                      int64_t counts[JOB_NSTATES]))
/* buckets zeroed, their t_ms set, and n checked by store.c */
STORE_OP(job_throughput, (store_t *s, const char *project, int64_t from_ms, int64_t to_ms,
                          int64_t step_ms, job_bucket_t *buckets, size_t n))
/* Calls fn with every job that started and ended in [from_ms, to_ms) (end
 * time), of project when not NULL, read down the end-time index; a non-zero
 * return of fn stops the walk and is returned (store/stats.c). */
STORE_OP(job_stats_scan, (store_t *s, const char *project, int64_t from_ms, int64_t to_ms,
                          job_stats_row_fn fn, void *ud))
STORE_OP(trim_finished, (store_t *s, int keep, int *deleted))
STORE_OP(job_heartbeat, (store_t *s, int64_t id, int64_t now_ms))
STORE_OP(job_next_due, (store_t *s, int64_t now_ms, int64_t *out))
STORE_OP(job_set_meta, (store_t *s, int64_t id, const json_t *meta))
STORE_OP(job_set_history, (store_t *s, int64_t id, job_state_t state, int corrected,
                           job_state_t original, const char *note))
STORE_OP(job_set_health, (store_t *s, int64_t id, const char *health, const json_t *reasons))
STORE_OP(job_set_segments, (store_t *s, int64_t id, const json_t *segments))
STORE_OP(job_resume, (store_t *s, int64_t id))
STORE_OP(jobs_waiting, (store_t *s, int64_t upstream, job_list_t *out))
STORE_OP(job_wake, (store_t *s, int64_t id, int64_t now_ms))

/* ---- schedules, runs, events, leases ---- */
STORE_OP(schedule_insert, (store_t *s, schedule_t *sc))
STORE_OP(schedule_update, (store_t *s, const schedule_t *sc))
STORE_OP(schedule_delete, (store_t *s, int64_t id))
/* by id, or by name when name is not NULL */
STORE_OP(schedule_get, (store_t *s, int64_t id, const char *name, schedule_t *out))
STORE_OP(schedules_list, (store_t *s, int64_t after_id, size_t limit,
                          schedule_list_t *out))
STORE_OP(schedule_state_get, (store_t *s, int64_t id, char **state))
STORE_OP(schedule_state_set, (store_t *s, int64_t id, const char *state))
STORE_OP(runs_add, (store_t *s, int64_t schedule_id, const int64_t *due,
                    const int64_t *fire, size_t n, int64_t horizon_ms, int64_t refill_ms))
STORE_OP(runs_clear, (store_t *s, int64_t schedule_id, int64_t from_ms))
STORE_OP(schedules_refill, (store_t *s, int64_t now_ms, size_t limit,
                            schedule_list_t *out))
STORE_OP(run_defer, (store_t *s, int64_t run_id, const char *reason))
STORE_OP(runs_due, (store_t *s, int64_t until_ms, size_t max, sched_run_list_t *out))
STORE_OP(runs_list, (store_t *s, const run_filter_t *f, sched_run_list_t *out))
STORE_OP(run_end, (store_t *s, int64_t run_id, run_state_t state, int64_t job_id,
                   const char *reason, int64_t now_ms))
STORE_OP(event_add, (store_t *s, event_t *e))
STORE_OP(events_list, (store_t *s, const event_filter_t *f, event_list_t *out))
STORE_OP(events_head, (store_t *s, int64_t *id))
STORE_OP(lease_acquire, (store_t *s, const char *name, const char *holder,
                         int64_t now_ms, int64_t ttl_ms, int64_t *token))
STORE_OP(lease_check, (store_t *s, const char *name, int64_t token, int64_t now_ms))
STORE_OP(lease_release, (store_t *s, const char *name, const char *holder,
                         int64_t token))
STORE_OP(lease_get, (store_t *s, const char *name, char **holder, int64_t *token,
                     int64_t *expires_ms))

/* ---- history retention ---- */
STORE_OP(jobs_prune, (store_t *s, const prune_rule_t *rules, size_t nrules,
                      int keep_default, int64_t ended_before_default_ms, size_t max,
                      job_list_t *deleted))
STORE_OP(events_prune, (store_t *s, int64_t before_ms, size_t max, int *deleted))

/* ---- task queues ---- */
STORE_OP(queue_put, (store_t *s, const char *name, queue_put_t *items, size_t n,
                     int64_t now_ms))
STORE_OP(queue_take, (store_t *s, const char *name, size_t max, int64_t visibility_ms,
                      int64_t now_ms, queue_item_list_t *out, int64_t *next_ms))
STORE_OP(queue_ack, (store_t *s, const char *name, queue_lease_t *leases, size_t n,
                     int64_t now_ms))
STORE_OP(queue_nack, (store_t *s, const char *name, queue_lease_t *leases, size_t n,
                      int64_t now_ms))
STORE_OP(queue_extend, (store_t *s, const char *name, queue_lease_t *leases, size_t n,
                        int64_t visibility_ms, int64_t now_ms))
STORE_OP(queue_set, (store_t *s, queue_conf_t *c))
STORE_OP(queue_get, (store_t *s, const char *name, queue_conf_t *out))
STORE_OP(queues_list, (store_t *s, const char *after, size_t limit,
                       queue_conf_list_t *out))
STORE_OP(queue_delete, (store_t *s, const char *name))
STORE_OP(queue_stats, (store_t *s, const char *name, int64_t now_ms, queue_stats_t *out))
STORE_OP(queue_keys, (store_t *s, const char *name, const char *after, size_t limit,
                      int64_t now_ms, queue_key_list_t *out))
STORE_OP(queue_items, (store_t *s, const char *name, const queue_filter_t *f,
                       queue_item_list_t *out))
STORE_OP(queue_requeue, (store_t *s, const char *name, const queue_filter_t *f,
                         int64_t due_ms, int64_t now_ms, int64_t *count))
STORE_OP(queue_purge, (store_t *s, const char *name, const queue_filter_t *f,
                       int64_t now_ms, int64_t *count))

/* ---- nodes and cancel requests ---- */
STORE_OP(node_beat, (store_t *s, const node_info_t *n, int64_t now_ms, int *was_dead))
STORE_OP(nodes_list, (store_t *s, node_list_t *out))
STORE_OP(nodes_reap, (store_t *s, const char *self, int64_t now_ms, int64_t timeout_ms,
                      job_list_t *lost))
STORE_OP(job_cancel_request, (store_t *s, int64_t id, int64_t now_ms))
STORE_OP(jobs_cancel_requested, (store_t *s, const char *node, job_list_t *out))

/* ---- eggs in the store, notices (a private store answers -ENOTSUP / 0) ---- */
STORE_OP(egg_put, (store_t *s, const char *project, const char *version, const void *data,
                   size_t len, int64_t now_ms))
STORE_OP(egg_get, (store_t *s, const char *project, const char *version, void **data,
                   size_t *len))
STORE_OP(eggs_list, (store_t *s, egg_list_t *out))
STORE_OP(egg_delete, (store_t *s, const char *project, const char *version, int *count))
STORE_OP(notify, (store_t *s, unsigned what))
STORE_OP(job_state_put, (store_t *s, int64_t id, const void *data, size_t len, int64_t now_ms))
STORE_OP(job_state_get, (store_t *s, int64_t id, void **data, size_t *len))
STORE_OP(job_state_delete, (store_t *s, int64_t id))

/* ---- users and API tokens (store.c writes meta "auth.gen" after put/delete) ---- */
/* keep_admin_ms > 0: store_principal_put_keep_admin / _delete_keep_admin's
 * check at that time, atomic with the write; 0: none. */
STORE_OP(principal_put, (store_t *s, const principal_t *p, int64_t keep_admin_ms))
STORE_OP(principal_delete, (store_t *s, principal_kind_t kind, const char *name,
                            int64_t keep_admin_ms, int *count))
STORE_OP(principals_list, (store_t *s, principal_list_t *out))

/* ---- key/value ---- */
STORE_OP(meta_get, (store_t *s, const char *key, char **value))
STORE_OP(meta_set, (store_t *s, const char *key, const char *value))

#undef STORE_OP
