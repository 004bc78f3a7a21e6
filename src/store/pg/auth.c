/* The PostgreSQL backend's users and API tokens (store.h: principals): the
 * same contract as sqlite/auth.c. A put is one upsert, so two nodes writing
 * one principal at once never fail on the key: the later commit wins. The
 * auth generation is meta, written by store.c in the same transaction.
 *
 * A write that keeps an admin (keep_admin_ms) first locks the table in
 * SHARE ROW EXCLUSIVE mode, which conflicts with itself and with every
 * other write to it, until the transaction ends; its one statement then
 * checks and writes. Without the lock, at READ COMMITTED, two nodes
 * deleting the two last admins at once would each see the other's admin
 * still there (its delete not committed yet) and both commit: the check
 * must see every write committed before it, and none may commit between
 * the check and our commit. With it, the second waits for the first to
 * commit, and its statement (a new snapshot, at READ COMMITTED) sees the
 * first one's delete. Readers (logins, lists) are not held up. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "store/auth_sql.h"
#include "store/pg/internal.h"

/* Names are COLLATE "C": listed in byte order, as on SQLite and Redis. */
const char pg_schema_auth[] =
    "CREATE TABLE principals ("
    "  kind INTEGER NOT NULL,"
    "  name TEXT COLLATE \"C\" NOT NULL,"
    "  label TEXT NOT NULL DEFAULT '',"
    "  secret TEXT NOT NULL DEFAULT '',"
    "  owner TEXT NOT NULL DEFAULT '',"
    "  role INTEGER NOT NULL,"
    "  projects TEXT NOT NULL DEFAULT '',"
    "  created_ms BIGINT NOT NULL DEFAULT 0,"
    "  expires_ms BIGINT NOT NULL DEFAULT 0,"
    "  PRIMARY KEY (kind, name)"
    ");";

/* Prepared statement slots (store/pg/internal.h: this file owns 320..335). */
enum {
  PA_PUT = PG_SLOT_AUTH,
  PA_DELETE,
  PA_LIST,
  PA_PUT_KEEP,
  PA_DELETE_KEEP,
  PA_EXISTS,
  PA_END,
};

_Static_assert(PA_END <= PG_SLOTS, "pg/auth.c's slots overflow its range");


static int pa_lock(struct pg_store *q) {
  return pg_exec(q, "LOCK TABLE principals IN SHARE ROW EXCLUSIVE MODE", "lock principals");
}

/* After a write that keeps an admin changed no row: refused when the row
 * is there (SPD_ECONFLICT), else there was nothing to refuse (0). */
static int pa_refused(struct pg_store *q, principal_kind_t kind, const char *name) {
  pg_params_t p = {0};
  pg_p_i64(&p, kind);
  pg_p_str(&p, name);
  int rc;
  PGresult *r = pg_run(q, PA_EXISTS, "SELECT 1 FROM principals WHERE kind = $1 AND name = $2",
                       &p, 0, &rc, "principal");
  if (!r) return rc;
  rc = PQntuples(r) > 0 ? SPD_ECONFLICT : 0;
  PQclear(r);
  return rc;
}

/* The rows a write changed. */
static int pa_changed(PGresult *r) { return (int)strtol(PQcmdTuples(r), NULL, 10); }

static int pa_put(store_t *s, const principal_t *pr, int64_t keep_admin_ms) {
  struct pg_store *q = PGQ(s);
  int rc = keep_admin_ms ? pa_lock(q) : 0;
  if (rc) return rc;
  pg_params_t p = {0};
  pg_p_i64(&p, pr->kind);
  pg_p_str(&p, pr->name);
  pg_p_str(&p, pr->label);
  pg_p_str(&p, pr->secret);
  pg_p_str(&p, pr->owner);
  pg_p_i64(&p, pr->role);
  pg_p_str(&p, pr->projects);
  pg_p_i64(&p, pr->created_ms);
  pg_p_i64(&p, pr->expires_ms);
  if (!keep_admin_ms) return pg_cmd(q, PA_PUT, AUTH_SQL_PUT("$"), &p, 0, "put principal");
  pg_p_i64(&p, keep_admin_ms);
  /* store.c calls it only when the new row is no usable admin: the old row
   * may change unless it is one and no other is */
  PGresult *r = pg_run(q, PA_PUT_KEEP,
                       AUTH_SQL_PUT("$") " WHERE NOT (" AUTH_SQL_LAST_ADMIN("$", "$10") ")",
                       &p, 0, &rc, "put principal");
  if (!r) return rc;
  rc = pa_changed(r) == 0 ? SPD_ECONFLICT : 0;
  PQclear(r);
  return rc;
}

static int pa_delete(store_t *s, principal_kind_t kind, const char *name, int64_t keep_admin_ms,
                     int *count) {
  struct pg_store *q = PGQ(s);
  int rc = keep_admin_ms ? pa_lock(q) : 0;
  if (rc) return rc;
  pg_params_t p = {0};
  pg_p_i64(&p, kind);
  pg_p_str(&p, name);
  PGresult *r;
  if (keep_admin_ms) {
    pg_p_i64(&p, keep_admin_ms);
    r = pg_run(q, PA_DELETE_KEEP,
               "DELETE FROM principals WHERE kind = $1 AND name = $2 AND NOT ("
               AUTH_SQL_LAST_ADMIN("$", "$3") ")",
               &p, 0, &rc, "delete principal");
  } else {
    r = pg_run(q, PA_DELETE, "DELETE FROM principals WHERE kind = $1 AND name = $2", &p, 0, &rc,
               "delete principal");
  }
  if (!r) return rc;
  *count = pa_changed(r);
  PQclear(r);
  return *count == 0 && keep_admin_ms ? pa_refused(q, kind, name) : 0;
}

/* A lock lasts as long as a transaction: a write that keeps an admin,
 * called outside one (not through store_submit), makes its own. 1 when it
 * began one, 0 when not needed, < 0 on failure. */
static int pa_tx_begin(store_t *s, int64_t keep_admin_ms) {
  if (!keep_admin_ms || PGQ(s)->in_tx) return 0;
  int rc = pg_tx_begin(s);
  return rc ? rc : 1;
}

static int pa_tx_end(store_t *s, int began, int rc) {
  if (began != 1) return rc;
  if (rc) {
    pg_tx_rollback(s);
    return rc;
  }
  return pg_tx_commit(s);
}

int pg_principal_put(store_t *s, const principal_t *pr, int64_t keep_admin_ms) {
  int began = pa_tx_begin(s, keep_admin_ms);
  if (began < 0) return began;
  return pa_tx_end(s, began, pa_put(s, pr, keep_admin_ms));
}

int pg_principal_delete(store_t *s, principal_kind_t kind, const char *name,
                        int64_t keep_admin_ms, int *count) {
  int began = pa_tx_begin(s, keep_admin_ms);
  if (began < 0) return began;
  return pa_tx_end(s, began, pa_delete(s, kind, name, keep_admin_ms, count));
}

static int principal_row(const PGresult *r, int i, void *out) {
  principal_t pr = {.kind = (principal_kind_t)pg_i64(r, i, 0)};
  int rc;
  if ((rc = pg_str(r, i, 1, &pr.name)) || (rc = pg_str(r, i, 2, &pr.label)) ||
      (rc = pg_str(r, i, 3, &pr.secret)) || (rc = pg_str(r, i, 4, &pr.owner)) ||
      (rc = pg_str(r, i, 6, &pr.projects))) {
    principal_release(&pr);
    return rc;
  }
  pr.role = (role_t)pg_i64(r, i, 5);
  pr.created_ms = pg_i64(r, i, 7);
  pr.expires_ms = pg_i64(r, i, 8);
  if ((rc = principal_list_push(out, &pr))) principal_release(&pr);
  return rc;
}

int pg_principals_list(store_t *s, principal_list_t *out) {
  return pg_list(PGQ(s), PA_LIST,
                 "SELECT kind, name, label, secret, owner, role, projects, created_ms, "
                 "expires_ms FROM principals ORDER BY kind, name",
                 "list principals", principal_row, out);
}
