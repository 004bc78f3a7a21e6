/* Accounts (core/account.h) in one place: made, changed, deleted, and
 * projects, users and tokens put in or taken out of them, each with its
 * event (account.created, account.updated, account.deleted,
 * account.assigned, account.unassigned) naming who asked.
 *
 * The accounts are one document (store_accounts_get): each change reads
 * it, changes it and writes it back inside the caller's store op, under
 * the store's claim lock, so two nodes changing accounts at once take
 * turns (PostgreSQL: the lock; SQLite: its one writer; Redis: the store
 * lock a transaction's first script takes, the read included, held to its
 * commit). Writing it bumps the auth generation: every node reads
 * its callers' accounts again (api/auth.h). Nothing of the loop's state
 * changes: none fills a flow_change_t.
 *
 * Errors as store.h's, and SPD_ENOACCOUNT (no such account), SPD_ENOPROJECT
 * or SPD_ENOPRINCIPAL (the member to take out is not in it), SPD_ECONFLICT (the account exists already; deleting one that
 * still has users or tokens), SPD_ENOPRINCIPAL (no such user or token to
 * put in), with a message in w->err.
 * Ownership: w->result (a new reference) is the caller's.
 */
#ifndef SPIDERD_FLOW_ACCOUNTS_H
#define SPIDERD_FLOW_ACCOUNTS_H

#include <jansson.h>
#include <stdint.h>

#include "store/store.h"

typedef enum accounts_op {
  ACCOUNTS_CREATE,
  ACCOUNTS_UPDATE,
  ACCOUNTS_DELETE,
  ACCOUNTS_ASSIGN,   /* moves the member here from any other account */
  ACCOUNTS_UNASSIGN,
} accounts_op_t;

typedef struct accounts_write {
  /* in */
  accounts_op_t op;
  const char *account;
  const char *description; /* create, update: NULL keeps ("" on create) */
  int64_t max_running;     /* create, update: < 0 keeps (0 on create: no cap) */
  const char *field;       /* assign, unassign: ACCOUNT_PROJECTS, _USERS or _TOKENS */
  const char *member;      /* assign, unassign: the project, user name or token id */
  const char *actor;       /* who asked, for the event */
  int64_t now_ms;
  /* out */
  json_t *result;          /* the account as written; {} after a delete */
  char err[256];
} accounts_write_t;

/* Does w, with its event. */
int accounts_write(store_t *s, accounts_write_t *w);

/* The document, parsed, into *doc (the caller's: json_decref). */
int accounts_load(store_t *s, json_t **doc);

/* A user or token was deleted (field ACCOUNT_USERS or ACCOUNT_TOKENS): its
 * name leaves every account, so a user made again under the same name
 * starts outside them. No event (the deletion has its own). */
int accounts_forget(store_t *s, const char *field, const char *member);

#endif
