/* Users, API tokens and their audit events (flow/auth.h). */
#include "flow/auth.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "core/account.h"
#include "error.h"
#include "flow/accounts.h"

/* ---- events ---- */

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

/* The store refused the write (SPD_ECONFLICT): it would take the last admin
 * away. Says why in w->err and records the refusal as type, with the
 * principal p as asked; 0 so that the event commits though nothing else
 * was written. */
static int refuse(store_t *s, principals_write_t *w, const char *type, const principal_t *p) {
  snprintf(w->err, sizeof(w->err),
           "%s %.64s is the last admin credential and spiderd listens on %.80s: "
           "without an admin nobody can manage users and tokens, and without any user or "
           "token every caller is an admin. Create another admin user or token first (or "
           "set [scrapyd] username and password), or run with --insecure",
           p->kind == PRINCIPAL_USER ? "user" : "token", p->name, w->listen ? w->listen : "");
  w->refused = 1;
  return audit(s, type, p, w->err);
}

/* ---- reading the one principal a change is about ---- */

int principals_copy(const principal_t *from, principal_t *to) {
  memset(to, 0, sizeof(*to));
  to->kind = from->kind;
  to->role = from->role;
  to->created_ms = from->created_ms;
  to->expires_ms = from->expires_ms;
#define DUP(f) if (from->f && !(to->f = strdup(from->f))) goto nomem
  DUP(name);
  DUP(label);
  DUP(secret);
  DUP(owner);
  DUP(projects);
#undef DUP
  return 0;
nomem:
  principal_release(to);
  return -ENOMEM;
}

/* The principal of kind and name into *out (*found 0: there is none):
 * the cache's copy while the store's generation is the cache's, else read
 * from the store. */
static int principal_read(store_t *s, const principals_write_t *w, principal_kind_t kind,
                          const char *name, principal_t *out, int *found) {
  char *gen = NULL;
  int rc = w->gen ? store_auth_gen(s, &gen) : 0;
  int fresh = !rc && w->gen && !strcmp(gen, w->gen);
  free(gen);
  memset(out, 0, sizeof(*out));
  *found = 0;
  if (rc) return rc;
  const principal_t *p = fresh ? w->known : NULL;
  principal_list_t l = {0};
  if (!fresh && (rc = store_principals_list(s, &l))) return rc;
  for (size_t i = 0; !fresh && i < l.n; i++)
    if (l.v[i].kind == kind && !strcmp(l.v[i].name, name)) p = &l.v[i];
  if (p && p->kind == kind && !strcmp(p->name, name)) {
    rc = principals_copy(p, out);
    *found = !rc;
  }
  principal_list_release(&l);
  return rc;
}

/* ---- tokens ---- */

int principals_token_create(store_t *s, principals_write_t *w) {
  int rc = store_principal_put(s, w->p);
  return rc ? rc : audit(s, "token.created", w->p, NULL);
}

int principals_token_revoke(store_t *s, principals_write_t *w) {
  principal_t p;
  int found = 0, count = 0;
  int rc = principal_read(s, w, PRINCIPAL_TOKEN, w->name, &p, &found);
  if (rc) return rc;
  /* another's token is none of one's business: not found */
  if (!found || (!w->admin && strcmp(p.owner ? p.owner : "", w->caller))) {
    snprintf(w->err, sizeof(w->err), "no token '%.64s'", w->name);
    rc = SPD_ENOPRINCIPAL;
    goto out;
  }
  int64_t keep = w->keep_admin ? clock_wall_ms() : 0;
  rc = keep ? store_principal_delete_keep_admin(s, PRINCIPAL_TOKEN, p.name, keep, &count)
            : store_principal_delete(s, PRINCIPAL_TOKEN, p.name, &count);
  if (rc == SPD_ECONFLICT && keep)
    rc = refuse(s, w, "token.revoke_refused", &p);
  else if (!rc)
    rc = audit(s, "token.revoked", &p, NULL);
  if (!rc && !w->refused) rc = accounts_forget(s, ACCOUNT_TOKENS, p.name);
out:
  principal_release(&p);
  return rc;
}

/* ---- users ---- */

/* An update keeps what was not given, and the creation time. */
static int keep_unset(principal_t *p, const principal_t *old) {
  p->created_ms = old->created_ms;
  if (!p->secret && !(p->secret = strdup(old->secret ? old->secret : ""))) return -ENOMEM;
  if (p->role == ROLE_NONE) p->role = old->role;
  if (!p->projects && !(p->projects = strdup(old->projects ? old->projects : ""))) return -ENOMEM;
  return 0;
}

int principals_user_put(store_t *s, principals_write_t *w, int create) {
  principal_t *p = w->p, old;
  int found = 0;
  int rc = principal_read(s, w, PRINCIPAL_USER, p->name, &old, &found);
  if (rc) return rc;
  if (create && found) {
    snprintf(w->err, sizeof(w->err), "user '%s' exists already", p->name);
    rc = SPD_ECONFLICT;
  } else if (!create && !found) {
    snprintf(w->err, sizeof(w->err), "no user '%s'", p->name);
    rc = SPD_ENOPRINCIPAL;
  } else if (found) {
    rc = keep_unset(p, &old);
  }
  principal_release(&old);
  if (rc) return rc;
  /* a new user takes no admin away; a changed one may */
  int64_t keep = w->keep_admin && !create ? clock_wall_ms() : 0;
  rc = keep ? store_principal_put_keep_admin(s, p, keep) : store_principal_put(s, p);
  if (rc == SPD_ECONFLICT && keep) return refuse(s, w, "user.update_refused", p);
  return rc ? rc : audit(s, create ? "user.created" : "user.updated", p, NULL);
}

int principals_user_delete(store_t *s, principals_write_t *w) {
  int count = 0;
  int64_t keep = w->keep_admin ? clock_wall_ms() : 0;
  int rc = keep ? store_principal_delete_keep_admin(s, PRINCIPAL_USER, w->name, keep, &count)
                : store_principal_delete(s, PRINCIPAL_USER, w->name, &count);
  principal_t p = {.kind = PRINCIPAL_USER, .name = (char *)w->name, .projects = ""};
  if (rc == SPD_ECONFLICT && keep) {
    p.role = ROLE_ADMIN; /* what made it the last */
    return refuse(s, w, "user.delete_refused", &p);
  }
  if (!rc && !count) {
    snprintf(w->err, sizeof(w->err), "no user '%.64s'", w->name);
    return SPD_ENOPRINCIPAL;
  }
  if (!rc) rc = audit(s, "user.deleted", &p, NULL);
  return rc ? rc : accounts_forget(s, ACCOUNT_USERS, w->name);
}
