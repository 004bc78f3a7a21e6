/* Who may call the daemon: the HTTP server's authenticator, and the rules
 * every face (Scrapyd's endpoints, REST, JSON-RPC, SSE, logs, items, the
 * console) applies with what it decided.
 *
 * Callers prove who they are with
 *   - the configured Scrapyd username and password (basic auth): admin;
 *   - a user of the store (basic auth with its name and password);
 *   - an API token ("Authorization: Bearer sdt_...", or as the password of
 *     basic auth, for clients that only speak basic, e.g. scrapyd-deploy);
 *   - a running job's token (SPIDERD_TOKEN in the crawl): the queue API;
 *   - a node's token: another node of the cluster fetching a log or items.
 * Authentication is on as soon as a Scrapyd password is configured or the
 * store holds a user or a token; until then every caller is an anonymous
 * admin, as with Scrapyd (main.c refuses that on a public address).
 *
 * Users and tokens are read from the store into memory, and read again
 * within AUTH_POLL_MS of a change made on any node (store_auth_gen), at
 * once on the node that made it. A password is checked off the loop
 * (PBKDF2), then remembered as checked until the principals change.
 * Failed logins are counted per client address: past [spiderd]
 * auth_fail_limit (10) in AUTH_FAIL_WINDOW_MS, the address gets 429 until
 * the window ends, even with the right credentials. The address is the
 * client behind a trusted proxy ([spiderd] trusted_proxies); loopback and
 * the Unix socket are not throttled unless auth_throttle_loopback is on.
 *
 * Loop thread only. Ownership: auth_who() returns memory of the request.
 */
#ifndef SPIDERD_API_AUTH_H
#define SPIDERD_API_AUTH_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "app.h"
#include "core/event.h"
#include "core/principal.h"

#define AUTH_POLL_MS 2000
#define AUTH_FAIL_WINDOW_MS 60000
#define AUTH_PBKDF2_ITER 100000
#define AUTH_TOKEN_PREFIX "sdt_"

typedef enum auth_kind {
  AUTH_ANONYMOUS = 0, /* no authentication configured */
  AUTH_SCRAPYD,       /* the configured username and password */
  AUTH_USER,
  AUTH_TOKEN,
  AUTH_JOB,           /* a running job's token: queues.* only */
  AUTH_NODE,          /* another node of the cluster: GET /logs/, /items/ */
} auth_kind_t;

typedef struct auth_who {
  auth_kind_t kind;
  role_t role;
  const char *actor;    /* "alice", "token 9f2c4a1b (ci deploy)", "job 12", "anonymous" */
  const char *name;     /* the user name, the token id; "" else */
  const char *projects; /* "" = every project */
  const char *addr;     /* the client's address */
  int64_t job_id;       /* AUTH_JOB */
  const char *job_project; /* AUTH_JOB: the job's project */
  const char *account;  /* a user's or token's account (core/account.h); NULL or "": none */
  const char *own_projects; /* an account's member: its own project limit ("" = all),
                               which `projects` narrows to the account's; NULL else */
} auth_who_t;

/* Makes app->auth with the principals read by the caller (taken), before
 * the HTTP server starts. 0 or -ENOMEM. */
int auth_init(app_t *app, principal_list_t *loaded, const char *gen);
/* The accounts' document read with them (taken; NULL: none), before the
 * HTTP server starts. */
void auth_init_accounts(app_t *app, json_t *accounts);
/* The accounts as this node knows them (borrowed until the next reload;
 * NULL when there is none). A caller of an account with a role below
 * admin has `projects` set to the account's (core/account.h). */
const json_t *auth_accounts(const app_t *app);
/* Hooks the authenticator into app->http and starts polling the store. */
int auth_start(app_t *app);
void auth_free(app_t *app);

/* Is authentication on (a configured password, or a user or token)? */
int auth_enabled(const app_t *app);

/* Does this node serve beyond loopback (a TCP listener on an address other
 * than loopback) without --insecure? Decided once, at auth_init: then it
 * must never be open to everyone (main.c, the last admin's guard (flow/auth.h),
 * anonymous callers in on_auth). */
int auth_exposed(const app_t *app);

/* Who sent req: never NULL (a public route's caller is an anonymous reader
 * when authentication is on). */
const auth_who_t *auth_who(const app_t *app, const http_req_t *req);

/* Whether a job's token may call op `name` at all, over REST and JSON-RPC
 * alike: the queue ops, jobs.create (its own children: the op checks the
 * parent) and jobs.meta (its own job: the op checks the id). */
int auth_job_op(const char *name);

/* May who act with role `need` on project (NULL: no project in question)?
 * 0, SPD_EFORBIDDEN with a message in err. */
int auth_allow(const auth_who_t *who, role_t need, const char *project, char *err,
               size_t errlen);
/* The same for a queue name (principal_queue_ok). */
int auth_allow_queue(const auth_who_t *who, role_t need, const char *queue, char *err,
                     size_t errlen);

/* For a job's token (AUTH_JOB; 0 for anyone else): may it use queue? Not
 * when the queue is named after another project that exists on this node
 * (<project> or <project>.<name>, a directory of eggs_dir); other names
 * are shared by every job. 0, SPD_EFORBIDDEN with a message in err. */
int auth_job_queue(const app_t *app, const auth_who_t *who, const char *queue, char *err,
                   size_t errlen);

/* May who see event e? Everyone unlimited sees every event; a caller
 * limited to projects, those whose data names one of them ("project") or
 * one of their queues ("queue"). */
int auth_event_visible(const auth_who_t *who, const event_t *e);

/* For a change of one principal (flow/auth.h's principals_write_t): a copy
 * of the principal of kind and name as this node knows it (*out zeroed when
 * it knows none) and the auth generation that knowledge is of (*gen,
 * malloc'd; NULL, and *out zeroed, before auth_init). 0 or -ENOMEM. */
int auth_cached(const app_t *app, principal_kind_t kind, const char *name, principal_t *out,
                char **gen);

/* The principals changed on this node: read them again now; cb(ud) (may
 * be NULL) runs once they are read (or could not be), so that an answer
 * sent from it is followed by requests that see the change. */
void auth_reload(app_t *app, void (*cb)(void *ud), void *ud);

/* ---- secrets (any thread) ---- */

/* A new token: its public id (16 hex), the text shown once
 * ("sdt_<id>_<64 hex>") and the hash kept. 0 or -EIO. */
int auth_token_new(char id[17], char text[96], char hash[65]);
/* The hash kept for a token's secret part. 0 or -ENOENT (no libcrypto). */
int auth_token_hash(const char *secret, char hash[65]);
/* A user's password as kept: "pbkdf2-sha256$<iter>$<salt hex>$<hash hex>"
 * (malloc'd). Slow on purpose. NULL on failure. */
char *auth_password_hash(const char *password);
/* Does password match the kept hash? 1 or 0. Slow on purpose. */
int auth_password_check(const char *kept, const char *password);

/* A node's token for fetching path from another node of the cluster
 * ("sdn.<unix seconds>.<hex HMAC>"), valid for a minute. 0 or -ENOENT. */
int auth_node_token(const char *secret, const char *path, int64_t now_ms, char out[128]);

#endif
