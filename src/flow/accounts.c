/* Accounts and their members (flow/accounts.h). */
#include "flow/accounts.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/account.h"
#include "core/event.h"
#include "core/principal.h"
#include "error.h"

static const char *str(const json_t *v) {
  const char *s = json_string_value(v);
  return s ? s : "";
}

int accounts_load(store_t *s, json_t **doc) {
  char *text = NULL;
  *doc = NULL;
  int rc = store_accounts_get(s, &text);
  if (rc) return rc;
  *doc = json_loads(text, 0, NULL);
  free(text);
  if (!json_is_object(*doc)) {
    json_decref(*doc);
    *doc = NULL;
    return SPD_ESTORE; /* the store holds what spiderd never writes */
  }
  return 0;
}

static int save(store_t *s, const json_t *doc) {
  char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
  int rc = text ? store_accounts_put(s, text) : -ENOMEM;
  free(text);
  return rc;
}

static int event(store_t *s, const char *type, const accounts_write_t *w) {
  json_t *d = json_pack("{s:s, s:s}", "account", w->account, "by", w->actor ? w->actor : "");
  if (!d) return -ENOMEM;
  if (w->member) json_object_set_new(d, !strcmp(w->field, ACCOUNT_PROJECTS) ? "project"
                                        : !strcmp(w->field, ACCOUNT_USERS)  ? "user"
                                                                            : "token",
                                     json_string(w->member));
  event_t e = {.type = (char *)type, .ts_ms = w->now_ms, .data = d};
  int rc = store_event_add(s, &e);
  json_decref(d);
  return rc;
}

/* Takes s out of the array field of every account; *count: how many held it. */
static void drop_everywhere(json_t *doc, const char *field, const char *s, int *count) {
  const char *name;
  json_t *a;
  json_object_foreach(doc, name, a) {
    json_t *arr = json_object_get(a, field);
    for (size_t i = json_array_size(arr); i-- > 0;)
      if (!strcmp(str(json_array_get(arr, i)), s)) {
        json_array_remove(arr, i);
        (*count)++;
      }
  }
}

/* Is there a user (ACCOUNT_USERS) or token (ACCOUNT_TOKENS) named w->member? */
static int principal_exists(store_t *s, const accounts_write_t *w, int *found) {
  principal_list_t l = {0};
  principal_kind_t kind = !strcmp(w->field, ACCOUNT_USERS) ? PRINCIPAL_USER : PRINCIPAL_TOKEN;
  int rc = store_principals_list(s, &l);
  *found = 0;
  for (size_t i = 0; !rc && i < l.n; i++)
    if (l.v[i].kind == kind && !strcmp(l.v[i].name, w->member)) *found = 1;
  principal_list_release(&l);
  return rc;
}

static int set_fields(json_t *a, const accounts_write_t *w) {
  if (w->description && json_object_set_new(a, "description", json_string(w->description)))
    return -ENOMEM;
  if (w->max_running >= 0 && json_object_set_new(a, "max_running", json_integer(w->max_running)))
    return -ENOMEM;
  return 0;
}

static int create(json_t *doc, accounts_write_t *w) {
  if (json_object_get(doc, w->account)) {
    snprintf(w->err, sizeof(w->err), "account '%.64s' exists already", w->account);
    return SPD_ECONFLICT;
  }
  json_t *a = json_pack("{s:s, s:I, s:[], s:[], s:[], s:I}", "description", "", "max_running",
                        (json_int_t)0, ACCOUNT_PROJECTS, ACCOUNT_USERS, ACCOUNT_TOKENS,
                        "created_ms", (json_int_t)w->now_ms);
  if (!a || json_object_set_new(doc, w->account, a)) return -ENOMEM;
  return set_fields(a, w);
}

static int delete(json_t *doc, accounts_write_t *w, json_t *a) {
  if (json_array_size(json_object_get(a, ACCOUNT_USERS)) ||
      json_array_size(json_object_get(a, ACCOUNT_TOKENS))) {
    snprintf(w->err, sizeof(w->err),
             "account '%.64s' still has users or tokens: take them out first (their "
             "limits would widen to every project)", w->account);
    return SPD_ECONFLICT;
  }
  return json_object_del(doc, w->account) ? -ENOMEM : 0;
}

static int assign(store_t *s, json_t *doc, accounts_write_t *w, json_t *a) {
  if (strcmp(w->field, ACCOUNT_PROJECTS)) {
    int found = 0, rc = principal_exists(s, w, &found);
    if (rc) return rc;
    if (!found) {
      snprintf(w->err, sizeof(w->err), "no %s '%.64s'",
               !strcmp(w->field, ACCOUNT_USERS) ? "user" : "token", w->member);
      return SPD_ENOPRINCIPAL;
    }
  }
  int n = 0;
  drop_everywhere(doc, w->field, w->member, &n);
  return json_array_append_new(json_object_get(a, w->field), json_string(w->member)) ? -ENOMEM
                                                                                     : 0;
}

static int unassign(accounts_write_t *w, json_t *a) {
  json_t *arr = json_object_get(a, w->field);
  for (size_t i = 0; i < json_array_size(arr); i++)
    if (!strcmp(str(json_array_get(arr, i)), w->member))
      return json_array_remove(arr, i) ? -ENOMEM : 0;
  snprintf(w->err, sizeof(w->err), "'%.64s' is not in account '%.64s'", w->member, w->account);
  return !strcmp(w->field, ACCOUNT_PROJECTS) ? SPD_ENOPROJECT : SPD_ENOPRINCIPAL;
}

static const char *const event_of[] = {
    [ACCOUNTS_CREATE] = "account.created",   [ACCOUNTS_UPDATE] = "account.updated",
    [ACCOUNTS_DELETE] = "account.deleted",   [ACCOUNTS_ASSIGN] = "account.assigned",
    [ACCOUNTS_UNASSIGN] = "account.unassigned",
};

int accounts_write(store_t *s, accounts_write_t *w) {
  json_t *doc = NULL;
  w->result = NULL;
  int rc = store_claim_lock(s);
  if (!rc) rc = accounts_load(s, &doc);
  if (rc) return rc;
  json_t *a = json_object_get(doc, w->account);
  if (w->op != ACCOUNTS_CREATE && !a) {
    snprintf(w->err, sizeof(w->err), "no account '%.64s'", w->account);
    rc = SPD_ENOACCOUNT;
  } else if (w->op == ACCOUNTS_CREATE) {
    rc = create(doc, w);
  } else if (w->op == ACCOUNTS_UPDATE) {
    rc = set_fields(a, w);
  } else if (w->op == ACCOUNTS_DELETE) {
    rc = delete(doc, w, a);
  } else if (w->op == ACCOUNTS_ASSIGN) {
    rc = assign(s, doc, w, a);
  } else {
    rc = unassign(w, a);
  }
  if (!rc) rc = save(s, doc);
  if (!rc) rc = event(s, event_of[w->op], w);
  if (!rc) {
    a = json_object_get(doc, w->account);
    w->result = a ? json_deep_copy(a) : json_object();
    if (!w->result) rc = -ENOMEM;
  }
  json_decref(doc);
  return rc;
}

int accounts_forget(store_t *s, const char *field, const char *member) {
  json_t *doc = NULL;
  int n = 0;
  int rc = store_claim_lock(s);
  if (!rc) rc = accounts_load(s, &doc);
  if (rc) return rc;
  drop_everywhere(doc, field, member, &n);
  if (n) rc = save(s, doc);
  json_decref(doc);
  return rc;
}
