/* The PostgreSQL backend's private header, shared by pg.c (connection,
 * reconnects, schema migrations, transactions, meta, notifications),
 * pg/jobs.c (jobs, nodes, eggs, history retention), pg/sched.c (schedules,
 * runs, events, leases), pg/queue.c (task queues) and pg/auth.c (users
 * and API tokens).
 *
 * Statements are prepared once per connection under a slot number (each
 * file owns a range) and run with text parameters, except bytea (binary).
 * Ownership as in store.h; a PGresult returned here is the caller's to
 * PQclear. */
#ifndef SPIDERD_STORE_PG_INT_H
#define SPIDERD_STORE_PG_INT_H

#include <jansson.h>
#include <stdint.h>

#include "store/pg/pq_lazy.h" /* libpq, opened by pg_open */
#include "store/store_impl.h"

/* Slot ranges: pg.c 0..31, pg/jobs.c 32..127, pg/sched.c 128..191,
 * pg/queue.c 192..319, pg/auth.c 320..335. */
#define PG_SLOT_CORE 0
#define PG_SLOT_JOBS 32
#define PG_SLOT_SCHED 128
#define PG_SLOT_QUEUE 192
#define PG_SLOT_AUTH 320
#define PG_SLOTS 336

struct pg_store {
  struct store base;
  PGconn *conn;
  char *conninfo;     /* the URL without spiderd's own parameters */
  char *schema;       /* quoted-safe name ([A-Za-z0-9_]), NULL = public */
  char channel[96];   /* LISTEN/NOTIFY channel of this schema */
  int in_tx;          /* inside store_tx_begin .. commit/rollback */
  int sp_depth;       /* open savepoints */
  int tx_broken;      /* the connection dropped inside a transaction */
  int tx_collided;    /* a statement of this transaction met 40001/40P01 */
  unsigned notes;     /* STORE_NOTE_* to send at the end of this transaction */
  unsigned char prepared[PG_SLOTS]; /* slot prepared on this connection */
  uint64_t retry_at_ns; /* after a failed reconnect, no other before (CLOCK_MONOTONIC ns) */
};

#define PGQ(s) ((struct pg_store *)(s))

/* Parameters of one statement: text values (NULL = SQL NULL) or binary.
 * A job listing may bind JOB_FILTER_PROJECTS_MAX projects besides its
 * other fields. */
#define PG_MAXPARAMS 96
typedef struct pg_params {
  int n;
  const char *v[PG_MAXPARAMS];
  int len[PG_MAXPARAMS];
  int fmt[PG_MAXPARAMS];
  char num[PG_MAXPARAMS][32]; /* numbers' text */
  char *owned[PG_MAXPARAMS];  /* freed by pg_params_release */
} pg_params_t;

void pg_p_str(pg_params_t *p, const char *v);           /* NULL -> NULL */
void pg_p_i64(pg_params_t *p, int64_t v);
void pg_p_dbl(pg_params_t *p, double v);
void pg_p_json(pg_params_t *p, const json_t *v);         /* NULL -> NULL */
void pg_p_bin(pg_params_t *p, const void *data, size_t len); /* bytea */
void pg_params_release(pg_params_t *p);

/* Runs statement `slot` (prepared from sql on first use on this
 * connection). Returns the result when its status is COMMAND_OK or
 * TUPLES_OK, else NULL (logged; *rc = SPD_ESTORE, SPD_ECONFLICT on a
 * unique violation, -EAGAIN on a serialization failure or deadlock).
 * Outside a transaction a lost connection is re-established and the
 * statement tried once more. Releases p. binary_result: 1 for bytea. */
PGresult *pg_run(struct pg_store *q, int slot, const char *sql, pg_params_t *p,
                 int binary_result, int *rc, const char *what);
/* pg_run for a statement that returns no rows: 0, or -ENOENT when it
 * changed no row and must_change, or the error. */
int pg_cmd(struct pg_store *q, int slot, const char *sql, pg_params_t *p, int must_change,
           const char *what);
/* Runs one-off SQL text (not prepared; several statements allowed). */
int pg_exec(struct pg_store *q, const char *sql, const char *what);

/* Runs statement `slot` (sql, no parameters) and hands each row to
 * row(r, i, out), which appends it to out; stops at the first error. */
int pg_list(struct pg_store *q, int slot, const char *sql, const char *what,
            int (*row)(const PGresult *r, int i, void *out), void *out);

/* A transaction of its own unless the caller opened one. */
int pg_auto_begin(struct pg_store *q, int *began);
int pg_auto_end(struct pg_store *q, int began, int rc);

/* Queues notices to send when the current transaction commits (at once
 * outside one). */
int pg_note(struct pg_store *q, unsigned what);

/* Result readers: NULL columns read as 0 / NULL. */
int64_t pg_i64(const PGresult *r, int row, int col);
double pg_dbl(const PGresult *r, int row, int col);
int pg_str(const PGresult *r, int row, int col, char **out);   /* strdup */
int pg_json(const PGresult *r, int row, int col, json_t **out); /* parsed */

/* Each file's part of the schema, applied by pg.c's migrations. */
extern const char pg_schema_jobs[];
extern const char pg_schema_sched[];
extern const char pg_schema_queue[];
extern const char pg_schema_auth[];

/* Every op of store/ops.h as pg_<op>, spread over this folder's files. */
#define STORE_OP(op, params) int pg_##op params;
#include "store/ops.h"

#endif
