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

  int (*meta_get)(store_t *s, const char *key, char **value);
  int (*meta_set)(store_t *s, const char *key, const char *value);
};

/* First member of every backend's connection struct. */
struct store {
  const struct store_ops *ops;
};

extern const struct store_ops store_sqlite_ops;

/* Appends the n jobs of v to out in one allocation, moving their contents
 * (v's jobs are left empty). Returns 0 or -ENOMEM (out unchanged). */
int store_list_append(job_list_t *out, job_t *v, size_t n);

#endif
