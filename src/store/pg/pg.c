/* The PostgreSQL backend: connection, reconnects, schema migrations,
 * transactions, meta and notifications. Jobs, schedules and queues are in
 * pg/jobs.c, pg/sched.c and pg/queue.c (store/pg/internal.h).
 *
 * URL: any libpq URL (postgresql://user:pw@host:port/db?sslmode=...), plus
 * spiderd's own `schema=NAME`: the tables live in that schema (created when
 * missing), so several clusters or test runs can share one database; its
 * notices travel on a channel of their own.
 *
 * Migrations run under a transaction-scoped advisory lock keyed by the
 * schema, so nodes starting together apply each one exactly once; the
 * applied version is a row in spiderd_schema.
 *
 * Reconnects: a statement outside a transaction that finds the connection
 * lost resets it and runs again; inside one the transaction fails
 * (SPD_ESTORE) and the caller's retry starts a new one. Nothing is lost:
 * an uncommitted transaction never happened. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "store/pg/internal.h"

/* ---- parameters and results ---- */

static int pg_p_slot(pg_params_t *p) {
  if (p->n >= PG_MAXPARAMS) abort(); /* a programming error, not input */
  int i = p->n++;
  p->len[i] = 0;
  p->fmt[i] = 0;
  p->owned[i] = NULL;
  return i;
}

void pg_p_str(pg_params_t *p, const char *v) { p->v[pg_p_slot(p)] = v; }

void pg_p_i64(pg_params_t *p, int64_t v) {
  int i = pg_p_slot(p);
  snprintf(p->num[i], sizeof(p->num[i]), "%" PRId64, v);
  p->v[i] = p->num[i];
}

void pg_p_dbl(pg_params_t *p, double v) {
  int i = pg_p_slot(p);
  snprintf(p->num[i], sizeof(p->num[i]), "%.17g", v);
  p->v[i] = p->num[i];
}

void pg_p_json(pg_params_t *p, const json_t *v) {
  int i = pg_p_slot(p);
  p->v[i] = NULL;
  if (v) p->v[i] = p->owned[i] = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
}

void pg_p_bin(pg_params_t *p, const void *data, size_t len) {
  int i = pg_p_slot(p);
  p->v[i] = data ? data : "";
  p->len[i] = (int)len;
  p->fmt[i] = 1;
}

void pg_params_release(pg_params_t *p) {
  for (int i = 0; i < p->n; i++) {
    free(p->owned[i]);
    p->owned[i] = NULL;
  }
  p->n = 0;
}

int64_t pg_i64(const PGresult *r, int row, int col) {
  if (PQgetisnull(r, row, col)) return 0;
  return strtoll(PQgetvalue(r, row, col), NULL, 10);
}

double pg_dbl(const PGresult *r, int row, int col) {
  if (PQgetisnull(r, row, col)) return 0;
  return strtod(PQgetvalue(r, row, col), NULL);
}

int pg_str(const PGresult *r, int row, int col, char **out) {
  *out = NULL;
  if (PQgetisnull(r, row, col)) return 0;
  *out = strdup(PQgetvalue(r, row, col));
  return *out ? 0 : -ENOMEM;
}

int pg_json(const PGresult *r, int row, int col, json_t **out) {
  *out = NULL;
  if (PQgetisnull(r, row, col)) return 0;
  *out = json_loads(PQgetvalue(r, row, col), JSON_DECODE_ANY, NULL);
  return *out ? 0 : SPD_ESTORE;
}

/* ---- connection ---- */

static void pg_notice(void *arg, const char *msg) { (void)arg, (void)msg; }

/* Connects (or reconnects) q->conn and sets the session up. */
static int pg_connect(struct pg_store *q, char *err, size_t errlen) {
  if (q->conn) PQfinish(q->conn);
  memset(q->prepared, 0, sizeof(q->prepared));
  q->conn = PQconnectdb(q->conninfo);
  if (!q->conn || PQstatus(q->conn) != CONNECTION_OK) {
    snprintf(err, errlen, "cannot connect to PostgreSQL: %s",
             q->conn ? PQerrorMessage(q->conn) : "out of memory");
    size_t n = strlen(err);
    while (n && (err[n - 1] == '\n' || err[n - 1] == ' ')) err[--n] = '\0';
    return SPD_ESTORE;
  }
  PQsetNoticeProcessor(q->conn, pg_notice, NULL);
  /* Commits wait for the WAL flush (durable) unless the server says
   * otherwise; statements never wait forever on a lock. spiderd never
   * waits on anything but the server inside a transaction, so one idle in
   * the middle for seconds is a stopped or cut-off node: the server ends
   * its session, so the rows it locked (its node row, the scheduler lease)
   * do not hold every other node's writes back until lock_timeout, and
   * what it had not committed never will be. */
  char sql[256];
  if (q->schema)
    snprintf(sql, sizeof(sql),
             "SET search_path TO \"%s\"; SET lock_timeout = '30s'; "
             "SET idle_in_transaction_session_timeout = '10s'",
             q->schema);
  else
    snprintf(sql, sizeof(sql),
             "SET lock_timeout = '30s'; SET idle_in_transaction_session_timeout = '10s'");
  PGresult *r = PQexec(q->conn, sql);
  int ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  if (!ok) snprintf(err, errlen, "PostgreSQL session setup: %s", PQresultErrorMessage(r));
  PQclear(r);
  return ok ? 0 : SPD_ESTORE;
}

static uint64_t pg_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* After a reconnect that failed slowly (a store that does not answer: it
 * waited for connect_timeout), the next is not tried before this long: the
 * ops queued behind it fail at once instead of each waiting out its own.
 * One refused at once is tried again by the next op. */
#define PG_RECONNECT_PAUSE_NS 1000000000u
#define PG_RECONNECT_SLOW_NS 500000000u

/* The connection dropped: outside a transaction, connect again. */
static int pg_recover(struct pg_store *q) {
  if (q->in_tx) {
    q->tx_broken = 1;
    return SPD_ESTORE;
  }
  if (q->retry_at_ns && pg_mono_ns() < q->retry_at_ns) return SPD_ESTORE;
  char err[256];
  uint64_t t0 = pg_mono_ns();
  int rc = pg_connect(q, err, sizeof(err));
  uint64_t t1 = pg_mono_ns();
  q->retry_at_ns = rc && t1 - t0 > PG_RECONNECT_SLOW_NS ? t1 + PG_RECONNECT_PAUSE_NS : 0;
  if (rc) log_error("store", "%s", err);
  else log_info("store", "reconnected to PostgreSQL");
  return rc;
}

/* A serialization failure or a deadlock is -EAGAIN: the store pool runs
 * the op again in a new transaction. The statements an op runs after one
 * in the same transaction fail as "transaction aborted" (25P02); those are
 * the collision too, so an op that goes on past a failed statement still
 * reports what can be retried. */
static int pg_result_rc(struct pg_store *q, PGresult *r) {
  const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
  if (state && !strcmp(state, "23505")) return SPD_ECONFLICT;
  if (state && (!strcmp(state, "40001") || !strcmp(state, "40P01"))) {
    if (q->in_tx) q->tx_collided = 1;
    return -EAGAIN;
  }
  if (state && !strcmp(state, "25P02") && q->tx_collided) return -EAGAIN;
  return SPD_ESTORE;
}

PGresult *pg_run(struct pg_store *q, int slot, const char *sql, pg_params_t *p,
                 int binary_result, int *rc, const char *what) {
  PGresult *r = NULL;
  *rc = 0;
  for (int attempt = 0; attempt < 2; attempt++) {
    if (q->tx_broken) {
      *rc = SPD_ESTORE;
      break;
    }
    if (!q->conn || PQstatus(q->conn) != CONNECTION_OK) {
      if ((*rc = pg_recover(q))) break;
    }
    if (slot >= 0 && !q->prepared[slot]) {
      char name[16];
      snprintf(name, sizeof(name), "s%d", slot);
      r = PQprepare(q->conn, name, sql, p ? p->n : 0, NULL);
      if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        if (PQstatus(q->conn) != CONNECTION_OK && !q->in_tx) {
          PQclear(r);
          r = NULL;
          continue;
        }
        /* Preparing takes the statement's table locks too: it can deadlock
         * like running it. The failed result is no answer to return. */
        *rc = pg_result_rc(q, r);
        if (*rc == SPD_ESTORE) log_error("store", "%s: prepare: %s", what, PQresultErrorMessage(r));
        PQclear(r);
        r = NULL;
        break;
      }
      PQclear(r);
      q->prepared[slot] = 1;
    }
    if (slot >= 0) {
      char name[16];
      snprintf(name, sizeof(name), "s%d", slot);
      r = PQexecPrepared(q->conn, name, p ? p->n : 0, p ? p->v : NULL, p ? p->len : NULL,
                         p ? p->fmt : NULL, binary_result);
    } else {
      r = PQexecParams(q->conn, sql, p ? p->n : 0, NULL, p ? p->v : NULL, p ? p->len : NULL,
                       p ? p->fmt : NULL, binary_result);
    }
    ExecStatusType st = PQresultStatus(r);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) break;
    if (PQstatus(q->conn) != CONNECTION_OK) {
      log_warn("store", "%s: connection lost: %s", what, PQerrorMessage(q->conn));
      PQclear(r);
      r = NULL;
      if (q->in_tx) {
        q->tx_broken = 1;
        *rc = SPD_ESTORE;
        break;
      }
      continue;
    }
    *rc = pg_result_rc(q, r);
    if (*rc == SPD_ESTORE) log_error("store", "%s: %s", what, PQresultErrorMessage(r));
    PQclear(r);
    r = NULL;
    break;
  }
  if (!r && !*rc) *rc = SPD_ESTORE;
  if (p) pg_params_release(p);
  return r;
}

int pg_list(struct pg_store *q, int slot, const char *sql, const char *what,
            int (*row)(const PGresult *r, int i, void *out), void *out) {
  int rc;
  PGresult *r = pg_run(q, slot, sql, NULL, 0, &rc, what);
  if (!r) return rc;
  for (int i = 0; i < PQntuples(r) && !rc; i++) rc = row(r, i, out);
  PQclear(r);
  return rc;
}

int pg_cmd(struct pg_store *q, int slot, const char *sql, pg_params_t *p, int must_change,
           const char *what) {
  int rc;
  PGresult *r = pg_run(q, slot, sql, p, 0, &rc, what);
  if (!r) return rc;
  if (must_change) {
    const char *n = PQcmdTuples(r);
    if (!*n || !strcmp(n, "0")) rc = -ENOENT;
  }
  PQclear(r);
  return rc;
}

int pg_exec(struct pg_store *q, const char *sql, const char *what) {
  if (q->tx_broken) return SPD_ESTORE;
  if (!*sql) return 0;
  if (!q->conn || PQstatus(q->conn) != CONNECTION_OK) {
    int rc = pg_recover(q);
    if (rc) return rc;
  }
  PGresult *r = PQexec(q->conn, sql);
  ExecStatusType st = PQresultStatus(r);
  int rc = 0;
  if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK) {
    if (PQstatus(q->conn) != CONNECTION_OK) {
      if (q->in_tx) q->tx_broken = 1;
      log_warn("store", "%s: connection lost", what);
      rc = SPD_ESTORE;
    } else {
      rc = pg_result_rc(q, r);
      if (rc == SPD_ESTORE) log_error("store", "%s: %s", what, PQresultErrorMessage(r));
    }
  }
  PQclear(r);
  return rc;
}

/* ---- notifications ---- */

static int pg_send_notes(struct pg_store *q, unsigned what) {
  char payload[16];
  snprintf(payload, sizeof(payload), "%u", what);
  pg_params_t p = {0};
  pg_p_str(&p, q->channel);
  pg_p_str(&p, payload);
  int rc;
  PGresult *r = pg_run(q, PG_SLOT_CORE + 10, "SELECT pg_notify($1, $2)", &p, 0, &rc, "notify");
  PQclear(r);
  return rc;
}

int pg_note(struct pg_store *q, unsigned what) {
  if (q->in_tx) {
    q->notes |= what;
    return 0;
  }
  return pg_send_notes(q, what);
}

int pg_notify(store_t *s, unsigned what) { return pg_note(PGQ(s), what); }

/* ---- transactions ---- */

int pg_tx_begin(store_t *s) {
  struct pg_store *q = PGQ(s);
  if (q->in_tx) return -EINVAL;
  int rc = pg_exec(q, "BEGIN", "begin");
  if (rc) return rc;
  q->in_tx = 1;
  q->sp_depth = 0;
  q->tx_broken = 0;
  q->tx_collided = 0;
  q->notes = 0;
  return 0;
}

static void pg_tx_reset(struct pg_store *q) {
  q->in_tx = 0;
  q->sp_depth = 0;
  q->tx_collided = 0;
  q->notes = 0;
  if (q->tx_broken) {
    q->tx_broken = 0;
    pg_recover(q);
  }
}

int pg_tx_rollback(store_t *s) {
  struct pg_store *q = PGQ(s);
  if (!q->in_tx) return -EINVAL;
  int rc = q->tx_broken ? 0 : pg_exec(q, "ROLLBACK", "rollback");
  pg_tx_reset(q);
  return rc;
}

/* COMMIT of a transaction a failed statement aborted answers "ROLLBACK",
 * successfully: that is a failure (an op that went on past an error it
 * did not insist on), never a commit. */
static int pg_commit_exec(struct pg_store *q) {
  if (!q->conn || PQstatus(q->conn) != CONNECTION_OK) return pg_exec(q, "COMMIT", "commit");
  PGresult *r = PQexec(q->conn, "COMMIT");
  int rc = 0;
  if (PQresultStatus(r) != PGRES_COMMAND_OK) {
    if (PQstatus(q->conn) != CONNECTION_OK) {
      q->tx_broken = 1;
      log_warn("store", "commit: connection lost");
      rc = SPD_ESTORE;
    } else if ((rc = pg_result_rc(q, r)) == SPD_ESTORE) {
      log_error("store", "commit: %s", PQresultErrorMessage(r));
    }
  } else if (!strcmp(PQcmdStatus(r), "ROLLBACK")) {
    log_error("store", "commit: the transaction had failed and was rolled back");
    rc = q->tx_collided ? -EAGAIN : SPD_ESTORE;
  }
  PQclear(r);
  return rc;
}

int pg_tx_commit(store_t *s) {
  struct pg_store *q = PGQ(s);
  if (!q->in_tx) return -EINVAL;
  int rc = q->tx_broken ? SPD_ESTORE : 0;
  if (!rc && q->notes) rc = pg_send_notes(q, q->notes);
  if (!rc) rc = pg_commit_exec(q);
  else if (!q->tx_broken) pg_exec(q, "ROLLBACK", "rollback");
  pg_tx_reset(q);
  return rc;
}

int pg_sp_begin(store_t *s) {
  struct pg_store *q = PGQ(s);
  if (!q->in_tx) return -EINVAL;
  int rc = pg_exec(q, "SAVEPOINT sp", "savepoint");
  if (!rc) q->sp_depth++;
  return rc;
}

/* Ends the innermost savepoint with sql (a release or a rollback to it). */
static int pg_sp_end(struct pg_store *q, const char *sql, const char *what) {
  if (!q->in_tx || q->sp_depth <= 0) return -EINVAL;
  int rc = pg_exec(q, sql, what);
  if (!rc) q->sp_depth--;
  return rc;
}

int pg_sp_release(store_t *s) {
  return pg_sp_end(PGQ(s), "RELEASE SAVEPOINT sp", "release savepoint");
}

int pg_sp_rollback(store_t *s) {
  struct pg_store *q = PGQ(s);
  int rc = pg_sp_end(q, "ROLLBACK TO SAVEPOINT sp; RELEASE SAVEPOINT sp", "rollback savepoint");
  if (!rc) q->tx_collided = 0; /* what collided is undone; the rest stands */
  return rc;
}

int pg_auto_begin(struct pg_store *q, int *began) {
  *began = 0;
  if (q->in_tx) return 0;
  int rc = pg_tx_begin(&q->base);
  if (!rc) *began = 1;
  return rc;
}

int pg_auto_end(struct pg_store *q, int began, int rc) {
  if (!began) return rc;
  if (rc) {
    pg_tx_rollback(&q->base);
    return rc;
  }
  return pg_tx_commit(&q->base);
}

/* ---- claims under concurrency limits ---- */

int pg_claim_lock(store_t *s) {
  struct pg_store *q = PGQ(s);
  if (!q->in_tx) return -EINVAL;
  int rc;
  PGresult *r = pg_run(q, PG_SLOT_CORE + 11,
                       "SELECT pg_advisory_xact_lock(hashtext('spiderd.claim.' || "
                       "current_schema()))",
                       NULL, 0, &rc, "claim lock");
  PQclear(r);
  return rc;
}

/* ---- meta ---- */

int pg_meta_get(store_t *s, const char *key, char **value) {
  struct pg_store *q = PGQ(s);
  pg_params_t p = {0};
  pg_p_str(&p, key);
  int rc;
  PGresult *r = pg_run(q, PG_SLOT_CORE + 1, "SELECT value FROM meta WHERE key = $1", &p, 0,
                       &rc, "read meta");
  if (!r) return rc;
  rc = PQntuples(r) ? pg_str(r, 0, 0, value) : -ENOENT;
  PQclear(r);
  return rc;
}

int pg_meta_set(store_t *s, const char *key, const char *value) {
  pg_params_t p = {0};
  pg_p_str(&p, key);
  pg_p_str(&p, value);
  return pg_cmd(PGQ(s), PG_SLOT_CORE + 2,
                "INSERT INTO meta (key, value) VALUES ($1, $2) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                &p, 0, "write meta");
}

/* ---- schema ---- */

static const char pg_schema_core[] =
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    /* The job tokens' secret, made once under the migration lock so nodes
     * starting together cannot each make a different one. */
    "INSERT INTO meta (key, value) VALUES ('auth.job_secret', "
    "md5(random()::text || clock_timestamp()::text) || "
    "md5(random()::text || clock_timestamp()::text));";

/* Each entry is one schema version; released entries are never edited. */
static const char *const *pg_migrations[] = {
    (const char *const[]){pg_schema_core, pg_schema_jobs, pg_schema_sched, pg_schema_queue,
                          NULL},
    /* 2: each node's spiderd version, written with its beat, so a mixed
     * cluster shows which node runs what; rows from before stay NULL until
     * their node beats again. */
    (const char *const[]){"ALTER TABLE nodes ADD COLUMN version TEXT;", NULL},
    /* 3: users and API tokens (pg/auth.c), in the store so every node
     * sharing it knows them. */
    (const char *const[]){pg_schema_auth, NULL},
    /* 4: a node draining (spiderd drain, or a SIGTERM's drain) says so with
     * its beat, so the cluster and /api/v1/nodes see it takes no jobs. */
    (const char *const[]){"ALTER TABLE nodes ADD COLUMN draining INTEGER NOT NULL DEFAULT 0;",
                          NULL},
    /* 5: a schedule's state, handed from one run to the next (the
     * Sneakpeek face's scraper state); NULL until a crawl or a user sets it. */
    (const char *const[]){"ALTER TABLE schedules ADD COLUMN state TEXT;", NULL},
    /* 6: a job's own fields (jobs.meta), and what a review of its history
     * changed: the state it ended in before a correction, and a note. */
    (const char *const[]){"ALTER TABLE jobs ADD COLUMN meta JSONB;"
                          "ALTER TABLE jobs ADD COLUMN original_state INTEGER;"
                          "ALTER TABLE jobs ADD COLUMN note TEXT;",
                          NULL},
    /* 7: test runs (jobs.test_run), kept out of statistics and of their
     * schedule's history; a schedule's meta, copied into its jobs'. */
    (const char *const[]){"ALTER TABLE jobs ADD COLUMN test INTEGER NOT NULL DEFAULT 0;"
                          "ALTER TABLE schedules ADD COLUMN meta TEXT;",
                          NULL},
    /* 8: a job's health beside the runs like it, with its reasons; a node's
     * memory for crawls, published with its beat. */
    (const char *const[]){"ALTER TABLE jobs ADD COLUMN health TEXT;"
                          "ALTER TABLE jobs ADD COLUMN health_reasons JSONB;"
                          "ALTER TABLE nodes ADD COLUMN mem_free BIGINT NOT NULL DEFAULT 0;"
                          "ALTER TABLE nodes ADD COLUMN mem_reserved BIGINT NOT NULL DEFAULT 0;",
                          NULL},
    /* 9: a job may be paused (state 6) and resumed; the runs of its
     * process, one segment each; and a paused crawl's state, so that any
     * node can resume it (compressed already: stored as it is). */
    (const char *const[]){"ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_state_check;"
                          "ALTER TABLE jobs ADD CONSTRAINT jobs_state_check "
                          "CHECK (state BETWEEN 0 AND 6);"
                          "ALTER TABLE jobs ADD COLUMN segments JSONB;"
                          "CREATE INDEX IF NOT EXISTS jobs_paused ON jobs (id) WHERE state = 6;"
                          "CREATE TABLE job_states (job_id BIGINT PRIMARY KEY, "
                          "data BYTEA NOT NULL, size BIGINT NOT NULL, "
                          "created_ms BIGINT NOT NULL);"
                          "ALTER TABLE job_states ALTER COLUMN data SET STORAGE EXTERNAL;",
                          NULL},
    /* A job may wait for others to end (jobs.create's after): their ids,
     * and the few pending jobs that wait, indexed for each end's look. */
    (const char *const[]){"ALTER TABLE jobs ADD COLUMN \"after\" JSONB;"
                          "CREATE INDEX IF NOT EXISTS jobs_waiting ON jobs (id) "
                          "WHERE state = 0 AND \"after\" IS NOT NULL;",
                          NULL},
};
#define PG_SCHEMA_VERSION ((int)(sizeof(pg_migrations) / sizeof(pg_migrations[0])))

static int pg_migrate(struct pg_store *q, char *err, size_t errlen) {
  char sql[512];
  int rc = pg_exec(q, "BEGIN", "begin migration");
  if (rc) goto fail;
  /* One lock per schema, held to the commit: the first node applies,
   * the others wait and then find nothing left to do. */
  snprintf(sql, sizeof(sql), "SELECT pg_advisory_xact_lock(hashtext('spiderd.%s'))",
           q->schema ? q->schema : "public");
  if ((rc = pg_exec(q, sql, "migration lock"))) goto rollback;
  if (q->schema) {
    snprintf(sql, sizeof(sql), "CREATE SCHEMA IF NOT EXISTS \"%s\"", q->schema);
    if ((rc = pg_exec(q, sql, "create schema"))) goto rollback;
  }
  if ((rc = pg_exec(q, "CREATE TABLE IF NOT EXISTS spiderd_schema (version INTEGER NOT NULL)",
                    "schema version table")))
    goto rollback;
  PGresult *r = PQexec(q->conn, "SELECT coalesce(max(version), 0) FROM spiderd_schema");
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    snprintf(err, errlen, "cannot read the schema version: %s", PQresultErrorMessage(r));
    PQclear(r);
    rc = SPD_ESTORE;
    goto rollback_quiet;
  }
  int version = (int)pg_i64(r, 0, 0);
  PQclear(r);
  if (version > PG_SCHEMA_VERSION) {
    snprintf(err, errlen,
             "the database's schema is version %d, newer than this spiderd knows (%d)",
             version, PG_SCHEMA_VERSION);
    rc = SPD_ESTORE;
    goto rollback_quiet;
  }
  for (int v = version; v < PG_SCHEMA_VERSION; v++) {
    for (const char *const *part = pg_migrations[v]; *part; part++)
      if ((rc = pg_exec(q, *part, "migration"))) goto rollback;
    snprintf(sql, sizeof(sql), "DELETE FROM spiderd_schema; INSERT INTO spiderd_schema VALUES (%d)",
             v + 1);
    if ((rc = pg_exec(q, sql, "schema version"))) goto rollback;
  }
  if ((rc = pg_exec(q, "COMMIT", "commit migration"))) goto fail;
  return 0;
rollback:
  snprintf(err, errlen, "schema migration failed: %s", PQerrorMessage(q->conn));
rollback_quiet:
  pg_exec(q, "ROLLBACK", "rollback migration");
  return rc;
fail:
  snprintf(err, errlen, "schema migration failed: %s", PQerrorMessage(q->conn));
  return rc;
}

/* Splits spiderd's `schema=` parameter off a libpq URL: *conninfo is the
 * URL without it, *schema the name (NULL when absent). */
static int pg_parse_url(const char *url, char **conninfo, char **schema, char *err,
                        size_t errlen) {
  *conninfo = NULL;
  *schema = NULL;
  char *u = strdup(url);
  if (!u) return -ENOMEM;
  char *q = strchr(u, '?');
  if (q) {
    char *out = q + 1, *p = q + 1;
    while (*p) {
      char *amp = strchr(p, '&');
      size_t n = amp ? (size_t)(amp - p) : strlen(p);
      if (n > 7 && !strncmp(p, "schema=", 7)) {
        free(*schema);
        *schema = strndup(p + 7, n - 7);
        for (const char *c = *schema; c && *c; c++)
          if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                (*c >= '0' && *c <= '9') || *c == '_')) {
            snprintf(err, errlen, "store URL: schema '%s' must be letters, digits and '_'",
                     *schema);
            free(*schema);
            *schema = NULL;
            free(u);
            return -EINVAL;
          }
        if (*schema && strlen(*schema) > 48) { /* the channel "spiderd_NAME" fits in 63 bytes */
          snprintf(err, errlen, "store URL: schema name is over 48 characters");
          free(*schema);
          *schema = NULL;
          free(u);
          return -EINVAL;
        }
      } else {
        if (out != q + 1) *out++ = '&';
        memmove(out, p, n);
        out += n;
      }
      p = amp ? amp + 1 : p + n;
    }
    *out = '\0';
    if (out == q + 1) *q = '\0';
  }
  *conninfo = u;
  return 0;
}

/* Adds key=value to a libpq URL that does not set key. */
static int pg_conninfo_default(char **conninfo, const char *key, const char *value) {
  char probe[64];
  snprintf(probe, sizeof(probe), "%s=", key);
  if (strstr(*conninfo, probe)) return 0;
  char *ci = NULL;
  if (asprintf(&ci, "%s%s%s=%s", *conninfo, strchr(*conninfo, '?') ? "&" : "?", key, value) < 0)
    return -ENOMEM;
  free(*conninfo);
  *conninfo = ci;
  return 0;
}

/* A server gone silent (a partition that drops packets) is noticed on an
 * idle connection, or one waiting for a reply, within about 25 s, and on
 * one whose request goes unacknowledged within 30 s, instead of the
 * system's defaults (two hours; some 15 minutes). A URL's own win. */
static int pg_conninfo_keepalive(char **conninfo) {
  int rc = pg_conninfo_default(conninfo, "keepalives_idle", "10");
  if (!rc) rc = pg_conninfo_default(conninfo, "keepalives_interval", "5");
  if (!rc) rc = pg_conninfo_default(conninfo, "keepalives_count", "3");
  if (!rc) rc = pg_conninfo_default(conninfo, "tcp_user_timeout", "30000");
  return rc;
}

/* The settings of a connection to url (the store's or a watch's): libpq
 * loaded, conninfo, schema and notice channel, a connect timeout of
 * connect_timeout seconds and TCP keep-alives. */
static int pg_conn_setup(struct pg_store *q, const char *url, const char *connect_timeout,
                         char *err, size_t errlen) {
  int rc = pq_lazy_load(err, errlen);
  if (!rc) rc = pg_parse_url(url, &q->conninfo, &q->schema, err, errlen);
  if (rc) return rc;
  snprintf(q->channel, sizeof(q->channel), "spiderd%s%s", q->schema ? "_" : "",
           q->schema ? q->schema : "");
  rc = pg_conninfo_default(&q->conninfo, "connect_timeout", connect_timeout);
  if (!rc) rc = pg_conninfo_keepalive(&q->conninfo);
  return rc;
}

/* Frees what pg_conn_setup and a connect left in q (not q). */
static void pg_conn_release(struct pg_store *q) {
  if (q->conn) PQfinish(q->conn);
  free(q->conninfo);
  free(q->schema);
}

static void pg_close(store_t *s) {
  struct pg_store *q = PGQ(s);
  if (!q) return;
  pg_conn_release(q);
  free(q);
}

static int pg_open(const char *url, const char *rest, store_t **out, char *err,
                   size_t errlen) {
  (void)rest;
  struct pg_store *q = calloc(1, sizeof(*q));
  if (!q) return -ENOMEM;
  q->base.ops = &store_pg_ops;
  /* A store thread reconnecting to a host that accepts and never answers
   * would otherwise wait for good, and every op queued behind it. */
  int rc = pg_conn_setup(q, url, "5", err, errlen);
  if (rc) goto out;
  if ((rc = pg_connect(q, err, errlen))) goto out;
  if ((rc = pg_migrate(q, err, errlen))) goto out;
  *out = &q->base;
out:
  if (rc) pg_close(&q->base);
  return rc;
}

/* ---- watch: LISTEN on a connection of its own ---- */

struct pg_watch {
  struct store_watch base;
  struct pg_store q; /* only conn, conninfo, schema and channel are used */
  int64_t next_try;  /* no reconnect attempt before (monotonic s) */
};

static int pg_watch_listen(struct pg_watch *w, char *err, size_t errlen) {
  int rc = pg_connect(&w->q, err, errlen);
  if (rc) return rc;
  char sql[160];
  snprintf(sql, sizeof(sql), "LISTEN \"%s\"", w->q.channel);
  rc = pg_exec(&w->q, sql, "listen");
  if (!rc && PQsetnonblocking(w->q.conn, 1)) rc = SPD_ESTORE;
  if (rc) snprintf(err, errlen, "LISTEN failed");
  return rc;
}

static int pg_watch_fd(store_watch_t *ww) {
  struct pg_watch *w = (struct pg_watch *)ww;
  if (!w->q.conn || PQstatus(w->q.conn) != CONNECTION_OK) return -1;
  return PQsocket(w->q.conn);
}

static int pg_watch_read(store_watch_t *ww, unsigned *what) {
  struct pg_watch *w = (struct pg_watch *)ww;
  if (!w->q.conn || PQstatus(w->q.conn) != CONNECTION_OK) {
    char err[256];
    if (pg_watch_listen(w, err, sizeof(err))) return SPD_ESTORE;
    log_info("store", "notifications: reconnected to PostgreSQL");
    *what |= STORE_NOTE_RECONNECT | STORE_NOTE_JOBS | STORE_NOTE_EGGS | STORE_NOTE_CANCEL |
             STORE_NOTE_QUEUES | STORE_NOTE_NODES;
    return 0;
  }
  if (!PQconsumeInput(w->q.conn) || PQstatus(w->q.conn) != CONNECTION_OK) {
    log_warn("store", "notifications: connection lost: %s", PQerrorMessage(w->q.conn));
    PQfinish(w->q.conn);
    w->q.conn = NULL;
    return SPD_ESTORE;
  }
  PGnotify *n;
  while ((n = PQnotifies(w->q.conn))) {
    *what |= (unsigned)strtoul(n->extra, NULL, 10);
    PQfreemem(n);
  }
  return 0;
}

static void pg_watch_close(store_watch_t *ww) {
  struct pg_watch *w = (struct pg_watch *)ww;
  if (!w) return;
  pg_conn_release(&w->q);
  free(w);
}

static int pg_watch_open(const char *url, const char *rest, store_watch_t **out, char *err,
                         size_t errlen) {
  (void)rest;
  struct pg_watch *w = calloc(1, sizeof(*w));
  if (!w) return -ENOMEM;
  w->base.fd = pg_watch_fd;
  w->base.read = pg_watch_read;
  w->base.close = pg_watch_close;
  /* The watch reconnects on the loop thread: never wait long for a host
   * that does not answer. */
  int rc = pg_conn_setup(&w->q, url, "2", err, errlen);
  if (!rc) rc = pg_watch_listen(w, err, errlen);
  if (rc) pg_watch_close(&w->base);
  else *out = &w->base;
  return rc;
}

const struct store_ops store_pg_ops = {
    .name = "postgresql",
    .shared = 1,
    .open = pg_open,
    .close = pg_close,
    .watch_open = pg_watch_open,
#define STORE_OP(op, params) .op = pg_##op,
#include "store/ops.h"
};
