/* The principals' SQL the two SQL backends (store/sqlite/auth.c,
 * store/pg/auth.c) share. P is the backend's parameter prefix: "?" for
 * SQLite, "$" for PostgreSQL, so P "1" reads ?1 or $1; KEEP is a whole
 * parameter ("?3", "$10").
 */
#ifndef SPIDERD_STORE_AUTH_SQL_H
#define SPIDERD_STORE_AUTH_SQL_H

/* Is row T (a table name or alias) a usable admin credential at KEEP
 * (store.h)? Roles are core/principal.h's numbers: admin is 4. */
#define AUTH_SQL_USABLE(T, KEEP)                                            \
  "(" T ".role = 4 AND " T ".secret <> '' AND (" T ".expires_ms = 0 OR " T \
  ".expires_ms > " KEEP "))"

/* Some principal other than (P1, P2) is a usable admin credential. */
#define AUTH_SQL_ANOTHER(P, KEEP)                                                      \
  "EXISTS (SELECT 1 FROM principals o WHERE (o.kind <> " P "1 OR o.name <> " P "2) " \
  "AND " AUTH_SQL_USABLE("o", KEEP) ")"

/* The row of principals is the last usable admin credential: what the
 * keep_admin_ms forms of put and delete must not take away. */
#define AUTH_SQL_LAST_ADMIN(P, KEEP) \
  AUTH_SQL_USABLE("principals", KEEP) " AND NOT " AUTH_SQL_ANOTHER(P, KEEP)

/* Inserts or replaces the principal of parameters 1..9. */
#define AUTH_SQL_PUT(P)                                                                  \
  "INSERT INTO principals (kind, name, label, secret, owner, role, projects, "           \
  "created_ms, expires_ms) VALUES (" P "1, " P "2, " P "3, " P "4, " P "5, " P "6, " P \
  "7, " P "8, " P "9) "                                                                  \
  "ON CONFLICT (kind, name) DO UPDATE SET label = excluded.label, "                     \
  "secret = excluded.secret, owner = excluded.owner, role = excluded.role, "            \
  "projects = excluded.projects, created_ms = excluded.created_ms, "                    \
  "expires_ms = excluded.expires_ms"

#endif
