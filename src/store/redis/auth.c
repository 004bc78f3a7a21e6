/* The Redis backend's users and API tokens (store.h: principals), each op
 * one Lua script (lua/auth.lua, store/redis/internal.h).
 *
 * Keys under the prefix P:
 *   principal:KIND:NAME  hash: the principal's fields as named in
 *                        principal_t (kind and role as decimal numbers)
 *   principals:KIND      zset (all scores 0) of the names of that kind: a
 *                        list reads it in byte order (ZRANGEBYLEX)
 *
 * A write that keeps an admin checks and writes in its one script.
 *
 * The auth generation is meta "auth.gen" (core.lua), written by store.c
 * after a put or delete, as a script of its own: Redis has no transaction
 * both could share (store_auth_gen says what a failure in between means). */
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "store/redis/internal.h"

int redis_principal_put(store_t *s, const principal_t *p, int64_t keep_admin_ms) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_i64(&a, p->kind);
  ra_str(&a, p->name);
  ra_str(&a, p->label);
  ra_str(&a, p->secret);
  ra_str(&a, p->owner);
  ra_i64(&a, p->role);
  ra_str(&a, p->projects);
  ra_i64(&a, p->created_ms);
  ra_i64(&a, p->expires_ms);
  ra_i64(&a, keep_admin_ms);
  int rc = redis_eval(RQ(s), RS_PRINCIPAL_PUT, &a, &r, "put principal");
  if (!rc && rr_i64(r) < 0) rc = SPD_ECONFLICT; /* the last admin: nothing written */
  if (r) freeReplyObject(r);
  return rc;
}

int redis_principal_delete(store_t *s, principal_kind_t kind, const char *name,
                           int64_t keep_admin_ms, int *count) {
  redis_args_t a = {0};
  redisReply *r = NULL;
  ra_i64(&a, kind);
  ra_str(&a, name);
  ra_i64(&a, keep_admin_ms);
  int rc = redis_eval(RQ(s), RS_PRINCIPAL_DELETE, &a, &r, "delete principal");
  int64_t n = rc ? 0 : rr_i64(r);
  if (n < 0) rc = SPD_ECONFLICT; /* the last admin: nothing deleted */
  else if (!rc) *count = (int)n;
  if (r) freeReplyObject(r);
  return rc;
}

#define PF(name, type) {#name, type, offsetof(principal_t, name)}
static const struct redis_field principal_fields[] = {
    PF(kind, RF_INT),     PF(name, RF_STR),     PF(label, RF_STR),
    PF(secret, RF_STR),   PF(owner, RF_STR),    PF(role, RF_INT),
    PF(projects, RF_STR), PF(created_ms, RF_I64), PF(expires_ms, RF_I64),
};
#undef PF

/* A field a row lacks reads as "", as the SQL backends' NOT NULL columns. */
static int redis_principal_fill(principal_t *p) {
  char **strs[] = {&p->name, &p->label, &p->secret, &p->owner, &p->projects};
  for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
    if (!*strs[i] && !(*strs[i] = strdup(""))) return -ENOMEM;
  return 0;
}

static int principal_item(const redisReply *r, void *out) {
  principal_t p = {0};
  int rc = redis_decode(r, principal_fields,
                        sizeof(principal_fields) / sizeof(principal_fields[0]), &p);
  if (!rc) rc = redis_principal_fill(&p);
  if (!rc) rc = principal_list_push(out, &p);
  principal_release(&p);
  return rc;
}

int redis_principals_list(store_t *s, principal_list_t *out) {
  return redis_list(RQ(s), RS_PRINCIPALS_LIST, "list principals", principal_item, out);
}
