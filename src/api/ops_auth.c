/* Users and API tokens through the native API (REST and JSON-RPC):
 * who am I, tokens, users. See api/auth.h for what they open.
 *
 * Admins manage everything. A user may also make, list and revoke tokens
 * of its own, never with more than it has itself (a role at most its own,
 * within its projects); another token may not make tokens unless it is an
 * admin's, so one leaked token cannot mint more.
 *
 * Each change is made by flow/auth.h in one store op, with its audit event
 * and the last admin's guard; this file decides whether the guard is on
 * (this node serves beyond loopback, without --insecure or a configured
 * [scrapyd] login), answers a refusal with 409 (SPD_ECONFLICT,
 * details.reason "last_admin") and logs it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/ops_impl.h"
#include "clock.h"
#include "core/names.h"
#include "error.h"
#include "core/account.h"
#include "flow/accounts.h"
#include "flow/auth.h"
#include "log.h"

#define PASSWORD_MIN 8
#define PASSWORD_MAX 1024
#define TOKEN_TTL_MAX (10 * 365 * 86400.0) /* expires_in at most ten years */

/* ---- rendering ---- */

static json_t *projects_array(const char *list) {
  json_t *a = json_array();
  for (const char *p = list ? list : ""; *p;) {
    size_t n = strcspn(p, ",");
    if (n) json_array_append_new(a, json_stringn(p, n));
    p += n + (p[n] == ',');
  }
  return a;
}

static json_t *render_principal(const principal_t *p) {
  if (p->kind == PRINCIPAL_USER)
    return json_pack("{s:s, s:s, s:o, s:o}", "name", p->name, "role", role_name(p->role),
                     "projects", projects_array(p->projects), "created",
                     op_iso_time(p->created_ms));
  return json_pack("{s:s, s:s, s:s, s:o, s:s, s:o, s:o}", "id", p->name, "name", p->label,
                   "role", role_name(p->role), "projects", projects_array(p->projects), "owner",
                   p->owner, "created", op_iso_time(p->created_ms), "expires",
                   op_iso_time(p->expires_ms));
}

/* ---- parameters ---- */

/* The role parameter; 1 after failing the call. */
static int role_param(op_call_t *c, role_t *out) {
  const char *s = op_str(c, "role");
  *out = s ? role_parse(s) : ROLE_NONE;
  if (s && *out == ROLE_NONE) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "role"),
            "'role' must be read, run, deploy or admin, not '%.64s'", s);
    return 1;
  }
  return 0;
}

/* The projects parameter as "a,b" (malloc'd into *out; "" for none or
 * absent); 1 after failing the call. */
static int projects_param(op_call_t *c, char **out) {
  const json_t *arr = op_json(c, "projects");
  size_t i, len = 0;
  json_t *v;
  char why[256];
  *out = NULL;
  if (json_array_size(arr) > PRINCIPAL_PROJECTS_MAX) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "projects"),
            "at most %d projects", PRINCIPAL_PROJECTS_MAX);
    return 1;
  }
  json_array_foreach(arr, i, v) {
    const char *p = json_string_value(v);
    if (!name_valid("project", p, why, sizeof(why)) || strchr(p, ',')) {
      op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "projects"), "%s",
              strchr(p, ',') ? "a project name must not contain ','" : why);
      return 1;
    }
    len += strlen(p) + 1;
  }
  char *s = calloc(1, len + 1);
  if (!s) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return 1;
  }
  json_array_foreach(arr, i, v) {
    if (i) strcat(s, ",");
    strcat(s, json_string_value(v));
  }
  *out = s;
  return 0;
}

/* ---- who am I ---- */

static const char *const kind_names[] = {"anonymous", "scrapyd", "user", "token", "job", "node"};

void op_auth_whoami(op_call_t *c) {
  const auth_who_t *w = c->who;
  int none = !strcmp(w->projects, PRINCIPAL_PROJECTS_NONE);
  json_t *o = json_pack("{s:s, s:s, s:s, s:o, s:s}", "actor", w->actor, "kind",
                        kind_names[w->kind], "role", role_name(w->role), "projects",
                        none ? json_array() : projects_array(w->projects), "addr",
                        w->addr ? w->addr : "");
  /* a member of an account: its account, and the projects it has through it */
  if (o && w->account && *w->account) json_object_set_new(o, "account", json_string(w->account));
  op_ok(c, o);
}

/* ---- the store side, shared ---- */

/* c->priv of a change: what flow/auth.h is asked, and what it holds. */
typedef struct auth_call {
  principals_write_t w;
  principal_t p;     /* the principal to write (tokens.create, users.*) */
  principal_t known; /* the cache's copy of the one changed */
  char *gen;         /* the cache's generation */
  char listen[128];
} auth_call_t;

static void auth_call_free(void *arg) {
  auth_call_t *a = arg;
  principal_release(&a->p);
  principal_release(&a->known);
  free(a->gen);
  free(a);
}

/* The call's auth_call_t, made on first use; NULL after failing the call. */
static auth_call_t *auth_call(op_call_t *c) {
  if (c->priv) return c->priv;
  auth_call_t *a = calloc(1, sizeof(*a));
  if (!a) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return NULL;
  }
  c->priv = a;
  c->priv_free = auth_call_free;
  a->w.p = &a->p;
  return a;
}

/* c->result: the list. */
static int list_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  principal_list_t l = {0};
  json_t *doc = NULL;
  int rc = store_principals_list(s, &l);
  if (!rc) rc = accounts_load(s, &doc);
  if (rc) {
    principal_list_release(&l);
    return rc;
  }
  int users = !strcmp(c->def->name, "users.list");
  int admin = c->who->role >= ROLE_ADMIN;
  json_t *arr = json_array();
  for (size_t i = 0; i < l.n; i++) {
    const principal_t *p = &l.v[i];
    if (p->kind != (users ? PRINCIPAL_USER : PRINCIPAL_TOKEN)) continue;
    if (!admin && strcmp(p->owner, c->who->name)) continue; /* one's own tokens */
    json_t *o = render_principal(p);
    const char *acct = account_of(doc, p->kind, p->name, p->owner);
    if (acct) json_object_set_new(o, "account", json_string(acct));
    json_array_append_new(arr, o);
  }
  json_decref(doc);
  principal_list_release(&l);
  c->result = json_pack("{s:o}", users ? "users" : "tokens", arr);
  return c->result ? 0 : -ENOMEM;
}

static void reloaded(void *arg) { op_ok_result(arg); }

/* The last admin's refusal, from the loop: logged, and answered. */
static void refused(op_call_t *c) {
  const auth_call_t *a = c->priv;
  const char *what = !strcmp(c->def->name, "tokens.delete")  ? "revoke token"
                     : !strcmp(c->def->name, "users.delete") ? "delete user"
                                                             : "change user";
  const char *name = op_str(c, strstr(what, "token") ? "id" : "name");
  log_warn("auth", "refused to %s %.64s asked by %s from %s: %s", what, name ? name : "",
           c->who->actor, c->who->addr ? c->who->addr : "-", a->w.err);
  op_fail(c, SPD_ECONFLICT, json_pack("{s:s}", "reason", "last_admin"), "%s", a->w.err);
}

/* Answered once this node reads the change: a user made, then logging in
 * at once, must find it. */
static void written(void *arg, int rc) {
  op_call_t *c = arg;
  const auth_call_t *a = c->priv;
  if (a->w.refused) { /* the last admin: nothing but (unless rc) the refusal written */
    refused(c);
    return;
  }
  if (rc) {
    op_fail(c, rc, NULL, "%s", a->w.err[0] ? a->w.err : spd_strerror(rc));
    return;
  }
  auth_reload(c->app, reloaded, c);
}

static void listed(void *arg, int rc) {
  op_call_t *c = arg;
  if (!op_store_failed(c, rc)) op_ok_result(c);
}

/* Fills what a change of principal kind/name needs besides: whether the
 * last admin is kept (this node serves beyond loopback, with nothing else
 * to let an admin in: no --insecure, no [scrapyd] login), where it listens
 * (for the refusal), and this node's copy of the principal. Then submits
 * fn. */
static void submit_change(op_call_t *c, auth_call_t *a, principal_kind_t kind, const char *name,
                          int (*fn)(store_t *, void *)) {
  const config_t *cfg = &c->app->cfg;
  const char *b = cfg->bind_address;
  int bracket = strchr(b, ':') && b[0] != '[';
  snprintf(a->listen, sizeof(a->listen), "%s%.64s%s:%d", bracket ? "[" : "", b,
           bracket ? "]" : "", cfg->http_port);
  a->w.listen = a->listen;
  a->w.keep_admin = auth_exposed(c->app) && !(cfg->username[0] && cfg->password[0]);
  if (name && auth_cached(c->app, kind, name, &a->known, &a->gen)) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  a->w.known = a->known.name ? &a->known : NULL;
  a->w.gen = a->gen;
  op_store(c, STORE_WRITE, fn, written);
}

/* ---- tokens ---- */

void op_tokens_list(op_call_t *c) { op_store(c, STORE_READ, list_fn, listed); }

static int token_create_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  auth_call_t *a = c->priv;
  int rc = principals_token_create(s, &a->w);
  if (rc) return rc;
  c->result = render_principal(&a->p);
  json_object_set_new(c->result, "token", json_string(c->text));
  return 0;
}

void op_tokens_create(op_call_t *c) {
  const auth_who_t *w = c->who;
  role_t role;
  char *projects = NULL;
  if (role_param(c, &role) || projects_param(c, &projects)) return;
  auth_call_t *a = auth_call(c);
  if (!a) {
    free(projects);
    return;
  }
  principal_t *p = &a->p;
  p->projects = projects;
  if (w->role < ROLE_ADMIN) {
    if (w->kind != AUTH_USER) {
      op_fail(c, SPD_EFORBIDDEN, NULL, "%s may not make tokens: only users and admins may",
              w->actor);
      return;
    }
    /* a member's token is of its account too (core/account.h): within the
     * member's own limit, which the account narrows for both */
    const char *own = w->own_projects ? w->own_projects : w->projects;
    if (role > w->role || !principal_projects_within(own, projects)) {
      op_fail(c, SPD_EFORBIDDEN, NULL,
              "%s may make tokens with at most its own role ('%s') and projects", w->actor,
              role_name(w->role));
      return;
    }
  }
  double ttl = op_num(c, "expires_in", 0);
  if (ttl < 0 || ttl > TOKEN_TTL_MAX) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "expires_in"),
            "'expires_in' must be a number of seconds between 1 and %.0f (or absent: never)",
            TOKEN_TTL_MAX);
    return;
  }
  const char *label = op_str(c, "name");
  if (label && strlen(label) > PRINCIPAL_NAME_MAX) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "name"),
            "a token's name has at most %d characters", PRINCIPAL_NAME_MAX);
    return;
  }
  char id[17], text[96], hash[65];
  if (auth_token_new(id, text, hash)) {
    op_fail(c, SPD_ECONFIG, NULL, "cannot make a token: no random bytes or no libcrypto");
    return;
  }
  p->kind = PRINCIPAL_TOKEN;
  p->role = role;
  p->created_ms = clock_wall_ms();
  p->expires_ms = ttl > 0 ? p->created_ms + (int64_t)(ttl * 1000.0) : 0;
  p->name = strdup(id);
  p->label = strdup(label ? label : "");
  p->secret = strdup(hash);
  p->owner = strdup(w->kind == AUTH_TOKEN ? w->actor : w->name[0] ? w->name : w->actor);
  c->text = strdup(text);
  if (!p->name || !p->label || !p->secret || !p->owner || !c->text) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  submit_change(c, a, PRINCIPAL_TOKEN, NULL, token_create_fn);
}

static int token_delete_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  return principals_token_revoke(s, &((auth_call_t *)c->priv)->w);
}

void op_tokens_delete(op_call_t *c) {
  auth_call_t *a = auth_call(c);
  if (!a) return;
  a->w.name = op_str(c, "id");
  a->w.caller = c->who->name;
  a->w.admin = c->who->role >= ROLE_ADMIN;
  submit_change(c, a, PRINCIPAL_TOKEN, a->w.name, token_delete_fn);
}

/* ---- users ---- */

void op_users_list(op_call_t *c) { op_store(c, STORE_READ, list_fn, listed); }

/* users.create and users.update: the password's hash is made on the
 * thread pool (slow on purpose), then the row is written. */
static int user_write_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  auth_call_t *a = c->priv;
  int rc = principals_user_put(s, &a->w, !strcmp(c->def->name, "users.create"));
  if (!rc && !a->w.refused) c->result = render_principal(&a->p);
  return rc;
}

static void user_submit(op_call_t *c) {
  auth_call_t *a = c->priv;
  submit_change(c, a, PRINCIPAL_USER, a->p.name, user_write_fn);
}

static void hash_work(uv_work_t *w) {
  op_call_t *c = w->data;
  principal_t *p = &((auth_call_t *)c->priv)->p;
  p->secret = auth_password_hash(op_str(c, "password"));
}

static void hash_after(uv_work_t *w, int status) {
  op_call_t *c = w->data;
  principal_t *p = &((auth_call_t *)c->priv)->p;
  if (status || !p->secret) {
    op_fail(c, SPD_ECONFIG, NULL, "cannot hash the password (is libcrypto installed?)");
    return;
  }
  user_submit(c);
}

static void user_write(op_call_t *c) {
  int create = !strcmp(c->def->name, "users.create");
  const char *name = op_str(c, "name"), *password = op_str(c, "password");
  char why[256];
  role_t role;
  char *projects = NULL;
  if (!principal_name_valid(name, why, sizeof(why))) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "name"), "%s", why);
    return;
  }
  if (password && (strlen(password) < PASSWORD_MIN || strlen(password) > PASSWORD_MAX)) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "password"),
            "a password has %d to %d characters", PASSWORD_MIN, PASSWORD_MAX);
    return;
  }
  if (!strcmp(name, c->app->cfg.username)) {
    op_fail(c, SPD_ECONFLICT, json_pack("{s:s}", "field", "name"),
            "'%s' is the configured [scrapyd] username", name);
    return;
  }
  if (role_param(c, &role)) return;
  if (op_json(c, "projects") && projects_param(c, &projects)) return;
  auth_call_t *a = auth_call(c);
  if (!a) {
    free(projects);
    return;
  }
  principal_t *p = &a->p;
  if (!(p->name = strdup(name)) || !(p->label = strdup("")) || !(p->owner = strdup(""))) {
    free(projects);
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  p->kind = PRINCIPAL_USER;
  p->role = role;
  p->projects = create && !projects ? strdup("") : projects;
  p->created_ms = clock_wall_ms();
  if (!password) {
    user_submit(c);
    return;
  }
  c->work.data = c;
  if (uv_queue_work(c->app->loop, &c->work, hash_work, hash_after))
    op_fail(c, -ENOMEM, NULL, "cannot hash the password now");
}

void op_users_create(op_call_t *c) { user_write(c); }
void op_users_update(op_call_t *c) { user_write(c); }

static int user_delete_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  return principals_user_delete(s, &((auth_call_t *)c->priv)->w);
}

void op_users_delete(op_call_t *c) {
  char why[256];
  if (!principal_name_valid(op_str(c, "name"), why, sizeof(why))) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "name"), "%s", why);
    return;
  }
  auth_call_t *a = auth_call(c);
  if (!a) return;
  a->w.name = op_str(c, "name");
  submit_change(c, a, PRINCIPAL_USER, NULL, user_delete_fn);
}
