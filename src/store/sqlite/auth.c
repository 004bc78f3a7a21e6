/* The SQLite backend's users and API tokens (store.h: principals). One row
 * per principal, keyed by (kind, name): a login or a token's id is one seek,
 * and a list walks the key in the order store.h promises. The auth
 * generation is meta, written by store.c.
 *
 * A write that keeps an admin (keep_admin_ms) is one statement whose WHERE
 * holds the check: this connection is the database's only writer and runs
 * it inside its transaction, so nothing changes between check and write. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "store/auth_sql.h"
#include "store/sqlite/internal.h"

enum { SA_PUT, SA_DELETE, SA_LIST, SA_PUT_KEEP, SA_DELETE_KEEP, SA_EXISTS, SA_COUNT };

_Static_assert(SA_COUNT <= SQLITE_AUTH_SLOTS, "sqlite/auth.c's statements overflow its slots");


static const char *const sqlite_auth_sql[SA_COUNT] = {
    [SA_PUT] = AUTH_SQL_PUT("?"),
    [SA_DELETE] = "DELETE FROM principals WHERE kind = ?1 AND name = ?2",
    [SA_LIST] = "SELECT kind, name, label, secret, owner, role, projects, created_ms, "
                "expires_ms FROM principals ORDER BY kind, name",
    /* store.c calls it only when the new row is no usable admin: the old
     * row may change unless it is one and no other is */
    [SA_PUT_KEEP] = AUTH_SQL_PUT("?") " WHERE NOT (" AUTH_SQL_LAST_ADMIN("?", "?10") ")",
    [SA_DELETE_KEEP] = "DELETE FROM principals WHERE kind = ?1 AND name = ?2 AND NOT ("
                       AUTH_SQL_LAST_ADMIN("?", "?3") ")",
    [SA_EXISTS] = "SELECT 1 FROM principals WHERE kind = ?1 AND name = ?2",
};

static sqlite3_stmt *sa_stmt(struct sqlite_store *q, int id) {
  return sqlite_prepare_slot(q, &q->auth_stmt[id], sqlite_auth_sql[id]);
}

/* After a write that keeps an admin changed no row: refused when the row
 * is there (SPD_ECONFLICT), else there was nothing to refuse (0). */
static int sa_refused(struct sqlite_store *q, principal_kind_t kind, const char *name) {
  sqlite3_stmt *st = sa_stmt(q, SA_EXISTS);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int(st, 1, (int)kind);
  sqlite_bind_str(st, 2, name);
  int src = sqlite3_step(st);
  int rc = src == SQLITE_ROW ? SPD_ECONFLICT : src == SQLITE_DONE ? 0 : sqlite_fail(q, "principal");
  sqlite3_reset(st);
  return rc;
}

int sqlite_principal_put(store_t *s, const principal_t *p, int64_t keep_admin_ms) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sa_stmt(q, keep_admin_ms ? SA_PUT_KEEP : SA_PUT);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int(st, 1, (int)p->kind);
  sqlite_bind_str(st, 2, p->name);
  sqlite_bind_str(st, 3, p->label);
  sqlite_bind_str(st, 4, p->secret);
  sqlite_bind_str(st, 5, p->owner);
  sqlite3_bind_int(st, 6, (int)p->role);
  sqlite_bind_str(st, 7, p->projects);
  sqlite3_bind_int64(st, 8, p->created_ms);
  sqlite3_bind_int64(st, 9, p->expires_ms);
  if (keep_admin_ms) sqlite3_bind_int64(st, 10, keep_admin_ms);
  int rc = sqlite_done(q, st, "put principal");
  /* an insert or an update changes one row: none is the WHERE's refusal */
  if (!rc && keep_admin_ms && sqlite3_changes(q->db) == 0) rc = SPD_ECONFLICT;
  return rc;
}

int sqlite_principal_delete(store_t *s, principal_kind_t kind, const char *name,
                            int64_t keep_admin_ms, int *count) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sa_stmt(q, keep_admin_ms ? SA_DELETE_KEEP : SA_DELETE);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int(st, 1, (int)kind);
  sqlite_bind_str(st, 2, name);
  if (keep_admin_ms) sqlite3_bind_int64(st, 3, keep_admin_ms);
  int rc = sqlite_done(q, st, "delete principal");
  if (rc) return rc;
  *count = sqlite3_changes(q->db);
  return *count == 0 && keep_admin_ms ? sa_refused(q, kind, name) : 0;
}

/* Appends the principal of SA_LIST's row to the principal_list_t out. */
static int principal_row(sqlite3_stmt *st, void *out) {
  principal_t p = {.kind = (principal_kind_t)sqlite3_column_int(st, 0)};
  int rc;
  if ((rc = sqlite_col_str(st, 1, &p.name)) || (rc = sqlite_col_str(st, 2, &p.label)) ||
      (rc = sqlite_col_str(st, 3, &p.secret)) || (rc = sqlite_col_str(st, 4, &p.owner)) ||
      (rc = sqlite_col_str(st, 6, &p.projects))) {
    principal_release(&p);
    return rc;
  }
  p.role = (role_t)sqlite3_column_int(st, 5);
  p.created_ms = sqlite3_column_int64(st, 7);
  p.expires_ms = sqlite3_column_int64(st, 8);
  if ((rc = principal_list_push(out, &p))) principal_release(&p);
  return rc;
}

int sqlite_principals_list(store_t *s, principal_list_t *out) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sa_stmt(q, SA_LIST);
  if (!st) return SPD_ESTORE;
  return sqlite_each_row(q, st, principal_row, out, "list principals");
}
