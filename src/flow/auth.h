/* Users and API tokens (core/principal.h) in one place: a token made or
 * revoked, a user made, changed or deleted, each with its audit event
 * (token.created, token.revoked, user.created, user.updated, user.deleted),
 * and the last admin's guard with its refusals (token.revoke_refused,
 * user.update_refused, user.delete_refused).
 *
 * The last admin: on a node that serves beyond loopback with nothing else
 * to let an admin in (no --insecure, no [scrapyd] login: the caller decides,
 * w->keep_admin), the last usable admin credential in the store stays:
 * revoking, deleting or demoting it would turn authentication off or leave
 * nobody to manage users and tokens. The store checks and writes in one
 * atomic step (store_principal_*_keep_admin), so two nodes removing the last
 * two admins at once cannot both succeed. A refusal writes nothing but its
 * event, which commits (the function returns 0), and sets w->refused with
 * the reason in w->err: the caller answers 409.
 *
 * Reading only what a change needs: the caller passes the principal as its
 * cache of the store knows it (w->known, NULL when the cache has none) and
 * the auth generation of that cache (w->gen). When the store's generation is
 * still that one, nothing changed since (every put and delete changes it),
 * and the cached copy is the row: one value is read, not the table. Else
 * the principals are read from the store. (Redis writes a row and the
 * generation in two steps: a put or delete that failed between them left
 * the row changed under the old generation, and its retry, which bumps it,
 * works from the copy as it was before the failed attempt, as that attempt
 * did.)
 *
 * Each runs on a store thread inside the caller's store op (store_submit),
 * so a change and its event commit together. Nothing of the loop's state
 * changes with a principal (the caller reads the principals again,
 * auth_reload): none fills a flow_change_t. Errors as store.h's, and
 * SPD_ENOPRINCIPAL (no such user or token, or a token of someone else),
 * SPD_ECONFLICT (a user exists already), with a message in w->err.
 * Ownership: everything in a principals_write_t is the caller's.
 */
#ifndef SPIDERD_FLOW_AUTH_H
#define SPIDERD_FLOW_AUTH_H

#include <stdint.h>

#include "core/principal.h"
#include "store/store.h"

typedef struct principals_write {
  /* in */
  principal_t *p;            /* token_create, user_put: what to write (user_put
                                fills an update's missing fields from the row) */
  const char *name;          /* token_revoke: the token's id; user_delete: the user */
  const char *caller;        /* token_revoke: who asks (a user's or token's name) */
  int admin;                 /* token_revoke: the caller is an admin (else its own
                                tokens only: another's is not found) */
  int keep_admin;            /* the last admin's guard is on */
  const char *listen;        /* "host:port" this node serves on, for a refusal */
  const principal_t *known;  /* the cache's copy of the principal changed (NULL: none) */
  const char *gen;           /* the cache's auth generation (NULL: no cache) */
  /* out */
  int refused;               /* the last admin: only the refusal's event written */
  char err[512];
} principals_write_t;

/* Writes the new token w->p (secret already hashed), with token.created. */
int principals_token_create(store_t *s, principals_write_t *w);

/* Revokes token w->name, with token.revoked (or token.revoke_refused). */
int principals_token_revoke(store_t *s, principals_write_t *w);

/* Makes (create = 1; SPD_ECONFLICT when it exists) or changes (create = 0;
 * SPD_ENOPRINCIPAL when it does not) user w->p, with user.created or
 * user.updated (or user.update_refused). An update keeps what w->p leaves
 * unset (secret and projects NULL, role ROLE_NONE) and the creation time. */
int principals_user_put(store_t *s, principals_write_t *w, int create);

/* Deletes user w->name, with user.deleted (or user.delete_refused). */
int principals_user_delete(store_t *s, principals_write_t *w);

/* A deep copy of from into *to (the caller's: principal_release). 0 or
 * -ENOMEM (then *to holds nothing). */
int principals_copy(const principal_t *from, principal_t *to);

#endif
