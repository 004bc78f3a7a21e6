/* A small client of S3-compatible object storage (AWS S3, MinIO, Ceph,
 * s3rver): whole-object PUT from a file, multipart upload for large ones,
 * GET with a range into a file, HEAD, DELETE, listing by prefix and a
 * bucket check. Requests are signed with AWS Signature Version 4 (our own
 * signer, s3_sign, tested against AWS's published examples).
 *
 * Every request blocks (libcurl's easy interface): call them on a thread
 * of their own or the thread pool, never on the loop. An s3_t is read-only
 * once s3_init returned, so threads share it; s3_status_t is the one part
 * that changes, under its own mutex.
 *
 * Ownership: s3_init fills a caller-owned s3_t that s3_release empties;
 * s3_list_t is the caller's, emptied by s3_list_release. Secrets are kept
 * here and never written into a message, a log or an error.
 */
#ifndef SPIDERD_NET_S3_H
#define SPIDERD_NET_S3_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* What the uploader reports and /metrics and /readyz read. */
typedef struct s3_status {
  pthread_mutex_t mu;
  int64_t backlog_bytes;   /* bytes written locally, not yet in the store */
  int64_t backlog_objects; /* objects waiting (parts and whole objects) */
  int64_t oldest_ms;       /* wall clock of the oldest byte waiting; 0: none */
  uint64_t failures;       /* requests that failed (each retry counts) */
  char problem[512];       /* the last failure's reason while failing; "" */
} s3_status_t;

typedef struct s3 {
  char *endpoint; /* scheme://host[:port], no trailing slash */
  char *host;     /* host[:port] as signed */
  char *bucket;
  char *prefix; /* "" or "a/b/" (ends with '/') */
  char *region;
  char *key_id, *secret, *token; /* token "" without a session */
  int virtual_host;              /* AWS: bucket.s3.REGION.amazonaws.com */
  s3_status_t status;
} s3_t;

/* One answer. status is the HTTP status (0: none came); err an operator's
 * sentence (S3's error code and message, or the transport's). */
typedef struct s3_res {
  long status;
  int64_t length; /* Content-Length (HEAD) or the whole size (Content-Range) */
  char code[64];  /* S3's <Code>, e.g. "NoSuchBucket" */
  char err[512];
} s3_res_t;

typedef struct s3_obj {
  char *key; /* without the s3_t's prefix */
  int64_t size;
  char mtime[32]; /* LastModified, ISO 8601 (sorts as time) */
} s3_obj_t;

typedef struct s3_list {
  s3_obj_t *v;
  size_t n;
} s3_list_t;

/* url: s3://BUCKET[/PREFIX]; endpoint "" for AWS (virtual-hosted), else
 * http(s)://host[:port] (path-style). Credentials: AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN from the environment, else from
 * credfile (AWS shared-credentials format, profile AWS_PROFILE or
 * "default"). 0, or -EINVAL with the reason in err. */
int s3_init(s3_t *s, const char *url, const char *endpoint, const char *region,
            const char *credfile, char *err, size_t errlen);
void s3_release(s3_t *s);

/* The requests. 0 on a 2xx answer; else -ENOENT (404), -EACCES (403),
 * -EINVAL (another 4xx), -EAGAIN (5xx) or -EIO (no answer), with r filled.
 * Keys are relative to the s3_t's prefix. */
int s3_check_bucket(const s3_t *s, s3_res_t *r);
/* Uploads len bytes of fd from off as one object. */
int s3_put_fd(const s3_t *s, const char *key, int fd, int64_t off, int64_t len, s3_res_t *r);
/* Uploads len bytes of fd from off: one PUT up to part_size bytes, else a
 * multipart upload of part_size parts (aborted when a part fails). */
int s3_put_big(const s3_t *s, const char *key, int fd, int64_t off, int64_t len,
               int64_t part_size, s3_res_t *r);
/* Writes bytes [off, off+len) of the object (len < 0: to its end) to outfd;
 * r->length is then the object's whole size. */
int s3_get_fd(const s3_t *s, const char *key, int64_t off, int64_t len, int outfd, s3_res_t *r);
int s3_head(const s3_t *s, const char *key, s3_res_t *r);
int s3_delete(const s3_t *s, const char *key, s3_res_t *r);
/* Every object whose key starts with prefix, in key order. */
int s3_list(const s3_t *s, const char *prefix, s3_list_t *out, s3_res_t *r);
void s3_list_release(s3_list_t *l);

/* A job's file as the uploader leaves it: the object key when whole, else
 * (a crawl still running, or its node gone before the end) the parts
 * key.part-000001, key.part-000002, ... joined. Writes bytes [off, off+len)
 * (len < 0: to the end) to outfd and sets *total to the whole size.
 * -ENOENT when there is neither. */
int s3_read_joined(const s3_t *s, const char *key, int64_t off, int64_t len, int outfd,
                   int64_t *total, s3_res_t *r);
/* Deletes the object key and its parts (absent ones are no error). */
int s3_delete_joined(const s3_t *s, const char *key, s3_res_t *r);

/* ---- pure helpers, thread-safe (tests/unit/test_s3.c) ---- */

/* The Authorization header's value for a request: method, path (already
 * URI-encoded, e.g. "/bucket/a%20b"), the canonical query ("" or sorted
 * k=v&...), n headers as "name:value" with lower-case names sorted by name,
 * the payload's SHA-256 in hex, amzdate "YYYYMMDDTHHMMSSZ". 0 or -ENOMEM. */
int s3_sign(const char *key_id, const char *secret, const char *region, const char *method,
            const char *path, const char *query, const char *const *headers, size_t n,
            const char *payload_hash, const char *amzdate, char *out, size_t outlen);
/* RFC 3986 encoding as SigV4 wants it; '/' kept when keep_slash. */
char *s3_uri_encode(const char *s, int keep_slash);
/* The text of the first <tag>...</tag> of xml, entities decoded, from
 * *pos on (advanced past it when pos is given). NULL when absent. */
char *s3_xml_tag(const char *xml, const char *tag, const char **pos);
/* A ListObjectsV2 answer: appends its objects to out (keys with the first
 * strip bytes cut), sets *truncated and *next (the continuation token, to
 * free). 0, -EINVAL (not a listing) or -ENOMEM. */
int s3_parse_list(const char *xml, size_t strip, s3_list_t *out, int *truncated, char **next);
/* Reads key_id, secret and token of profile from an AWS credentials file. */
int s3_read_credentials(const char *path, const char *profile, char **key_id, char **secret,
                        char **token, char *err, size_t errlen);

#endif
