/* See auth.h. */
#include "api/auth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "clock.h"
#include "core/account.h"
#include "core/job.h"
#include "core/names.h"
#include "error.h"
#include "flow/accounts.h"
#include "flow/auth.h"
#include "flow/jobtoken.h"
#include "http/trust.h"
#include "log.h"
#include "addr.h"
#include "net/curl_lazy.h"

#define API_PREFIX "/api/v1"
#define CHECKED_MAX 64  /* passwords remembered as checked */
#define FAILS_MAX 256   /* client addresses with recent failed logins */

/* A password checked once is remembered by its HMAC under a key of this
 * process, so memory never holds it, until the principals change. */
typedef struct checked {
  unsigned char mac[32];
  uint64_t epoch;
} checked_t;

typedef struct fail {
  char addr[STORE_ADDR_MAX];
  int64_t start_ms; /* the window's start */
  int count;
} fail_t;

/* A job's project never changes: looked up once per job token. */
#define JOB_CACHE_MAX 64
typedef struct job_project {
  int64_t id;
  char *project;
} job_project_t;

typedef struct auth {
  app_t *app;
  principal_list_t list;
  json_t *accounts; /* read with list (core/account.h) */
  char *gen;       /* store_auth_gen of list */
  uint64_t epoch;  /* grows with every new list */
  unsigned char key[32];
  checked_t checked[CHECKED_MAX];
  size_t checked_next;
  fail_t fails[FAILS_MAX];
  uv_timer_t timer;
  int timer_open;
  int polling, poll_again;
  struct waiter *waiters; /* auth_reload's callbacks for the next read */
  job_project_t jobs[JOB_CACHE_MAX]; /* running jobs' projects, by row id */
  size_t jobs_next;
  int exposed;     /* auth_exposed() */
  int pending;     /* store reads and password checks in flight */
  int closing;     /* auth_free ran: the last of them frees */
} auth_t;

/* What the authenticator keeps with a request (the who first: auth_who()). */
typedef struct auth_req {
  auth_who_t who;
  const char *why;       /* a refusal's reason */
  const char *kept;      /* LATER: the user's kept hash, and */
  const char *password;  /*   the password to check against it */
  const char *user;
  uint64_t epoch;
  int job_lookup;        /* LATER: find the job's project in the store */
} auth_req_t;

static const auth_who_t anonymous_admin = {AUTH_ANONYMOUS, ROLE_ADMIN, "anonymous", "", "", "", 0, NULL, NULL, NULL};
static const auth_who_t anonymous_reader = {AUTH_ANONYMOUS, ROLE_READ, "anonymous", "", "", "", 0, NULL, NULL, NULL};

static void auth_maybe_free(auth_t *a) {
  if (!a->closing || a->pending || a->timer_open) return;
  principal_list_release(&a->list);
  json_decref(a->accounts);
  free(a->gen);
  for (size_t i = 0; i < JOB_CACHE_MAX; i++) free(a->jobs[i].project);
  free(a);
}

/* ---- secrets ---- */

static const char hexd[] = "0123456789abcdef";

static void to_hex(const unsigned char *b, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = hexd[b[i] >> 4];
    out[2 * i + 1] = hexd[b[i] & 15];
  }
  out[2 * n] = '\0';
}

static int from_hex(const char *s, unsigned char *out, size_t n) {
  if (strlen(s) != 2 * n) return -EINVAL;
  for (size_t i = 0; i < n; i++) {
    int v = 0;
    for (int k = 0; k < 2; k++) {
      char c = s[2 * i + (size_t)k];
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
      if (d < 0) return -EINVAL;
      v = v * 16 + d;
    }
    out[i] = (unsigned char)v;
  }
  return 0;
}

/* Compares without an early exit: timing must not tell how much matched. */
static int same(const char *x, const char *y) {
  size_t n = strlen(x), m = strlen(y);
  unsigned char d = n != m;
  for (size_t i = 0; i < n && i < m; i++) d |= (unsigned char)(x[i] ^ y[i]);
  return d == 0;
}

#define TOKEN_KEY "spiderd api token v1"

int auth_token_hash(const char *secret, char hash[65]) {
  unsigned char md[32];
  int rc = curl_lazy_hmac_sha256(TOKEN_KEY, strlen(TOKEN_KEY), secret, strlen(secret), md);
  if (rc) return rc;
  to_hex(md, sizeof(md), hash);
  return 0;
}

int auth_token_new(char id[17], char text[96], char hash[65]) {
  unsigned char b[40];
  if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) return -EIO;
  char secret[65];
  to_hex(b, 8, id);
  to_hex(b + 8, 32, secret);
  snprintf(text, 96, AUTH_TOKEN_PREFIX "%s_%s", id, secret);
  return auth_token_hash(secret, hash);
}

char *auth_password_hash(const char *password) {
  unsigned char salt[16], md[32];
  if (getrandom(salt, sizeof(salt), 0) != (ssize_t)sizeof(salt)) return NULL;
  if (curl_lazy_pbkdf2_sha256(password, strlen(password), salt, sizeof(salt), AUTH_PBKDF2_ITER,
                              md, sizeof(md)))
    return NULL;
  char s[33], h[65], *out = NULL;
  to_hex(salt, sizeof(salt), s);
  to_hex(md, sizeof(md), h);
  if (asprintf(&out, "pbkdf2-sha256$%d$%s$%s", AUTH_PBKDF2_ITER, s, h) < 0) return NULL;
  return out;
}

int auth_password_check(const char *kept, const char *password) {
  int iter = 0, n = 0;
  char salt_hex[129], hash_hex[129];
  if (sscanf(kept, "pbkdf2-sha256$%d$%128[0-9a-f]$%128[0-9a-f]%n", &iter, salt_hex, hash_hex,
             &n) != 3 || kept[n] || iter < 1 || iter > 10000000)
    return 0;
  unsigned char salt[64], want[32], got[32];
  size_t slen = strlen(salt_hex) / 2;
  if (slen > sizeof(salt) || from_hex(salt_hex, salt, slen) || from_hex(hash_hex, want, 32))
    return 0;
  if (curl_lazy_pbkdf2_sha256(password, strlen(password), salt, slen, iter, got, sizeof(got)))
    return 0;
  unsigned char d = 0;
  for (size_t i = 0; i < sizeof(got); i++) d |= (unsigned char)(got[i] ^ want[i]);
  return d == 0;
}

static int node_mac(const char *secret, long long secs, const char *path, char hex[65]) {
  char *msg = NULL;
  if (asprintf(&msg, "node %lld %s", secs, path) < 0) return -ENOMEM;
  unsigned char md[32];
  int rc = curl_lazy_hmac_sha256(secret, strlen(secret), msg, strlen(msg), md);
  free(msg);
  if (!rc) to_hex(md, sizeof(md), hex);
  return rc;
}

int auth_node_token(const char *secret, const char *path, int64_t now_ms, char out[128]) {
  char hex[65];
  long long secs = (long long)(now_ms / 1000);
  int rc = node_mac(secret, secs, path, hex);
  if (!rc) snprintf(out, 128, "sdn.%lld.%s", secs, hex);
  return rc;
}

/* ---- failed logins ---- */

static fail_t *fail_find(auth_t *a, const char *addr, int64_t now, int make) {
  fail_t *oldest = &a->fails[0];
  for (size_t i = 0; i < FAILS_MAX; i++) {
    fail_t *f = &a->fails[i];
    if (f->count && !strcmp(f->addr, addr)) {
      if (now - f->start_ms < AUTH_FAIL_WINDOW_MS) return f;
      f->count = 0; /* the window is over */
      return make ? (f->start_ms = now, f) : NULL;
    }
    if (!f->count || f->start_ms < oldest->start_ms) oldest = f;
  }
  if (!make) return NULL;
  snprintf(oldest->addr, sizeof(oldest->addr), "%s", addr);
  oldest->start_ms = now;
  oldest->count = 0;
  return oldest;
}

/* The limit for a client address, 0 for none. The machine itself (loopback,
 * the Unix socket) may run without authentication at all, and is where a
 * Scrapyd client's test suite or a monitor checks a few wrong credentials on
 * purpose before its real calls: not throttled unless asked. addr is the
 * client behind a trusted proxy, so a proxy on loopback does not exempt
 * the clients it forwards. */
static int fail_limit(const auth_t *a, const char *addr) {
  const config_t *cfg = &a->app->cfg;
  if (!cfg->auth_throttle_loopback && http_addr_local(addr)) return 0;
  return cfg->auth_fail_limit;
}

static int throttled(auth_t *a, const char *addr, int64_t now) {
  int limit = fail_limit(a, addr);
  fail_t *f = limit > 0 ? fail_find(a, addr, now, 0) : NULL;
  return f && f->count >= limit;
}

static void failed(auth_t *a, const char *addr, int64_t now) {
  int limit = fail_limit(a, addr);
  if (limit <= 0) return;
  fail_t *f = fail_find(a, addr, now, 1);
  if (++f->count == limit)
    log_warn("auth", "%s: %d failed logins within %d s: refused for the rest of the minute",
             addr, limit, AUTH_FAIL_WINDOW_MS / 1000);
}

/* ---- identifying a caller ---- */

static const principal_t *find(const auth_t *a, principal_kind_t kind, const char *name) {
  for (size_t i = 0; i < a->list.n; i++)
    if (a->list.v[i].kind == kind && !strcmp(a->list.v[i].name, name)) return &a->list.v[i];
  return NULL;
}

static char *req_strdup(http_req_t *r, const char *s) {
  size_t n = strlen(s);
  char *p = http_req_alloc(r, n + 1);
  if (p) memcpy(p, s, n);
  return p;
}

/* A member of an account below admin sees the account's projects only,
 * within its own limit. */
static int who_account(const auth_t *a, http_req_t *r, auth_who_t *w, const principal_t *p) {
  const char *acct = account_of(a->accounts, p->kind, p->name, p->owner);
  if (!acct) return 0;
  w->account = req_strdup(r, acct);
  if (!w->account) return -ENOMEM;
  if (p->role >= ROLE_ADMIN) return 0;
  char *scope = account_scope(a->accounts, acct, w->projects);
  w->own_projects = w->projects;
  w->projects = scope ? req_strdup(r, scope) : NULL;
  free(scope);
  return w->projects ? 0 : -ENOMEM;
}

/* Fills who from a principal (copied: the list may change meanwhile). */
static int who_of(const auth_t *a, http_req_t *r, auth_who_t *w, const principal_t *p) {
  char actor[160];
  if (p->kind == PRINCIPAL_USER)
    snprintf(actor, sizeof(actor), "%s", p->name);
  else
    snprintf(actor, sizeof(actor), "token %.8s (%.64s)", p->name, p->label);
  w->kind = p->kind == PRINCIPAL_USER ? AUTH_USER : AUTH_TOKEN;
  w->role = p->role;
  w->actor = req_strdup(r, actor);
  w->name = req_strdup(r, p->name);
  w->projects = req_strdup(r, p->projects ? p->projects : "");
  if (!w->actor || !w->name || !w->projects) return -ENOMEM;
  return who_account(a, r, w, p);
}

static int by_token(auth_t *a, http_req_t *r, auth_req_t *ar, const char *text, int64_t now) {
  const char *id = text + strlen(AUTH_TOKEN_PREFIX);
  const char *us = strchr(id, '_');
  char idbuf[40], hash[65];
  if (!us || (size_t)(us - id) >= sizeof(idbuf)) {
    ar->why = "this is not a spiderd API token";
    return HTTP_AUTH_DENY;
  }
  memcpy(idbuf, id, (size_t)(us - id));
  idbuf[us - id] = '\0';
  const principal_t *p = find(a, PRINCIPAL_TOKEN, idbuf);
  if (auth_token_hash(us + 1, hash) || !p || !same(hash, p->secret)) {
    ar->why = "unknown or revoked API token";
    return HTTP_AUTH_DENY;
  }
  if (p->expires_ms && p->expires_ms <= now) {
    ar->why = "this API token has expired";
    return HTTP_AUTH_DENY;
  }
  return who_of(a, r, &ar->who, p) ? HTTP_AUTH_DENY : HTTP_AUTH_ALLOW;
}

/* The MAC a checked password is remembered by: HMAC(HMAC(key, user),
 * password), so neither needs copying next to the other, whatever their
 * length. 0, or -ENOENT (no libcrypto: nothing is remembered). */
static int checked_mac(const auth_t *a, const char *user, const char *password,
                       unsigned char mac[32]) {
  unsigned char k[32];
  int rc = curl_lazy_hmac_sha256(a->key, sizeof(a->key), user, strlen(user), k);
  if (!rc) rc = curl_lazy_hmac_sha256(k, sizeof(k), password, strlen(password), mac);
  return rc;
}

static int was_checked(const auth_t *a, const unsigned char mac[32]) {
  for (size_t i = 0; i < CHECKED_MAX; i++)
    if (a->checked[i].epoch == a->epoch && !memcmp(a->checked[i].mac, mac, 32)) return 1;
  return 0;
}

static int by_password(auth_t *a, http_req_t *r, auth_req_t *ar, const char *user,
                       const char *password) {
  const config_t *cfg = &a->app->cfg;
  if (cfg->username[0] && cfg->password[0] && !strcmp(user, cfg->username)) {
    if (!same(password, cfg->password)) {
      ar->why = "wrong user name or password";
      return HTTP_AUTH_DENY;
    }
    ar->who.kind = AUTH_SCRAPYD;
    ar->who.role = ROLE_ADMIN;
    ar->who.actor = ar->who.name = user;
    return HTTP_AUTH_ALLOW;
  }
  const principal_t *p = find(a, PRINCIPAL_USER, user);
  if (!p) {
    ar->why = "wrong user name or password";
    return HTTP_AUTH_DENY;
  }
  if (who_of(a, r, &ar->who, p)) return HTTP_AUTH_DENY;
  unsigned char mac[32];
  if (!checked_mac(a, user, password, mac) && was_checked(a, mac)) return HTTP_AUTH_ALLOW;
  ar->kept = req_strdup(r, p->secret);
  ar->user = user;
  ar->password = password;
  ar->epoch = a->epoch;
  return ar->kept ? HTTP_AUTH_LATER : HTTP_AUTH_DENY;
}

/* The job whose meta path is /jobs/ID/meta (jobs.meta), 0 for any other
 * path: a job's token may patch its own job's meta only. */
static int64_t meta_path_job(const char *rest) {
  if (!rest || strncmp(rest, "/jobs/", 6)) return 0;
  const char *p = rest + 6;
  size_t digits = strspn(p, "0123456789");
  if (!digits || digits > 18 || strcmp(p + digits, "/meta")) return 0;
  return strtoll(p, NULL, 10);
}

/* A running job's token opens the queue API, POST /jobs (its own child
 * jobs: jobs.create checks the parent), its own job's meta, and JSON-RPC
 * (whose calls are checked one by one) on the node that runs the job. */
static int by_job(auth_t *a, http_req_t *r, auth_req_t *ar, const char *token) {
  const char *path = http_req_path(r);
  size_t n = strlen(API_PREFIX);
  const char *rest = strncmp(path, API_PREFIX, n) ? NULL : path + n;
  int64_t meta_of = meta_path_job(rest);
  int ok = rest && ((!strncmp(rest, "/queues", 7) && (rest[7] == '\0' || rest[7] == '/')) ||
                    !strcmp(rest, "/jsonrpc") || !strcmp(rest, "/jsonrpc/") || meta_of ||
                    (!strcmp(rest, "/jobs") && !strcmp(http_req_method(r), "POST")));
  int64_t id = ok ? jobtoken_check(a->app->job_secret, token) : 0;
  if (meta_of && meta_of != id) id = 0;
  if (id <= 0 || !flow_running_here(&a->app->flow, id)) {
    ar->why = "not a token of a job running on this node, or not for this path";
    return HTTP_AUTH_DENY;
  }
  char actor[32];
  snprintf(actor, sizeof(actor), "job %lld", (long long)id);
  ar->who.kind = AUTH_JOB;
  ar->who.role = ROLE_DEPLOY; /* every queue op, as before roles: rest.c keeps it to queues.* */
  ar->who.job_id = id;
  ar->who.actor = req_strdup(r, actor);
  if (!ar->who.actor) return HTTP_AUTH_DENY;
  for (size_t i = 0; i < JOB_CACHE_MAX; i++)
    if (a->jobs[i].id == id && a->jobs[i].project) {
      ar->who.job_project = req_strdup(r, a->jobs[i].project);
      return ar->who.job_project ? HTTP_AUTH_ALLOW : HTTP_AUTH_DENY;
    }
  ar->job_lookup = 1;
  return HTTP_AUTH_LATER;
}

/* Another node fetching a log or items file for its caller. */
static int by_node(auth_t *a, http_req_t *r, auth_req_t *ar, const char *token, int64_t now) {
  const char *path = http_req_path(r);
  long long secs = 0;
  int n = 0;
  char got[65], want[65];
  int ok = (!strncmp(path, "/logs/", 6) || !strncmp(path, "/items/", 7)) &&
           (!strcmp(http_req_method(r), "GET") || !strcmp(http_req_method(r), "HEAD")) &&
           sscanf(token, "sdn.%lld.%64[0-9a-f]%n", &secs, got, &n) == 2 && !token[n] &&
           llabs(secs - now / 1000) <= 60 && !node_mac(a->app->job_secret, secs, path, want) &&
           same(got, want);
  if (!ok) {
    ar->why = "not a valid node token for this path";
    return HTTP_AUTH_DENY;
  }
  ar->who.kind = AUTH_NODE;
  ar->who.role = ROLE_READ;
  ar->who.actor = "node";
  return HTTP_AUTH_ALLOW;
}

/* Whether a node without any credential lets addr in as anonymous admin.
 * main.c refuses to start on a public address that way, but the last
 * credential can still vanish while the node runs (deleted through another
 * node of the cluster, or the store edited by hand): then only the node's
 * own machine, trusted enough to run without authentication, or a node
 * run with --insecure lets callers in. */
static int open_to(const app_t *app, const char *addr) {
  return !auth_exposed(app) || http_addr_local(addr);
}

static int on_auth(void *ud, http_req_t *r, const http_credentials_t *c) {
  app_t *app = ud;
  auth_t *a = app->auth;
  auth_req_t *ar = a ? http_req_alloc(r, sizeof(*ar)) : NULL;
  if (!ar) return HTTP_AUTH_DENY;
  ar->who.addr = http_req_addr(r);
  ar->who.projects = ar->who.name = "";
  http_req_set_auth(r, &ar->who);
  if (!auth_enabled(app) && !open_to(app, ar->who.addr)) {
    ar->why = "no user or token is left and this node serves beyond loopback: create an admin "
              "token from the node's own machine (loopback or its Unix socket), or run with "
              "--insecure";
    return HTTP_AUTH_DENY;
  }
  if (!auth_enabled(app)) { /* Scrapyd's way: anyone, whatever they send */
    ar->who = anonymous_admin;
    ar->who.addr = http_req_addr(r);
    return HTTP_AUTH_ALLOW;
  }
  if (c->scheme == HTTP_CRED_NONE) {
    ar->why = "authentication required: basic auth, or Authorization: Bearer <API token>";
    return HTTP_AUTH_DENY;
  }
  int64_t now = clock_wall_ms();
  if (throttled(a, ar->who.addr, now)) return HTTP_AUTH_THROTTLE;
  const char *secret = c->secret ? c->secret : "";
  int v = HTTP_AUTH_DENY;
  if (c->scheme == HTTP_CRED_BAD)
    ar->why = "the Authorization header is neither Basic nor Bearer credentials";
  else if (!strncmp(secret, AUTH_TOKEN_PREFIX, strlen(AUTH_TOKEN_PREFIX)))
    v = by_token(a, r, ar, secret, now);
  else if (c->scheme == HTTP_CRED_BASIC)
    v = by_password(a, r, ar, c->user, secret);
  else if (!strncmp(secret, "sdn.", 4))
    v = by_node(a, r, ar, secret, now);
  else
    v = by_job(a, r, ar, secret);
  if (v == HTTP_AUTH_DENY) failed(a, ar->who.addr, now);
  return v;
}

/* ---- checking a password off the loop ---- */

typedef struct pwcheck {
  uv_work_t work;
  auth_t *a;
  http_req_t *req;
  char *kept, *password;
  int ok;
} pwcheck_t;

static void pw_work(uv_work_t *w) {
  pwcheck_t *pc = w->data;
  pc->ok = auth_password_check(pc->kept, pc->password);
}

static void pw_done(uv_work_t *w, int status) {
  pwcheck_t *pc = w->data;
  auth_t *a = pc->a;
  http_req_t *r = pc->req;
  auth_req_t *ar = http_req_auth(r);
  int ok = status == 0 && pc->ok;
  int64_t now = clock_wall_ms();
  unsigned char mac[32];
  if (ok && !a->closing && ar->epoch == a->epoch && !checked_mac(a, ar->user, ar->password, mac)) {
    checked_t *c = &a->checked[a->checked_next++ % CHECKED_MAX];
    memcpy(c->mac, mac, sizeof(mac));
    c->epoch = a->epoch;
  }
  if (!ok) {
    ar->why = "wrong user name or password";
    if (!a->closing) failed(a, ar->who.addr, now);
  }
  free(pc->kept);
  free(pc->password);
  free(pc);
  a->pending--;
  http_req_auth_done(r, ok ? HTTP_AUTH_ALLOW : HTTP_AUTH_DENY);
  auth_maybe_free(a);
}

/* ---- a job token's project, read once from the store ---- */

typedef struct joblookup {
  auth_t *a;
  http_req_t *req;
  int64_t id;
  char *project;
} joblookup_t;

static int joblookup_fn(store_t *s, void *arg) {
  joblookup_t *jl = arg;
  job_t j;
  memset(&j, 0, sizeof(j));
  int rc = store_job_get(s, jl->id, &j);
  if (!rc && !(jl->project = strdup(j.project ? j.project : ""))) rc = -ENOMEM;
  job_release(&j);
  return rc;
}

static void joblookup_done(void *arg, int rc) {
  joblookup_t *jl = arg;
  auth_t *a = jl->a;
  http_req_t *r = jl->req;
  auth_req_t *ar = http_req_auth(r);
  int ok = !rc && jl->project;
  if (ok && !a->closing) {
    job_project_t *slot = &a->jobs[a->jobs_next++ % JOB_CACHE_MAX];
    free(slot->project);
    slot->id = jl->id;
    slot->project = strdup(jl->project);
  }
  if (ok) ok = (ar->who.job_project = req_strdup(r, jl->project)) != NULL;
  if (!ok) ar->why = "the job of this token cannot be read now";
  free(jl->project);
  free(jl);
  a->pending--;
  http_req_auth_done(r, ok ? HTTP_AUTH_ALLOW : HTTP_AUTH_DENY);
  auth_maybe_free(a);
}

static void job_later(app_t *app, http_req_t *r) {
  auth_t *a = app->auth;
  auth_req_t *ar = http_req_auth(r);
  joblookup_t *jl = calloc(1, sizeof(*jl));
  if (jl) {
    jl->a = a;
    jl->req = r;
    jl->id = ar->who.job_id;
  }
  if (!jl || store_submit(app->store, STORE_READ, joblookup_fn, jl, joblookup_done)) {
    free(jl);
    ar->why = "out of memory";
    http_req_auth_done(r, HTTP_AUTH_DENY);
    return;
  }
  a->pending++;
}

int auth_job_queue(const app_t *app, const auth_who_t *who, const char *queue, char *err,
                   size_t errlen) {
  if (who->kind != AUTH_JOB || !queue) return 0;
  size_t n = strcspn(queue, ".");
  const char *mine = who->job_project ? who->job_project : "";
  if (strlen(mine) == n && !strncmp(queue, mine, n)) return 0;
  char *project = strndup(queue, n), *dir = NULL;
  struct stat st;
  int other = project && name_valid("project", project, NULL, 0) && project[0] != '.' &&
              asprintf(&dir, "%s/%s", app->cfg.eggs_dir, project) >= 0 && !stat(dir, &st) &&
              S_ISDIR(st.st_mode);
  if (other)
    snprintf(err, errlen, "%s of project '%.200s' may not use queue '%.200s' of project '%s'",
             who->actor, mine, queue, project);
  free(dir);
  free(project);
  return other ? SPD_EFORBIDDEN : 0;
}

static void on_later(void *ud, http_req_t *r) {
  app_t *app = ud;
  auth_t *a = app->auth;
  auth_req_t *ar = http_req_auth(r);
  if (ar->job_lookup) {
    job_later(app, r);
    return;
  }
  pwcheck_t *pc = calloc(1, sizeof(*pc));
  if (pc) {
    pc->kept = strdup(ar->kept);
    pc->password = strdup(ar->password);
  }
  if (!pc || !pc->kept || !pc->password) goto fail;
  pc->a = a;
  pc->req = r;
  pc->work.data = pc;
  if (uv_queue_work(app->loop, &pc->work, pw_work, pw_done)) goto fail;
  a->pending++;
  return;
fail:
  if (pc) {
    free(pc->kept);
    free(pc->password);
    free(pc);
  }
  ar->why = "out of memory";
  http_req_auth_done(r, HTTP_AUTH_DENY);
}

/* ---- refusals ---- */

static void on_deny(void *ud, http_req_t *r, int verdict) {
  app_t *app = ud;
  const auth_req_t *ar = http_req_auth(r);
  int code = verdict == HTTP_AUTH_THROTTLE ? SPD_ETHROTTLED : SPD_EUNAUTHORIZED;
  char msg[256];
  if (verdict == HTTP_AUTH_THROTTLE)
    snprintf(msg, sizeof(msg), "%d failed logins from %s within %d s: try again later",
             app->cfg.auth_fail_limit, http_req_addr(r), AUTH_FAIL_WINDOW_MS / 1000);
  else
    snprintf(msg, sizeof(msg), "%s", ar && ar->why ? ar->why : "authentication required");
  if (verdict == HTTP_AUTH_THROTTLE) {
    char secs[16];
    snprintf(secs, sizeof(secs), "%d", AUTH_FAIL_WINDOW_MS / 1000);
    http_reply_header(r, "Retry-After", secs);
  } else {
    http_reply_header(r, "WWW-Authenticate", http_server_www_auth(app->http));
  }
  const char *path = http_req_path(r);
  if (strncmp(path, API_PREFIX "/", strlen(API_PREFIX) + 1) && strcmp(path, API_PREFIX)) {
    /* Scrapyd's endpoints, logs and pages answer as Twisted does */
    const char *text = verdict == HTTP_AUTH_THROTTLE ? "Too Many Requests" : "Unauthorized";
    http_reply(r, spd_http_status(code), "text/html", text, strlen(text));
    return;
  }
  json_t *o = json_pack("{s:{s:s,s:s,s:{}}}", "error", "code", spd_errname(code), "message", msg,
                        "details");
  char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
  json_decref(o);
  if (!body) {
    http_reply(r, 500, "text/plain; charset=utf-8", "out of memory\n", 14);
    return;
  }
  http_reply(r, spd_http_status(code), "application/json", body, strlen(body));
  free(body);
}

/* ---- who, and what they may do ---- */

int auth_exposed(const app_t *app) { return app->auth && app->auth->exposed; }

int auth_enabled(const app_t *app) {
  const auth_t *a = app->auth;
  return (app->cfg.username[0] && app->cfg.password[0]) || (a && a->list.n > 0);
}

const auth_who_t *auth_who(const app_t *app, const http_req_t *req) {
  const auth_who_t *w = req ? http_req_auth(req) : NULL;
  if (w) return w;
  return auth_enabled(app) ? &anonymous_reader : &anonymous_admin;
}

int auth_allow(const auth_who_t *who, role_t need, const char *project, char *err,
               size_t errlen) {
  if (who->role < need) {
    snprintf(err, errlen, "%s has the role '%s'; this needs '%s'", who->actor,
             role_name(who->role), role_name(need));
    return SPD_EFORBIDDEN;
  }
  if (project && !principal_project_ok(who->projects, project)) {
    snprintf(err, errlen, "%s may not use project '%.200s'", who->actor, project);
    return SPD_EFORBIDDEN;
  }
  return 0;
}

int auth_allow_queue(const auth_who_t *who, role_t need, const char *queue, char *err,
                     size_t errlen) {
  int rc = auth_allow(who, need, NULL, err, errlen);
  if (rc) return rc;
  if (queue && !principal_queue_ok(who->projects, queue)) {
    snprintf(err, errlen, "%s may not use queue '%.200s' (its projects' queues are named "
             "<project> or <project>.<name>)", who->actor, queue);
    return SPD_EFORBIDDEN;
  }
  return 0;
}

int auth_event_visible(const auth_who_t *who, const event_t *e) {
  if (!who->projects[0]) return 1;
  const char *project = json_string_value(json_object_get(e->data, "project"));
  if (project) return principal_project_ok(who->projects, project);
  const char *queue = json_string_value(json_object_get(e->data, "queue"));
  return queue && principal_queue_ok(who->projects, queue);
}

int auth_cached(const app_t *app, principal_kind_t kind, const char *name, principal_t *out,
                char **gen) {
  const auth_t *a = app->auth;
  memset(out, 0, sizeof(*out));
  *gen = NULL;
  if (!a) return 0;
  if (!(*gen = strdup(a->gen ? a->gen : ""))) return -ENOMEM;
  const principal_t *p = find(a, kind, name);
  int rc = p ? principals_copy(p, out) : 0;
  if (rc) {
    free(*gen);
    *gen = NULL;
  }
  return rc;
}

/* ---- keeping the principals fresh ---- */

typedef struct waiter {
  struct waiter *next;
  void (*cb)(void *ud);
  void *ud;
} waiter_t;

typedef struct poll_op {
  auth_t *a;
  char *gen;      /* in: what we have; out: what the store has */
  int changed;
  principal_list_t list;
  json_t *accounts;
  waiter_t *waiters; /* called once this read is in */
} poll_op_t;

static void waiters_run(waiter_t *w) {
  while (w) {
    waiter_t *next = w->next;
    w->cb(w->ud);
    free(w);
    w = next;
  }
}

static int poll_fn(store_t *s, void *arg) {
  poll_op_t *p = arg;
  char *gen = NULL;
  int rc = store_auth_gen(s, &gen);
  if (rc) return rc;
  if (p->gen && !strcmp(gen, p->gen)) {
    free(gen);
    return 0;
  }
  free(p->gen);
  p->gen = gen;
  p->changed = 1;
  rc = store_principals_list(s, &p->list);
  return rc ? rc : accounts_load(s, &p->accounts);
}

static void poll_start(auth_t *a, int force);

static void poll_done(void *arg, int rc) {
  poll_op_t *p = arg;
  auth_t *a = p->a;
  a->pending--;
  a->polling = 0;
  if (rc && !a->closing)
    log_warn("auth", "cannot read users and tokens: %s (keeping the ones known)",
             spd_strerror(rc));
  if (!rc && p->changed && !a->closing) {
    principal_list_release(&a->list);
    a->list = p->list;
    memset(&p->list, 0, sizeof(p->list));
    json_decref(a->accounts);
    a->accounts = p->accounts;
    p->accounts = NULL;
    free(a->gen);
    a->gen = p->gen;
    p->gen = NULL;
    a->epoch++;
  }
  principal_list_release(&p->list);
  json_decref(p->accounts);
  free(p->gen);
  waiter_t *w = p->waiters;
  free(p);
  waiters_run(w);
  if (a->poll_again && !a->closing) {
    a->poll_again = 0;
    poll_start(a, 1);
  }
  auth_maybe_free(a);
}

static void poll_start(auth_t *a, int force) {
  if (a->closing) return;
  if (a->polling) {
    a->poll_again |= force;
    return;
  }
  poll_op_t *p = calloc(1, sizeof(*p));
  if (p) p->a = a;
  /* forced: read the list whatever the generation says */
  if (p && !force && a->gen && !(p->gen = strdup(a->gen))) {
    free(p);
    p = NULL;
  }
  if (!p || store_submit(a->app->store, STORE_READ, poll_fn, p, poll_done)) {
    if (p) free(p->gen);
    free(p);
    waiter_t *w = a->waiters; /* they wait no more: nothing will be read */
    a->waiters = NULL;
    waiters_run(w);
    return;
  }
  p->waiters = a->waiters;
  a->waiters = NULL;
  a->polling = 1;
  a->pending++;
}

static void on_timer(uv_timer_t *t) { poll_start(t->data, 0); }

void auth_reload(app_t *app, void (*cb)(void *ud), void *ud) {
  auth_t *a = app->auth;
  waiter_t *w = a && !a->closing && cb ? calloc(1, sizeof(*w)) : NULL;
  if (w) {
    w->cb = cb;
    w->ud = ud;
    w->next = a->waiters;
    a->waiters = w;
  }
  if (a) poll_start(a, 1);
  if (cb && !w) cb(ud);
}

int auth_init(app_t *app, principal_list_t *loaded, const char *gen) {
  auth_t *a = calloc(1, sizeof(*a));
  if (!a || getrandom(a->key, sizeof(a->key), 0) != (ssize_t)sizeof(a->key) ||
      !(a->gen = strdup(gen ? gen : ""))) {
    free(a);
    return -ENOMEM;
  }
  a->app = app;
  a->epoch = 1;
  /* once: "localhost" would be resolved at every anonymous request */
  const config_t *cfg = &app->cfg;
  a->exposed = cfg->http_port > 0 && !cfg->insecure && !addr_loopback(cfg->bind_address);
  if (loaded) {
    a->list = *loaded;
    memset(loaded, 0, sizeof(*loaded));
  }
  app->auth = a;
  return 0;
}

void auth_init_accounts(app_t *app, json_t *accounts) {
  json_decref(app->auth->accounts);
  app->auth->accounts = accounts;
}

const json_t *auth_accounts(const app_t *app) { return app->auth ? app->auth->accounts : NULL; }

int auth_start(app_t *app) {
  auth_t *a = app->auth;
  http_set_auth(app->http, on_auth, on_later, on_deny, app);
  int rc = uv_timer_init(app->loop, &a->timer);
  if (rc) return rc;
  a->timer.data = a;
  a->timer_open = 1;
  return uv_timer_start(&a->timer, on_timer, AUTH_POLL_MS, AUTH_POLL_MS);
}

static void on_timer_closed(uv_handle_t *h) {
  auth_t *a = h->data;
  a->timer_open = 0;
  auth_maybe_free(a);
}

void auth_free(app_t *app) {
  auth_t *a = app->auth;
  if (!a) return;
  app->auth = NULL;
  a->closing = 1;
  waiter_t *w = a->waiters;
  a->waiters = NULL;
  waiters_run(w);
  if (a->timer_open) {
    uv_timer_stop(&a->timer);
    uv_close((uv_handle_t *)&a->timer, on_timer_closed);
    return;
  }
  auth_maybe_free(a);
}

int auth_job_op(const char *name) {
  return !strncmp(name, "queues.", 7) || !strcmp(name, "jobs.create") ||
         !strcmp(name, "jobs.meta");
}
