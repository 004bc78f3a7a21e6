/* The private side of store.h: the table of operations every backend fills
 * in (as SQLite's sqlite3_vfs), and the header every backend's connection
 * struct starts with so store.c can find the table.
 *
 * store.c validates arguments common to all backends (NULL pointers, final
 * states, max == 0, ...) before it calls an op, so an op may assume them.
 * Ownership is as in store.h; `close` frees the whole connection.
 */
#ifndef SPIDERD_STORE_IMPL_H
#define SPIDERD_STORE_IMPL_H

#include "store/store.h"

struct store_ops {
  const char *name; /* the URL scheme, e.g. "sqlite" */
  /* 1 when a transaction or savepoint cannot be rolled back (Redis: each
   * op is atomic alone, tx_* only group notices). */
  int no_rollback;

  /* rest: the URL with its scheme removed (for SQLite, the file path). */
  int (*open)(const char *url, const char *rest, store_t **out, char *err,
              size_t errlen);
  void (*close)(store_t *s);

  int (*tx_begin)(store_t *s);
  int (*tx_commit)(store_t *s);
  int (*tx_rollback)(store_t *s);
  int (*sp_begin)(store_t *s);
  int (*sp_release)(store_t *s);
  int (*sp_rollback)(store_t *s);

  int (*job_insert)(store_t *s, job_t *j);
  int (*job_claim)(store_t *s, const char *node, size_t max, int64_t now_ms,
                   job_list_t *out);
  int (*job_claim_skip)(store_t *s, const char *node, size_t max, int64_t now_ms,
                        const job_key_t *skip, size_t nskip, job_list_t *out);
  int (*claim_lock)(store_t *s); /* NULL: the write transaction serializes claims */
  int (*job_started)(store_t *s, int64_t id, int pid, int64_t pid_start);
  int (*job_requeue)(store_t *s, int64_t id);
  int (*job_finish)(store_t *s, int64_t id, job_state_t state, int64_t end_ms,
                    int exit_code, int term_signal, const json_t *stats);
  int (*job_cancel_pending)(store_t *s, const char *project, const char *jobid,
                            int64_t now_ms, int *count);
  int (*job_get)(store_t *s, int64_t id, job_t *out);
  int (*job_status)(store_t *s, const char *project, const char *jobid,
                    job_state_t *out);
  int (*jobs_list)(store_t *s, const job_filter_t *f, job_list_t *out);
  int (*job_counts)(store_t *s, const char *project,
                    int64_t counts[JOB_NSTATES]);
  int (*trim_finished)(store_t *s, int keep, int *deleted);

  int (*job_heartbeat)(store_t *s, int64_t id, int64_t now_ms);
  int (*job_next_due)(store_t *s, int64_t now_ms, int64_t *out);

  int (*schedule_insert)(store_t *s, schedule_t *sc);
  int (*schedule_update)(store_t *s, const schedule_t *sc);
  int (*schedule_delete)(store_t *s, int64_t id);
  int (*schedule_get)(store_t *s, int64_t id, const char *name, schedule_t *out);
  int (*schedules_list)(store_t *s, int64_t after_id, size_t limit,
                        schedule_list_t *out);
  int (*runs_add)(store_t *s, int64_t schedule_id, const int64_t *due,
                  const int64_t *fire, size_t n, int64_t horizon_ms, int64_t refill_ms);
  int (*runs_clear)(store_t *s, int64_t schedule_id, int64_t from_ms);
  int (*schedules_refill)(store_t *s, int64_t now_ms, size_t limit,
                          schedule_list_t *out);
  int (*run_defer)(store_t *s, int64_t run_id, const char *reason);
  int (*runs_due)(store_t *s, int64_t until_ms, size_t max, sched_run_list_t *out);
  int (*runs_list)(store_t *s, const run_filter_t *f, sched_run_list_t *out);
  int (*run_end)(store_t *s, int64_t run_id, run_state_t state, int64_t job_id,
                 const char *reason, int64_t now_ms);
  int (*run_add_ended)(store_t *s, sched_run_t *r);
  int (*event_add)(store_t *s, event_t *e);
  int (*events_list)(store_t *s, const event_filter_t *f, event_list_t *out);
  int (*events_head)(store_t *s, int64_t *id);
  int (*lease_acquire)(store_t *s, const char *name, const char *holder,
                       int64_t now_ms, int64_t ttl_ms, int64_t *token);
  int (*lease_check)(store_t *s, const char *name, int64_t token, int64_t now_ms);
  int (*lease_release)(store_t *s, const char *name, const char *holder,
                       int64_t token);
  int (*lease_get)(store_t *s, const char *name, char **holder, int64_t *token,
                   int64_t *expires_ms);

  int (*jobs_prune)(store_t *s, const prune_rule_t *rules, size_t nrules,
                    int keep_default, int64_t ended_before_default_ms, size_t max,
                    job_list_t *deleted);
  int (*events_prune)(store_t *s, int64_t before_ms, size_t max, int *deleted);

  int (*queue_put)(store_t *s, const char *name, queue_put_t *items, size_t n,
                   int64_t now_ms);
  int (*queue_take)(store_t *s, const char *name, size_t max, int64_t visibility_ms,
                    int64_t now_ms, queue_item_list_t *out, int64_t *next_ms);
  int (*queue_ack)(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                   int64_t now_ms);
  int (*queue_nack)(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                    int64_t now_ms);
  int (*queue_extend)(store_t *s, const char *name, queue_lease_t *leases, size_t n,
                      int64_t visibility_ms, int64_t now_ms);
  int (*queue_set)(store_t *s, queue_conf_t *c);
  int (*queue_get)(store_t *s, const char *name, queue_conf_t *out);
  int (*queues_list)(store_t *s, const char *after, size_t limit, queue_conf_list_t *out);
  int (*queue_delete)(store_t *s, const char *name);
  int (*queue_stats)(store_t *s, const char *name, int64_t now_ms, queue_stats_t *out);
  int (*queue_items)(store_t *s, const char *name, const queue_filter_t *f,
                     queue_item_list_t *out);
  int (*queue_requeue)(store_t *s, const char *name, const queue_filter_t *f,
                       int64_t due_ms, int64_t now_ms, int64_t *count);
  int (*queue_purge)(store_t *s, const char *name, const queue_filter_t *f,
                     int64_t now_ms, int64_t *count);

  int (*node_beat)(store_t *s, const node_info_t *n, int64_t now_ms, int *was_dead);
  int (*nodes_list)(store_t *s, node_list_t *out);
  int (*nodes_reap)(store_t *s, const char *self, int64_t now_ms, int64_t timeout_ms,
                    job_list_t *lost);
  int (*node_delete)(store_t *s, const char *name);
  int (*job_cancel_request)(store_t *s, int64_t id, int64_t now_ms);
  int (*jobs_cancel_requested)(store_t *s, const char *node, job_list_t *out);

  /* Shared backends only; NULL on SQLite (store.c answers -ENOTSUP). */
  int (*egg_put)(store_t *s, const char *project, const char *version, const void *data,
                 size_t len, int64_t now_ms);
  int (*egg_get)(store_t *s, const char *project, const char *version, void **data,
                 size_t *len);
  int (*eggs_list)(store_t *s, egg_list_t *out);
  int (*egg_delete)(store_t *s, const char *project, const char *version, int *count);
  int (*notify)(store_t *s, unsigned what);
  int (*watch_open)(const char *url, const char *rest, store_watch_t **out, char *err,
                    size_t errlen);

  int (*meta_get)(store_t *s, const char *key, char **value);
  int (*meta_set)(store_t *s, const char *key, const char *value);
};

/* First member of every backend's connection struct. */
struct store {
  const struct store_ops *ops;
};

/* First member of every backend's watch. */
struct store_watch {
  int (*fd)(store_watch_t *w);
  int (*read)(store_watch_t *w, unsigned *what);
  void (*close)(store_watch_t *w);
};

extern const struct store_ops store_sqlite_ops;
extern const struct store_ops store_pg_ops;

/* Appends one job / node / egg (moved: *v is left empty). */
int node_list_push(node_list_t *l, node_info_t *v);
int egg_list_push(egg_list_t *l, egg_ref_t *v);


/* The limits that apply to a project/spider pair under store_jobs_prune's
 * rules (the most specific rule wins), for every backend alike. */
void store_prune_limits(const prune_rule_t *rules, size_t nrules, int keep_default,
                        int64_t ended_before_default_ms, const char *project,
                        const char *spider, int *keep, int64_t *ended_before_ms);

#endif
