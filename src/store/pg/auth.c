/* The PostgreSQL backend's users and API tokens (store.h: principals): the
 * same contract as sqlite/auth.c. A put is one upsert, so two nodes writing
 * one principal at once never fail on the key: the later commit wins. The
 * auth generation is meta, written by store.c in the same transaction. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
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
  PA_END,
};

_Static_assert(PA_END <= PG_SLOTS, "pg/auth.c's slots overflow its range");

int pg_principal_put(store_t *s, const principal_t *pr) {
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
  return pg_cmd(PGQ(s), PA_PUT,
                "INSERT INTO principals (kind, name, label, secret, owner, role, projects, "
                "created_ms, expires_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) "
                "ON CONFLICT (kind, name) DO UPDATE SET label = excluded.label, "
                "secret = excluded.secret, owner = excluded.owner, role = excluded.role, "
                "projects = excluded.projects, created_ms = excluded.created_ms, "
                "expires_ms = excluded.expires_ms",
                &p, 0, "put principal");
}

int pg_principal_delete(store_t *s, principal_kind_t kind, const char *name, int *count) {
  pg_params_t p = {0};
  pg_p_i64(&p, kind);
  pg_p_str(&p, name);
  int rc;
  PGresult *r = pg_run(PGQ(s), PA_DELETE, "DELETE FROM principals WHERE kind = $1 AND name = $2",
                       &p, 0, &rc, "delete principal");
  if (!r) return rc;
  *count = (int)strtol(PQcmdTuples(r), NULL, 10);
  PQclear(r);
  return 0;
}

int pg_principals_list(store_t *s, principal_list_t *out) {
  int rc;
  PGresult *r = pg_run(PGQ(s), PA_LIST,
                       "SELECT kind, name, label, secret, owner, role, projects, created_ms, "
                       "expires_ms FROM principals ORDER BY kind, name",
                       NULL, 0, &rc, "list principals");
  if (!r) return rc;
  for (int i = 0; i < PQntuples(r) && !rc; i++) {
    principal_t pr = {.kind = (principal_kind_t)pg_i64(r, i, 0)};
    if ((rc = pg_str(r, i, 1, &pr.name)) || (rc = pg_str(r, i, 2, &pr.label)) ||
        (rc = pg_str(r, i, 3, &pr.secret)) || (rc = pg_str(r, i, 4, &pr.owner)) ||
        (rc = pg_str(r, i, 6, &pr.projects))) {
      principal_release(&pr);
      break;
    }
    pr.role = (role_t)pg_i64(r, i, 5);
    pr.created_ms = pg_i64(r, i, 7);
    pr.expires_ms = pg_i64(r, i, 8);
    if ((rc = principal_list_push(out, &pr))) principal_release(&pr);
  }
  PQclear(r);
  return rc;
}
