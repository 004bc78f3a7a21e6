/* Who may do what: users and API tokens, their roles and project limits.
 *
 * A principal is a user (a name and a password) or an API token (a public
 * id and a secret shown once). Both are kept in the store, so every node of
 * a cluster knows them; neither is kept in the clear: a user's password as a
 * salted PBKDF2-SHA256 hash, a token's secret (32 random bytes) as its
 * HMAC-SHA256 under a fixed key. A token reads "sdt_<id>_<secret>": the id finds its row, the
 * secret proves it.
 *
 * Roles are ordered: each one may do what the ones below it may.
 *   read    every GET: jobs, logs, items, events, queues, schedules, nodes
 *   run     + schedule and cancel jobs, write schedules, queue settings and
 *             elements (put, take, ack, pause, requeue)
 *   deploy  + upload and delete eggs, versions and projects; delete and
 *             purge queues
 *   admin   + users and everyone's tokens, node settings, drain
 *
 * A principal limited to projects sees and touches only those: their jobs,
 * logs, items, eggs, schedules and events, and the queues named after them
 * ("news" or "news.<anything>").
 *
 * Ownership: a principal_t owns its strings; principal_release frees them
 * (not the struct), principal_list_release frees the array too. Pure
 * functions otherwise; no I/O.
 */
#ifndef SPIDERD_CORE_PRINCIPAL_H
#define SPIDERD_CORE_PRINCIPAL_H

#include <stddef.h>
#include <stdint.h>

typedef enum principal_kind {
  PRINCIPAL_USER = 1,
  PRINCIPAL_TOKEN = 2,
} principal_kind_t;

typedef enum role {
  ROLE_NONE = 0, /* nothing (an unknown caller) */
  ROLE_READ = 1,
  ROLE_RUN = 2,
  ROLE_DEPLOY = 3,
  ROLE_ADMIN = 4,
} role_t;

#define PRINCIPAL_NAME_MAX 64     /* user names and token labels */
#define PRINCIPAL_PROJECTS_MAX 64 /* projects one principal may be limited to */
/* A project list that allows none (a member of an account without projects,
 * core/account.h): no project or queue name is "/". */
#define PRINCIPAL_PROJECTS_NONE "/"

typedef struct principal {
  principal_kind_t kind;
  char *name;       /* user: its login name; token: its public id (16 hex) */
  char *label;      /* token: what it is for ("ci deploy"); user: "" */
  char *secret;     /* user: "pbkdf2-sha256$<iter>$<salt hex>$<hash hex>";
                     * token: the hex HMAC-SHA256 of its secret */
  char *owner;      /* token: who created it (a user or token name, or the
                     * configured Scrapyd username); user: "" */
  role_t role;
  char *projects;   /* "" = every project; else "a,b,c" (names never hold ',') */
  int64_t created_ms;
  int64_t expires_ms; /* 0 = never */
} principal_t;

typedef struct principal_list {
  principal_t *v;
  size_t n, cap;
} principal_list_t;

void principal_release(principal_t *p);
void principal_list_release(principal_list_t *l);

/* "read", "run", "deploy", "admin" (and "none" for ROLE_NONE). */
const char *role_name(role_t r);
/* The role named s, or ROLE_NONE when s names none. */
role_t role_parse(const char *s);

/* Is project one of the comma-separated list `projects` ("" = all)? */
int principal_project_ok(const char *projects, const char *project);
/* May a principal with `projects` use the queue named q: a queue named after
 * one of its projects, or "<project>.<anything>"; every queue when "". */
int principal_queue_ok(const char *projects, const char *q);
/* Is every project of `inner` also allowed by `outer`? ("" is every one.) */
int principal_projects_within(const char *outer, const char *inner);

/* Is s a valid user name: 1..PRINCIPAL_NAME_MAX of [A-Za-z0-9_.@-], not
 * starting with '-'? Else a reason in err. */
int principal_name_valid(const char *s, char *err, size_t errlen);

#endif
