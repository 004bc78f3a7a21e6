/* Accounts' caps on running jobs (core/account.h: max_running) for
 * flow/claim.c: a claim counts each capped account's running jobs under
 * the store's claim lock, skips the pending jobs of accounts at their cap,
 * and gives back any claimed job that would go over one, as it does for
 * [concurrency] limits. Those jobs stay pending and start when the
 * account's running jobs end, on any node.
 *
 * Store thread, inside the claim's op. Ownership: the caller's
 * claim_accounts_t, released by claim_accounts_release.
 */
#ifndef SPIDERD_FLOW_CLAIM_ACCOUNTS_H
#define SPIDERD_FLOW_CLAIM_ACCOUNTS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/job.h"
#include "store/store.h"

typedef struct claim_account {
  const char *name; /* into doc */
  const json_t *a;  /* the account's object, into doc */
  int64_t max, running;
} claim_account_t;

typedef struct claim_accounts {
  json_t *doc;
  claim_account_t *v; /* the capped accounts only: n 0 when none is */
  size_t n;
} claim_accounts_t;

/* Reads the accounts; for each capped one counts its running jobs (taking
 * the claim lock first) and, at its cap, appends its projects to skip
 * (while there is room: past STORE_CLAIM_SKIP_MAX, claim_accounts_full
 * gives the jobs back instead). */
int claim_accounts_load(store_t *s, claim_accounts_t *a, job_key_t *skip, size_t *nskip);

/* Is j's account at its cap? */
int claim_accounts_full(const claim_accounts_t *a, const job_t *j);

/* j was claimed: one more running in its account. */
void claim_accounts_count(claim_accounts_t *a, const job_t *j);

void claim_accounts_release(claim_accounts_t *a);

#endif
