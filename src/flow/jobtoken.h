/* Job-scoped tokens: a crawl's process gets SPIDERD_TOKEN, which lets it
 * use the queue API while it runs when the daemon requires basic auth.
 *
 * A token is "<job row id>.<hex HMAC-SHA256(secret, job row id)>": it is
 * checked without a table, by any daemon holding the secret (kept in the
 * store's meta as 'auth.job_secret', so it survives restarts and nodes
 * sharing a store agree on it). Whether the job still runs is the caller's
 * question.
 */
#ifndef SPIDERD_FLOW_JOBTOKEN_H
#define SPIDERD_FLOW_JOBTOKEN_H

#include <stddef.h>
#include <stdint.h>

#define JOBTOKEN_SECRET_HEX 64 /* characters of a secret (32 random bytes) */
#define JOBTOKEN_MAX 96        /* a token's length, with its NUL, at most */
#define JOBTOKEN_META_KEY "auth.job_secret"

/* A new random secret: 64 hex characters and a NUL. 0 or -EIO. */
int jobtoken_secret_new(char out[JOBTOKEN_SECRET_HEX + 1]);

/* The token of job id. 0, or -ENOENT when libcrypto cannot be loaded. */
int jobtoken_make(const char *secret, int64_t job_id, char out[JOBTOKEN_MAX]);

/* The job id a token names, or 0 when it is not one of secret's. */
int64_t jobtoken_check(const char *secret, const char *token);

#endif
