/* The private side of store.h: the table of operations every backend fills
 * in (as SQLite's sqlite3_vfs), and the header every backend's connection
 * struct starts with so store.c can find the table. Included by store.c and
 * by the backends (store/sqlite/, store/pg/, store/redis/), nothing else.
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
  /* 1 when several nodes share the store: eggs live in it, nodes are
   * reaped, notices reach other nodes (store_shared). */
  int shared;

  /* rest: the URL with its scheme removed (for SQLite, the file path). */
  int (*open)(const char *url, const char *rest, store_t **out, char *err,
              size_t errlen);
  void (*close)(store_t *s);
  /* A notification watch on its own connection (-ENOTSUP when private). */
  int (*watch_open)(const char *url, const char *rest, store_watch_t **out, char *err,
                    size_t errlen);

  /* The operations (store/ops.h), each `int (*op)(store_t *s, ...)`. */
#define STORE_OP(op, params) int(*op) params;
#include "store/ops.h"
};

/* First member of every backend's connection struct. */
struct store {
  const struct store_ops *ops;
  const char *actor, *addr; /* store_set_actor: borrowed while an op runs */
};

/* First member of every backend's watch. */
struct store_watch {
  int (*fd)(store_watch_t *w);
  int (*read)(store_watch_t *w, unsigned *what);
  void (*close)(store_watch_t *w);
};

/* The backends' tables (store/sqlite/, store/pg/, store/redis/). A
 * backend declares its op functions with
 *   #define STORE_OP(op, params) int prefix_##op params;
 *   #include "store/ops.h"
 * in its internal.h and fills its table the same way:
 *   #define STORE_OP(op, params) .op = prefix_##op,
 * so the list in ops.h is the only place an op is written down. */
extern const struct store_ops store_sqlite_ops;
extern const struct store_ops store_pg_ops;
extern const struct store_ops store_redis_ops;

/* job_stats_scan for any backend: the window walked through its
 * store_jobs_page (store/stats.c). */
int store_job_stats_walk(store_t *s, const char *project, int64_t from_ms, int64_t to_ms,
                         job_stats_row_fn fn, void *ud);

/* Appends one node / egg / principal (moved: *v is left empty). */
int node_list_push(node_list_t *l, node_info_t *v);
int egg_list_push(egg_list_t *l, egg_ref_t *v);
int principal_list_push(principal_list_t *l, principal_t *v);


/* One part of a page of jobs (store_jobs_page): part 0 from the start of
 * the group's order, 1 the rest of after's time, 2 what comes after it
 * (backends' *_page_part). */
typedef int (*store_page_part_fn)(store_t *s, int group, int part, const char *project,
                                  const job_page_key_t *after, size_t limit, job_list_t *out);

/* store_jobs_page over a backend's parts: the page and *more, after moved
 * to its last job. */
int store_jobs_page_parts(store_t *s, store_page_part_fn part, int group, const char *project,
                          size_t limit, job_page_key_t *after, job_list_t *out, int *more);

/* The limits that apply to a project/spider pair under store_jobs_prune's
 * rules (the most specific rule wins), for every backend alike. */
void store_prune_limits(const prune_rule_t *rules, size_t nrules, int keep_default,
                        int64_t ended_before_default_ms, const char *project,
                        const char *spider, int *keep, int64_t *ended_before_ms);

#endif
