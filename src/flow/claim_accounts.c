/* Accounts' caps on running jobs (flow/claim_accounts.h). */
#include "flow/claim_accounts.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/account.h"
#include "flow/accounts.h"

static int running_of(store_t *s, const json_t *a, int64_t *n) {
  size_t i;
  json_t *v;
  *n = 0;
  json_array_foreach(json_object_get(a, ACCOUNT_PROJECTS), i, v) {
    job_list_t r = {0};
    job_filter_t f = {.project = json_string_value(v), .states = 1u << JOB_RUNNING};
    int rc = store_jobs_list(s, &f, &r);
    *n += (int64_t)r.n;
    job_list_release(&r);
    if (rc) return rc;
  }
  return 0;
}

static void skip_projects(const json_t *a, job_key_t *skip, size_t *nskip) {
  size_t i;
  json_t *v;
  json_array_foreach(json_object_get(a, ACCOUNT_PROJECTS), i, v) {
    if (*nskip >= STORE_CLAIM_SKIP_MAX) return;
    skip[(*nskip)++] = (job_key_t){json_string_value(v), NULL};
  }
}

int claim_accounts_load(store_t *s, claim_accounts_t *a, job_key_t *skip, size_t *nskip) {
  memset(a, 0, sizeof(*a));
  int rc = accounts_load(s, &a->doc);
  if (rc) return rc;
  const char *name;
  json_t *acct;
  size_t capped = 0;
  json_object_foreach(a->doc, name, acct) capped += account_max_running(a->doc, name) > 0;
  if (!capped) return 0;
  if (!(a->v = calloc(capped, sizeof(*a->v)))) return -ENOMEM;
  rc = store_claim_lock(s);
  json_object_foreach(a->doc, name, acct) {
    int64_t max = account_max_running(a->doc, name);
    if (rc || !max) continue;
    claim_account_t *c = &a->v[a->n++];
    *c = (claim_account_t){name, acct, max, 0};
    rc = running_of(s, acct, &c->running);
    if (!rc && c->running >= c->max) skip_projects(acct, skip, nskip);
  }
  return rc;
}

static claim_account_t *of(const claim_accounts_t *a, const job_t *j) {
  for (size_t i = 0; i < a->n; i++)
    if (account_has(a->v[i].a, ACCOUNT_PROJECTS, j->project)) return &a->v[i];
  return NULL;
}

int claim_accounts_full(const claim_accounts_t *a, const job_t *j) {
  const claim_account_t *c = of(a, j);
  return c && c->running >= c->max;
}

void claim_accounts_count(claim_accounts_t *a, const job_t *j) {
  claim_account_t *c = of(a, j);
  if (c) c->running++;
}

void claim_accounts_release(claim_accounts_t *a) {
  free(a->v);
  json_decref(a->doc);
  memset(a, 0, sizeof(*a));
}
