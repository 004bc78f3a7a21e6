/* Users and API tokens through the native API (REST and JSON-RPC):
 * who am I, tokens, users. See api/auth.h for what they open.
 *
 * Admins manage everything. A user may also make, list and revoke tokens
 * of its own, never with more than it has itself (a role at most its own,
 * within its projects); another token may not make tokens unless it is an
 * admin's, so one leaked token cannot mint more.
 *
 * On a node that serves beyond loopback, without --insecure or a
 * configured [scrapyd] login, the last usable admin credential in the
 * store stays: revoking, deleting or demoting it would turn authentication
 * off (no principal left: every caller an anonymous admin, which main.c
 * refuses at start) or leave nobody to manage users and tokens. The store
 * checks and writes in one atomic step (store_principal_*_keep_admin), so
 * two nodes removing the last two admins at once cannot both succeed. A
 * refusal is 409 (SPD_ECONFLICT, details.reason "last_admin"), an event
 * (token.revoke_refused, user.delete_refused, user.update_refused) and a
 * line in the log. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/ops_impl.h"
#include "clock.h"
#include "core/names.h"
#include "error.h"
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
  op_ok(c, json_pack("{s:s, s:s, s:s, s:o, s:s}", "actor", w->actor, "kind", kind_names[w->kind],
                     "role", role_name(w->role), "projects", projects_array(w->projects),
                     "addr", w->addr ? w->addr : ""));
}

/* ---- the store side, shared ---- */

/* c->priv: the principal to write (tokens.create, users.*); c->text: the
 * token shown once; c->num[1]: 1 when the last admin's write was refused
 * (refuse()); c->result: the answer. */

static int list_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  principal_list_t l = {0};
  int rc = store_principals_list(s, &l);
  if (rc) return rc;
  int users = !strcmp(c->def->name, "users.list");
  int admin = c->who->role >= ROLE_ADMIN;
  json_t *arr = json_array();
  for (size_t i = 0; i < l.n; i++) {
    const principal_t *p = &l.v[i];
    if (p->kind != (users ? PRINCIPAL_USER : PRINCIPAL_TOKEN)) continue;
    if (!admin && strcmp(p->owner, c->who->name)) continue; /* one's own tokens */
    json_array_append_new(arr, render_principal(p));
  }
  principal_list_release(&l);
  c->result = json_pack("{s:o}", users ? "users" : "tokens", arr);
  return c->result ? 0 : -ENOMEM;
}

static void reloaded(void *arg) { op_ok_result(arg); }

/* The last admin's refusal, from the loop: logged, and answered. */
static void refused(op_call_t *c) {
  const char *what = !strcmp(c->def->name, "tokens.delete")  ? "revoke token"
                     : !strcmp(c->def->name, "users.delete") ? "delete user"
                                                             : "change user";
  const char *name = op_str(c, strstr(what, "token") ? "id" : "name");
  log_warn("auth", "refused to %s %.64s asked by %s from %s: %s", what, name ? name : "",
           c->who->actor, c->who->addr ? c->who->addr : "-", c->err);
  op_fail(c, SPD_ECONFLICT, json_pack("{s:s}", "reason", "last_admin"), "%s", c->err);
}

/* Answered once this node reads the change: a user made, then logging in
 * at once, must find it. */
static void written(void *arg, int rc) {
  op_call_t *c = arg;
  if (c->num[1]) { /* the last admin: nothing but (unless rc) the refusal written */
    refused(c);
    return;
  }
  if (rc) {
    op_fail(c, c->err_code ? c->err_code : rc, NULL, "%s", c->err[0] ? c->err : spd_strerror(rc));
    return;
  }
  auth_reload(c->app, reloaded, c);
}

static void listed(void *arg, int rc) {
  op_call_t *c = arg;
  if (!op_store_failed(c, rc)) op_ok_result(c);
}

/* A write of p as an event of type; reason (NULL: none): why it was
 * refused. */
static int audit(store_t *s, const char *type, const principal_t *p, const char *reason) {
  json_t *d = p->kind == PRINCIPAL_USER
                  ? json_pack("{s:s, s:s, s:s}", "user", p->name, "role", role_name(p->role),
                              "projects", p->projects ? p->projects : "")
                  : json_pack("{s:s, s:s, s:s, s:s}", "token", p->name, "name", p->label,
                              "role", role_name(p->role), "projects", p->projects);
  if (d && reason) json_object_set_new(d, "reason", json_string(reason));
  event_t e = {.type = (char *)type, .ts_ms = clock_wall_ms(), .data = d};
  int rc = store_event_add(s, &e);
  json_decref(d);
  return rc;
}

/* ---- the last admin ---- */

/* Must a write keep an admin here? The time to judge expiry by when it
 * must (the node serves beyond loopback, with nothing else to let an
 * admin in: no --insecure, no [scrapyd] login), else 0. Read on the
 * store thread: cfg does not change while the daemon runs. */
static int64_t keep_admin_at(const app_t *app) {
  const config_t *cfg = &app->cfg;
  if (!auth_exposed(app) || (cfg->username[0] && cfg->password[0])) return 0;
  return clock_wall_ms();
}

/* The write was refused (SPD_ECONFLICT from the store): says why in c->err
 * and records the refusal as type, with the principal p as asked. The
 * store function then returns 0, so the event commits though nothing else
 * was written, and written() answers 409 (c->num[1]). */
static int refuse(store_t *s, op_call_t *c, const char *type, const principal_t *p) {
  const config_t *cfg = &c->app->cfg;
  const char *b = cfg->bind_address;
  int bracket = strchr(b, ':') && b[0] != '[';
  snprintf(c->err, sizeof(c->err),
           "%s %.64s is the last admin credential and spiderd listens on %s%.64s%s:%d: "
           "without an admin nobody can manage users and tokens, and without any user or "
           "token every caller is an admin. Create another admin user or token first (or "
           "set [scrapyd] username and password), or run with --insecure",
           p->kind == PRINCIPAL_USER ? "user" : "token", p->name, bracket ? "[" : "", b,
           bracket ? "]" : "", cfg->http_port);
  c->err_code = SPD_ECONFLICT;
  c->num[1] = 1;
  return audit(s, type, p, c->err);
}

static void principal_free(void *p) {
  principal_release(p);
  free(p);
}

/* ---- tokens ---- */

void op_tokens_list(op_call_t *c) { op_store(c, STORE_READ, list_fn, listed); }

static int token_create_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  principal_t *p = c->priv;
  int rc = store_principal_put(s, p);
  if (!rc) rc = audit(s, "token.created", p, NULL);
  if (rc) return rc;
  c->result = render_principal(p);
  json_object_set_new(c->result, "token", json_string(c->text));
  return 0;
}

void op_tokens_create(op_call_t *c) {
  const auth_who_t *w = c->who;
  role_t role;
  char *projects = NULL;
  if (role_param(c, &role) || projects_param(c, &projects)) return;
  principal_t *p = calloc(1, sizeof(*p));
  c->priv = p;
  c->priv_free = principal_free;
  if (!p) {
    free(projects);
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  p->projects = projects;
  if (w->role < ROLE_ADMIN) {
    if (w->kind != AUTH_USER) {
      op_fail(c, SPD_EFORBIDDEN, NULL, "%s may not make tokens: only users and admins may",
              w->actor);
      return;
    }
    if (role > w->role || !principal_projects_within(w->projects, projects)) {
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
  op_store(c, STORE_WRITE, token_create_fn, written);
}

static int token_delete_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  principal_list_t l = {0};
  int rc = store_principals_list(s, &l);
  const principal_t *p = NULL;
  for (size_t i = 0; !rc && i < l.n; i++)
    if (l.v[i].kind == PRINCIPAL_TOKEN && !strcmp(l.v[i].name, op_str(c, "id"))) p = &l.v[i];
  /* another's token is none of one's business: not found */
  if (!rc && (!p || (c->who->role < ROLE_ADMIN && strcmp(p->owner, c->who->name)))) {
    c->err_code = SPD_ENOPRINCIPAL;
    snprintf(c->err, sizeof(c->err), "no token '%.64s'", op_str(c, "id"));
    rc = c->err_code;
  }
  int count = 0;
  int64_t keep = rc ? 0 : keep_admin_at(c->app);
  if (!rc && keep)
    rc = store_principal_delete_keep_admin(s, PRINCIPAL_TOKEN, p->name, keep, &count);
  else if (!rc)
    rc = store_principal_delete(s, PRINCIPAL_TOKEN, p->name, &count);
  if (rc == SPD_ECONFLICT && keep)
    rc = refuse(s, c, "token.revoke_refused", p);
  else if (!rc)
    rc = audit(s, "token.revoked", p, NULL);
  principal_list_release(&l);
  return rc;
}

void op_tokens_delete(op_call_t *c) { op_store(c, STORE_WRITE, token_delete_fn, written); }

/* ---- users ---- */

void op_users_list(op_call_t *c) { op_store(c, STORE_READ, list_fn, listed); }

/* users.create and users.update: the password's hash is made on the
 * thread pool (slow on purpose), then the row is written. */
static int user_write_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  principal_t *p = c->priv;
  int create = !strcmp(c->def->name, "users.create");
  principal_list_t l = {0};
  int rc = store_principals_list(s, &l);
  const principal_t *old = NULL;
  for (size_t i = 0; !rc && i < l.n; i++)
    if (l.v[i].kind == PRINCIPAL_USER && !strcmp(l.v[i].name, p->name)) old = &l.v[i];
  if (!rc && create && old) {
    c->err_code = SPD_ECONFLICT;
    snprintf(c->err, sizeof(c->err), "user '%s' exists already", p->name);
    rc = c->err_code;
  } else if (!rc && !create && !old) {
    c->err_code = SPD_ENOPRINCIPAL;
    snprintf(c->err, sizeof(c->err), "no user '%s'", p->name);
    rc = c->err_code;
  } else if (!rc && old) { /* update: what was not given stays */
    p->created_ms = old->created_ms;
    if (!p->secret) p->secret = strdup(old->secret);
    if (p->role == ROLE_NONE) p->role = old->role;
    if (!p->projects) p->projects = strdup(old->projects);
    if (!p->secret || !p->projects) rc = -ENOMEM;
  }
  /* a new user takes no admin away; a changed one may */
  int64_t keep = rc || create ? 0 : keep_admin_at(c->app);
  if (!rc) rc = keep ? store_principal_put_keep_admin(s, p, keep) : store_principal_put(s, p);
  if (rc == SPD_ECONFLICT && keep) {
    rc = refuse(s, c, "user.update_refused", p);
    principal_list_release(&l);
    return rc;
  }
  if (!rc) rc = audit(s, create ? "user.created" : "user.updated", p, NULL);
  if (!rc) c->result = render_principal(p);
  principal_list_release(&l);
  return rc;
}

static void hash_work(uv_work_t *w) {
  op_call_t *c = w->data;
  principal_t *p = c->priv;
  p->secret = auth_password_hash(op_str(c, "password"));
}

static void hash_after(uv_work_t *w, int status) {
  op_call_t *c = w->data;
  principal_t *p = c->priv;
  if (status || !p->secret) {
    op_fail(c, SPD_ECONFIG, NULL, "cannot hash the password (is libcrypto installed?)");
    return;
  }
  op_store(c, STORE_WRITE, user_write_fn, written);
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
  principal_t *p = calloc(1, sizeof(*p));
  c->priv = p;
  c->priv_free = principal_free;
  if (!p || !(p->name = strdup(name)) || !(p->label = strdup("")) || !(p->owner = strdup(""))) {
    free(projects);
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  p->kind = PRINCIPAL_USER;
  p->role = role;
  p->projects = create && !projects ? strdup("") : projects;
  p->created_ms = clock_wall_ms();
  if (!password) {
    op_store(c, STORE_WRITE, user_write_fn, written);
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
  int count = 0;
  const char *name = op_str(c, "name");
  int64_t keep = keep_admin_at(c->app);
  int rc = keep ? store_principal_delete_keep_admin(s, PRINCIPAL_USER, name, keep, &count)
                : store_principal_delete(s, PRINCIPAL_USER, name, &count);
  principal_t p = {.kind = PRINCIPAL_USER, .name = (char *)name, .projects = ""};
  if (rc == SPD_ECONFLICT && keep) {
    p.role = ROLE_ADMIN; /* what made it the last */
    return refuse(s, c, "user.delete_refused", &p);
  }
  if (!rc && !count) {
    c->err_code = SPD_ENOPRINCIPAL;
    snprintf(c->err, sizeof(c->err), "no user '%.64s'", name);
    return c->err_code;
  }
  return rc ? rc : audit(s, "user.deleted", &p, NULL);
}

void op_users_delete(op_call_t *c) {
  char why[256];
  if (!principal_name_valid(op_str(c, "name"), why, sizeof(why))) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "name"), "%s", why);
    return;
  }
  op_store(c, STORE_WRITE, user_delete_fn, written);
}
