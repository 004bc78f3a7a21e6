/* Accounts: a customer's or a team's share of one spiderd. An account
 * groups projects (and so their versions, spiders, jobs, schedules, queues
 * and events), users and tokens, and may cap how many of its jobs run at
 * once across the cluster.
 *
 * All accounts are one JSON document, kept whole in the store (store.h:
 * store_accounts_get) and cached with the users and tokens, since every
 * request's caller is looked up in it:
 *   {"<account>": {"description": "...", "max_running": 0,
 *                  "projects": [...], "users": [...], "tokens": [...],
 *                  "created_ms": N}, ...}
 * A project, a user and a token belong to at most one account. A token
 * that no account names belongs to its owner's account when its owner is a
 * user of one: a user's tokens never reach beyond the user's account.
 *
 * A user or token of an account with a role below admin sees and touches
 * the account's projects only (and, within them, its own project limit);
 * an admin, and every principal of no account, is as without accounts.
 *
 * Pure functions; no I/O. Ownership: returned pointers are into doc
 * (valid while doc is), except account_scope's (malloc'd, the caller's).
 */
#ifndef SPIDERD_CORE_ACCOUNT_H
#define SPIDERD_CORE_ACCOUNT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "core/principal.h"

/* The account's member lists, as fields of its object. */
#define ACCOUNT_PROJECTS "projects"
#define ACCOUNT_USERS "users"
#define ACCOUNT_TOKENS "tokens"

/* Is s in the array field `field` of account object a? */
int account_has(const json_t *a, const char *field, const char *s);

/* The name of the account whose `field` lists s (NULL: none). */
const char *account_find(const json_t *doc, const char *field, const char *s);

/* The account of a principal (NULL: none): the one naming it, else, for a
 * token, its owner's (a user). */
const char *account_of(const json_t *doc, principal_kind_t kind, const char *name,
                       const char *owner);

/* What a member of `account` limited to `own` projects ("" = all) may
 * see: the account's projects within own, as "a,b"; PRINCIPAL_PROJECTS_NONE
 * when none. NULL on allocation failure. */
char *account_scope(const json_t *doc, const char *account, const char *own);

/* The account's cap on running jobs (0: none). */
int64_t account_max_running(const json_t *doc, const char *account);

#endif
