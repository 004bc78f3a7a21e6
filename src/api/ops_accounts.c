/* Accounts through the native API (REST and JSON-RPC): admins make, change
 * and delete them and put projects, users and tokens in them; a member
 * reads its own account (another is, to it, no account at all). The
 * changes are flow/accounts.h's; see core/account.h for what an account
 * limits. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/auth.h"
#include "api/ops_impl.h"
#include "clock.h"
#include "core/account.h"
#include "core/names.h"
#include "error.h"
#include "flow/accounts.h"

#define ACCOUNT_MAX_RUNNING 1000000

/* Is who limited to an account other than `account`? Such a caller is
 * told there is no such account, as with another's token. */
static int foreign(const op_call_t *c, const char *account) {
  const char *mine = c->who->account;
  return c->who->role < ROLE_ADMIN && (!mine || !*mine || strcmp(mine, account));
}

/* The account object a as shown, with its name and its jobs now. */
static json_t *render(store_t *s, const char *name, const json_t *a, int *rc) {
  int64_t running = 0, pending = 0;
  size_t i;
  json_t *v;
  json_array_foreach(json_object_get(a, ACCOUNT_PROJECTS), i, v) {
    int64_t counts[JOB_NSTATES];
    if (*rc || (*rc = store_job_counts(s, json_string_value(v), counts))) break;
    running += counts[JOB_RUNNING];
    pending += counts[JOB_PENDING];
  }
  json_t *o = json_deep_copy(a);
  if (!o) return NULL;
  json_int_t created = json_integer_value(json_object_get(o, "created_ms"));
  json_object_set_new(o, "name", json_string(name));
  json_object_set_new(o, "created", op_iso_time(created));
  json_object_set_new(o, "running", json_integer(running));
  json_object_set_new(o, "pending", json_integer(pending));
  return o;
}

static int read_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  json_t *doc = NULL;
  int rc = accounts_load(s, &doc);
  if (rc) return rc;
  const char *want = op_str(c, "account"), *name;
  json_t *a, *arr = json_array();
  json_object_foreach(doc, name, a) {
    if ((want && strcmp(want, name)) || foreign(c, name)) continue;
    json_array_append_new(arr, render(s, name, a, &rc));
  }
  json_decref(doc);
  if (!rc && want && !json_array_size(arr)) {
    snprintf(c->err, sizeof(c->err), "no account '%.64s'", want);
    rc = SPD_ENOACCOUNT;
  }
  if (!rc) c->result = want ? json_incref(json_array_get(arr, 0)) : json_pack("{s:O}", "accounts", arr);
  json_decref(arr);
  return rc;
}

static void read_done(void *arg, int rc) {
  op_call_t *c = arg;
  if (rc) op_fail(c, rc, NULL, "%s", c->err[0] ? c->err : spd_strerror(rc));
  else op_ok_result(c);
}

void op_accounts_list(op_call_t *c) { op_store(c, STORE_READ, read_fn, read_done); }

void op_accounts_get(op_call_t *c) {
  if (foreign(c, op_str(c, "account"))) {
    op_fail(c, SPD_ENOACCOUNT, NULL, "no account '%.64s'", op_str(c, "account"));
    return;
  }
  op_store(c, STORE_READ, read_fn, read_done);
}

/* ---- changes ---- */

static void write_free(void *p) {
  accounts_write_t *w = p;
  json_decref(w->result);
  free(w);
}

static int write_fn(store_t *s, void *arg) {
  op_call_t *c = arg;
  accounts_write_t *w = c->priv;
  int rc = accounts_write(s, w);
  if (!rc && w->op != ACCOUNTS_DELETE) c->result = render(s, w->account, w->result, &rc);
  return rc;
}

static void reloaded(void *arg) { op_ok_result(arg); }

/* Answered once this node reads the change: the members' next requests
 * see their new account. */
static void written(void *arg, int rc) {
  op_call_t *c = arg;
  const accounts_write_t *w = c->priv;
  if (rc) {
    op_fail(c, rc, NULL, "%s", w->err[0] ? w->err : spd_strerror(rc));
    return;
  }
  auth_reload(c->app, reloaded, c);
}

/* description and max_running into w; 1 after failing the call. */
static int fields(op_call_t *c, accounts_write_t *w) {
  w->description = op_str(c, "description");
  w->max_running = op_int(c, "max_running", -1);
  if (w->description && strlen(w->description) > 1000) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "description"),
            "a description has at most 1000 characters");
    return 1;
  }
  return 0;
}

static void submit(op_call_t *c, accounts_op_t op, const char *field, const char *member) {
  const char *name = op_str(c, op == ACCOUNTS_CREATE ? "name" : "account");
  char why[256];
  if (!principal_name_valid(name, why, sizeof(why))) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", op == ACCOUNTS_CREATE ? "name" : "account"),
            "%s", why);
    return;
  }
  accounts_write_t *w = calloc(1, sizeof(*w));
  if (!w) {
    op_fail(c, -ENOMEM, NULL, "out of memory");
    return;
  }
  c->priv = w;
  c->priv_free = write_free;
  w->op = op;
  w->account = name;
  w->max_running = -1;
  w->field = field;
  w->member = member;
  w->actor = c->who->actor;
  w->now_ms = clock_wall_ms();
  if ((op == ACCOUNTS_CREATE || op == ACCOUNTS_UPDATE) && fields(c, w)) return;
  op_store(c, STORE_WRITE, write_fn, written);
}

void op_accounts_create(op_call_t *c) { submit(c, ACCOUNTS_CREATE, NULL, NULL); }
void op_accounts_update(op_call_t *c) { submit(c, ACCOUNTS_UPDATE, NULL, NULL); }
void op_accounts_delete(op_call_t *c) { submit(c, ACCOUNTS_DELETE, NULL, NULL); }

/* accounts.assign and accounts.unassign: exactly one of project, user and
 * token. */
void op_accounts_member(op_call_t *c) {
  static const char *const keys[] = {"project", "user", "token"};
  static const char *const fields_of[] = {ACCOUNT_PROJECTS, ACCOUNT_USERS, ACCOUNT_TOKENS};
  int k = -1, n = 0;
  for (int i = 0; i < 3; i++)
    if (op_str(c, keys[i])) k = i, n++;
  if (n != 1) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "project"),
            "give exactly one of 'project', 'user' and 'token'");
    return;
  }
  const char *member = op_str(c, keys[k]);
  char why[256];
  if (k == 0 && (!name_valid("project", member, why, sizeof(why)) || strchr(member, ','))) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", "project"), "%s",
            strchr(member, ',') ? "a project name must not contain ','" : why);
    return;
  }
  if (k > 0 && (!*member || strlen(member) > PRINCIPAL_NAME_MAX)) {
    op_fail(c, SPD_EBADPARAM, json_pack("{s:s}", "field", keys[k]), "no %s '%.64s'", keys[k],
            member);
    return;
  }
  submit(c, strcmp(c->def->name, "accounts.assign") ? ACCOUNTS_UNASSIGN : ACCOUNTS_ASSIGN,
         fields_of[k], member);
}

/* GetUpcomingAccountSchedules: schedules.next_all over the account's
 * projects (the caller's own limits apply as well). */
void op_accounts_upcoming(op_call_t *c) {
  if (foreign(c, op_str(c, "account"))) {
    op_fail(c, SPD_ENOACCOUNT, NULL, "no account '%.64s'", op_str(c, "account"));
    return;
  }
  op_schedules_next_all(c);
}
