/* The SQLite backend's users and API tokens (store.h: principals). One row
 * per principal, keyed by (kind, name): a login or a token's id is one seek,
 * and a list walks the key in the order store.h promises. The auth
 * generation is meta, written by store.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "store/sqlite/internal.h"

enum { SA_PUT, SA_DELETE, SA_LIST, SA_COUNT };

_Static_assert(SA_COUNT <= SQLITE_AUTH_SLOTS, "sqlite/auth.c's statements overflow its slots");

static const char *const sqlite_auth_sql[SA_COUNT] = {
    [SA_PUT] = "INSERT INTO principals (kind, name, label, secret, owner, role, projects, "
               "created_ms, expires_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9) "
               "ON CONFLICT (kind, name) DO UPDATE SET label = excluded.label, "
               "secret = excluded.secret, owner = excluded.owner, role = excluded.role, "
               "projects = excluded.projects, created_ms = excluded.created_ms, "
               "expires_ms = excluded.expires_ms",
    [SA_DELETE] = "DELETE FROM principals WHERE kind = ?1 AND name = ?2",
    [SA_LIST] = "SELECT kind, name, label, secret, owner, role, projects, created_ms, "
                "expires_ms FROM principals ORDER BY kind, name",
};

static sqlite3_stmt *sa_stmt(struct sqlite_store *q, int id) {
  return sqlite_prepare_slot(q, &q->auth_stmt[id], sqlite_auth_sql[id]);
}

int sqlite_principal_put(store_t *s, const principal_t *p) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sa_stmt(q, SA_PUT);
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
  return sqlite_done(q, st, "put principal");
}

int sqlite_principal_delete(store_t *s, principal_kind_t kind, const char *name, int *count) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sa_stmt(q, SA_DELETE);
  if (!st) return SPD_ESTORE;
  sqlite3_bind_int(st, 1, (int)kind);
  sqlite_bind_str(st, 2, name);
  int rc = sqlite_done(q, st, "delete principal");
  if (!rc) *count = sqlite3_changes(q->db);
  return rc;
}

int sqlite_principals_list(store_t *s, principal_list_t *out) {
  struct sqlite_store *q = SQ(s);
  sqlite3_stmt *st = sa_stmt(q, SA_LIST);
  if (!st) return SPD_ESTORE;
  int rc = 0, src;
  while ((src = sqlite3_step(st)) == SQLITE_ROW) {
    principal_t p = {.kind = (principal_kind_t)sqlite3_column_int(st, 0)};
    if ((rc = sqlite_col_str(st, 1, &p.name)) || (rc = sqlite_col_str(st, 2, &p.label)) ||
        (rc = sqlite_col_str(st, 3, &p.secret)) || (rc = sqlite_col_str(st, 4, &p.owner)) ||
        (rc = sqlite_col_str(st, 6, &p.projects))) {
      principal_release(&p);
      break;
    }
    p.role = (role_t)sqlite3_column_int(st, 5);
    p.created_ms = sqlite3_column_int64(st, 7);
    p.expires_ms = sqlite3_column_int64(st, 8);
    if ((rc = principal_list_push(out, &p))) {
      principal_release(&p);
      break;
    }
  }
  if (!rc && src != SQLITE_DONE) rc = sqlite_fail(q, "list principals");
  sqlite3_reset(st);
  return rc;
}
