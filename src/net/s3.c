/* See s3.h. The pure half (signing, encoding, XML, credentials) is in
 * s3_sign.c; this file sends the requests. */
#include "net/s3.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "net/curl_lazy.h"

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define MAX_PARTS 10000

static char *dupe(const char *s) { return strdup(s ? s : ""); }

static int set_credentials(s3_t *s, const char *credfile, char *err, size_t errlen) {
  const char *id = getenv("AWS_ACCESS_KEY_ID"), *sec = getenv("AWS_SECRET_ACCESS_KEY");
  if (id && *id && sec && *sec) {
    const char *tok = getenv("AWS_SESSION_TOKEN");
    s->key_id = dupe(id);
    s->secret = dupe(sec);
    s->token = dupe(tok);
    return s->key_id && s->secret && s->token ? 0 : -ENOMEM;
  }
  if (!credfile || !*credfile) {
    snprintf(err, errlen, "object_store has no credentials: set AWS_ACCESS_KEY_ID and "
                          "AWS_SECRET_ACCESS_KEY in the daemon's environment, or "
                          "object_store_credentials to an AWS credentials file");
    return -EINVAL;
  }
  const char *profile = getenv("AWS_PROFILE");
  int rc = s3_read_credentials(credfile, profile && *profile ? profile : "default", &s->key_id,
                               &s->secret, &s->token, err, errlen);
  if (!rc && !s->token && !(s->token = strdup(""))) rc = -ENOMEM;
  return rc;
}

static int set_endpoint(s3_t *s, const char *endpoint, char *err, size_t errlen) {
  if (!endpoint || !*endpoint) {
    s->virtual_host = 1;
    if (asprintf(&s->host, "%s.s3.%s.amazonaws.com", s->bucket, s->region) < 0 ||
        asprintf(&s->endpoint, "https://%s", s->host) < 0)
      return -ENOMEM;
    return 0;
  }
  const char *h = strstr(endpoint, "://");
  if (!h || (strncmp(endpoint, "http://", 7) && strncmp(endpoint, "https://", 8)) || !h[3]) {
    snprintf(err, errlen, "object_store_endpoint '%.200s' is not an http:// or https:// URL",
             endpoint);
    return -EINVAL;
  }
  s->endpoint = dupe(endpoint);
  size_t n = strlen(s->endpoint);
  while (n && s->endpoint[n - 1] == '/') s->endpoint[--n] = '\0';
  h = s->endpoint + (h - endpoint) + 3;
  s->host = strndup(h, strcspn(h, "/"));
  if (!s->host) return -ENOMEM;
  if (h[strlen(s->host)]) {
    snprintf(err, errlen, "object_store_endpoint '%.200s' must have no path", endpoint);
    return -EINVAL;
  }
  return 0;
}

int s3_init(s3_t *s, const char *url, const char *endpoint, const char *region,
            const char *credfile, char *err, size_t errlen) {
  memset(s, 0, sizeof(*s));
  pthread_mutex_init(&s->status.mu, NULL);
  int rc = -EINVAL;
  if (!url || strncmp(url, "s3://", 5) || !url[5] || url[5] == '/') {
    snprintf(err, errlen, "object_store must be s3://BUCKET/PREFIX (got '%.200s')",
             url ? url : "");
    goto out;
  }
  if (strchr(url, '@') || strchr(url, '?')) {
    snprintf(err, errlen, "object_store takes no credentials or options in its URL: "
                          "give them in the environment or object_store_credentials");
    goto out;
  }
  const char *b = url + 5, *slash = strchr(b, '/');
  s->bucket = slash ? strndup(b, (size_t)(slash - b)) : strdup(b);
  const char *p = slash ? slash + 1 : "";
  while (*p == '/') p++;
  size_t pl = strlen(p);
  while (pl && p[pl - 1] == '/') pl--;
  if (!s->bucket || asprintf(&s->prefix, "%.*s%s", (int)pl, p, pl ? "/" : "") < 0) {
    s->prefix = NULL;
    rc = -ENOMEM;
    goto out;
  }
  s->region = dupe(region && *region ? region : "us-east-1");
  if (!s->region) {
    rc = -ENOMEM;
    goto out;
  }
  if ((rc = set_endpoint(s, endpoint, err, errlen))) goto out;
  rc = set_credentials(s, credfile, err, errlen);
out:
  if (rc == -ENOMEM) snprintf(err, errlen, "out of memory");
  if (rc) s3_release(s);
  return rc;
}

void s3_release(s3_t *s) {
  free(s->endpoint);
  free(s->host);
  free(s->bucket);
  free(s->prefix);
  free(s->region);
  free(s->key_id);
  if (s->secret) explicit_bzero(s->secret, strlen(s->secret));
  free(s->secret);
  free(s->token);
  pthread_mutex_destroy(&s->status.mu);
  s3_t z = {0};
  z.status = s->status;
  *s = z;
}

/* ---- one request ---- */

typedef struct req {
  const s3_t *s;
  const char *method;
  const char *key;   /* NULL: the bucket */
  const char *query; /* canonical and sent as is; "" none */
  const char *range; /* "bytes=a-b" or NULL */
  int in_fd;         /* PUT body from a file */
  int64_t in_off, in_len, sent;
  const char *body; /* POST body from memory */
  size_t body_len;
  int out_fd; /* GET body to a file (2xx only); -1: into buf */
  long timeout_ms; /* the whole request; 0: none (only a stall ends it) */
  CURL *h;
  char *buf;
  size_t len, cap;
  char etag[128];
  int64_t length, total;
} req_t;

static size_t rd_file(char *dst, size_t size, size_t n, void *ud) {
  req_t *q = ud;
  size_t want = size * n;
  if ((int64_t)want > q->in_len - q->sent) want = (size_t)(q->in_len - q->sent);
  if (!want) return 0;
  ssize_t got;
  do got = pread(q->in_fd, dst, want, q->in_off + q->sent);
  while (got < 0 && errno == EINTR);
  if (got <= 0) return CURL_READFUNC_ABORT; /* the file shrank: never send short */
  q->sent += got;
  return (size_t)got;
}

static size_t wr_body(char *src, size_t size, size_t n, void *ud) {
  req_t *q = ud;
  size_t len = size * n;
  long status = 0;
  curl_easy_getinfo(q->h, CURLINFO_RESPONSE_CODE, &status);
  if (q->out_fd >= 0 && status / 100 == 2) {
    for (size_t off = 0; off < len;) {
      ssize_t w = write(q->out_fd, src + off, len - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) return 0;
      off += (size_t)w;
    }
    return len;
  }
  if (q->len + len + 1 > q->cap) {
    if (q->len + len > (4u << 20)) return 0; /* an answer of ours is never this big */
    size_t cap = (q->len + len + 1) * 2;
    char *b = realloc(q->buf, cap);
    if (!b) return 0;
    q->buf = b;
    q->cap = cap;
  }
  memcpy(q->buf + q->len, src, len);
  q->len += len;
  q->buf[q->len] = '\0';
  return len;
}

static size_t wr_header(char *src, size_t size, size_t n, void *ud) {
  req_t *q = ud;
  size_t len = size * n;
  char line[256];
  size_t l = len < sizeof(line) - 1 ? len : sizeof(line) - 1;
  memcpy(line, src, l);
  while (l && (line[l - 1] == '\r' || line[l - 1] == '\n')) l--;
  line[l] = '\0';
  if (!strncasecmp(line, "Content-Length:", 15)) q->length = strtoll(line + 15, NULL, 10);
  if (!strncasecmp(line, "Content-Range:", 14)) {
    const char *t = strchr(line, '/');
    if (t) q->total = strtoll(t + 1, NULL, 10);
  }
  if (!strncasecmp(line, "ETag:", 5)) {
    const char *v = line + 5;
    while (*v == ' ') v++;
    snprintf(q->etag, sizeof(q->etag), "%.120s", v);
  }
  return len;
}

static void amz_now(char out[17]) {
  time_t t = time(NULL);
  struct tm tm;
  gmtime_r(&t, &tm);
  strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

static char *object_path(const s3_t *s, const char *key) {
  char *full = NULL, *enc = NULL, *path = NULL;
  if (asprintf(&full, "%s%s", s->prefix, key ? key : "") < 0) return NULL;
  enc = s3_uri_encode(full, 1);
  if (enc && asprintf(&path, "%s%s%s%s", s->virtual_host ? "" : "/",
                      s->virtual_host ? "" : s->bucket, key || s->virtual_host ? "/" : "",
                      key ? enc : "") < 0)
    path = NULL;
  free(full);
  free(enc);
  return path;
}

/* The signed headers, in name order, into hdrs (a curl list). */
static struct curl_slist *sign_headers(req_t *q, const char *path, char *err, size_t errlen) {
  const s3_t *s = q->s;
  char date[17], hash[65], auth[1024];
  amz_now(date);
  if (q->body) {
    unsigned char md[32];
    if (curl_lazy_sha256(q->body, q->body_len, md)) {
      snprintf(err, errlen, "libcrypto cannot be loaded (SHA-256)");
      return NULL;
    }
    for (int i = 0; i < 32; i++) sprintf(hash + 2 * i, "%02x", md[i]);
  } else {
    snprintf(hash, sizeof(hash), "%s", q->in_fd >= 0 ? "UNSIGNED-PAYLOAD" : EMPTY_SHA256);
  }
  char h[4][1200];
  const char *hv[4];
  size_t nh = 0;
  snprintf(h[nh++], sizeof(h[0]), "host:%s", s->host);
  snprintf(h[nh++], sizeof(h[0]), "x-amz-content-sha256:%s", hash);
  snprintf(h[nh++], sizeof(h[0]), "x-amz-date:%s", date);
  if (s->token[0]) snprintf(h[nh++], sizeof(h[0]), "x-amz-security-token:%s", s->token);
  for (size_t i = 0; i < nh; i++) hv[i] = h[i];
  if (s3_sign(s->key_id, s->secret, s->region, q->method, path, q->query, hv, nh, hash, date,
              auth, sizeof(auth))) {
    snprintf(err, errlen, "cannot sign the request (libcrypto missing?)");
    return NULL;
  }
  struct curl_slist *l = NULL;
  char line[1300];
  snprintf(line, sizeof(line), "Host: %s", s->host);
  l = curl_slist_append(l, line);
  for (size_t i = 1; i < nh; i++) l = curl_slist_append(l, h[i]);
  snprintf(line, sizeof(line), "Authorization: %s", auth);
  l = curl_slist_append(l, line);
  l = curl_slist_append(l, "Expect:");
  if (q->range) {
    snprintf(line, sizeof(line), "Range: %s", q->range);
    l = curl_slist_append(l, line);
  }
  return l;
}

static void set_method(req_t *q) {
  CURL *h = q->h;
  if (!strcmp(q->method, "HEAD")) {
    curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  } else if (!strcmp(q->method, "PUT")) {
    curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
    curl_easy_setopt(h, CURLOPT_READFUNCTION, rd_file);
    curl_easy_setopt(h, CURLOPT_READDATA, q);
    curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)q->in_len);
  } else if (!strcmp(q->method, "POST")) {
    curl_easy_setopt(h, CURLOPT_POST, 1L);
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, q->body ? q->body : "");
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->body_len);
  } else if (strcmp(q->method, "GET")) {
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, q->method);
  }
}

/* The error of a non-2xx answer, in words an operator can act on. */
static int explain(const req_t *q, long status, s3_res_t *r) {
  const s3_t *s = q->s;
  char *code = q->buf ? s3_xml_tag(q->buf, "Code", NULL) : NULL;
  char *msg = q->buf ? s3_xml_tag(q->buf, "Message", NULL) : NULL;
  snprintf(r->code, sizeof(r->code), "%s",
           code ? code : status == 404 ? "NotFound" : status == 403 ? "Forbidden" : "");
  const char *hint = "";
  if (!strcmp(r->code, "NoSuchBucket"))
    hint = ": the bucket does not exist (create it, or fix object_store)";
  else if (!strcmp(r->code, "InvalidAccessKeyId") || !strcmp(r->code, "SignatureDoesNotMatch"))
    hint = ": the store refused the credentials (check AWS_ACCESS_KEY_ID / "
           "AWS_SECRET_ACCESS_KEY or object_store_credentials, and object_store_region)";
  else if (!strcmp(r->code, "RequestTimeTooSkewed"))
    hint = ": this machine's clock is too far from the store's (set it, e.g. with NTP)";
  else if (!strcmp(r->code, "AccessDenied") || !strcmp(r->code, "Forbidden"))
    hint = ": the credentials may not use this bucket (check its policy)";
  snprintf(r->err, sizeof(r->err), "s3://%s/%s%s: HTTP %ld %s%s%.200s%s", s->bucket, s->prefix,
           q->key ? q->key : "", status, r->code, msg ? " (" : "", msg ? msg : "",
           msg ? ")" : "");
  size_t l = strlen(r->err);
  snprintf(r->err + l, sizeof(r->err) - l, "%s", hint);
  free(code);
  free(msg);
  if (status == 404) return -ENOENT;
  if (status == 403) return -EACCES;
  return status >= 500 ? -EAGAIN : -EINVAL;
}

static void setup(req_t *q, const char *url, struct curl_slist *hdrs, char *cerr) {
  CURL *h = q->h;
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 5000L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(h, CURLOPT_LOW_SPEED_TIME, 30L);
  if (q->timeout_ms) curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, q->timeout_ms);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
  curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, wr_header);
  curl_easy_setopt(h, CURLOPT_HEADERDATA, q);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, wr_body);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, q);
  const char *ca = getenv("CURL_CA_BUNDLE");
  if (!ca || !*ca) ca = getenv("SSL_CERT_FILE");
  if (ca && *ca) curl_easy_setopt(h, CURLOPT_CAINFO, ca);
  set_method(q);
}

static int perform(req_t *q, s3_res_t *r) {
  memset(r, 0, sizeof(*r));
  char *path = NULL, *url = NULL, cerr[CURL_ERROR_SIZE] = "";
  struct curl_slist *hdrs = NULL;
  int rc = -EIO;
  if (curl_lazy_load(r->err, sizeof(r->err))) return -EIO;
  if (!(path = object_path(q->s, q->key)) ||
      asprintf(&url, "%s%s%s%s", q->s->endpoint, path, q->query[0] ? "?" : "", q->query) < 0) {
    url = NULL;
    rc = -ENOMEM;
    goto out;
  }
  if (!(hdrs = sign_headers(q, path, r->err, sizeof(r->err)))) goto out;
  if (!(q->h = curl_easy_init())) goto out;
  setup(q, url, hdrs, cerr);
  CURLcode cc = curl_easy_perform(q->h);
  long status = 0;
  curl_easy_getinfo(q->h, CURLINFO_RESPONSE_CODE, &status);
  r->status = status;
  r->length = q->total ? q->total : q->length;
  if (cc != CURLE_OK && !(status / 100 != 2 && status)) {
    snprintf(r->err, sizeof(r->err), "%s: %s", q->s->endpoint,
             cerr[0] ? cerr : curl_easy_strerror(cc));
    goto out;
  }
  /* CompleteMultipartUpload may fail with a 200 whose body is an <Error>. */
  if (status / 100 == 2 && !(q->out_fd < 0 && q->buf && strstr(q->buf, "<Error>")))
    rc = 0;
  else
    rc = explain(q, status / 100 == 2 ? 500 : status, r);
out:
  if (q->h) curl_easy_cleanup(q->h);
  q->h = NULL;
  curl_slist_free_all(hdrs);
  free(path);
  free(url);
  return rc;
}

#define REQ(s_, m_, k_) {.s = (s_), .method = (m_), .key = (k_), .query = "", .in_fd = -1, .out_fd = -1}

int s3_check_bucket(const s3_t *s, s3_res_t *r) {
  req_t q = REQ(s, "GET", NULL);
  q.query = "list-type=2&max-keys=1";
  q.timeout_ms = 10000; /* at start-up: a silent store must not hold the start */
  int rc = perform(&q, r);
  free(q.buf);
  return rc;
}

int s3_put_fd(const s3_t *s, const char *key, int fd, int64_t off, int64_t len, s3_res_t *r) {
  req_t q = REQ(s, "PUT", key);
  q.in_fd = fd;
  q.in_off = off;
  q.in_len = len;
  int rc = perform(&q, r);
  if (!rc && q.sent != len) rc = -EIO;
  free(q.buf);
  return rc;
}

int s3_get_fd(const s3_t *s, const char *key, int64_t off, int64_t len, int outfd, s3_res_t *r) {
  req_t q = REQ(s, "GET", key);
  char range[64];
  if (off > 0 || len >= 0) {
    if (len >= 0)
      snprintf(range, sizeof(range), "bytes=%lld-%lld", (long long)off, (long long)(off + len - 1));
    else
      snprintf(range, sizeof(range), "bytes=%lld-", (long long)off);
    if (len != 0) q.range = range;
  }
  q.out_fd = outfd;
  int rc = len == 0 ? s3_head(s, key, r) : perform(&q, r);
  /* A range past the end: nothing to read, and the whole size is known. */
  if (rc == -EINVAL && r->status == 416) rc = 0;
  free(q.buf);
  return rc;
}

int s3_head(const s3_t *s, const char *key, s3_res_t *r) {
  req_t q = REQ(s, "HEAD", key);
  int rc = perform(&q, r);
  free(q.buf);
  return rc;
}

int s3_delete(const s3_t *s, const char *key, s3_res_t *r) {
  req_t q = REQ(s, "DELETE", key);
  int rc = perform(&q, r);
  free(q.buf);
  return rc == -ENOENT ? 0 : rc;
}

int s3_list(const s3_t *s, const char *prefix, s3_list_t *out, s3_res_t *r) {
  char *full = NULL, *enc = NULL, *tok = NULL, *etok = NULL, *query = NULL;
  int rc = -ENOMEM, truncated = 1;
  if (asprintf(&full, "%s%s", s->prefix, prefix) < 0 || !(enc = s3_uri_encode(full, 0)))
    goto out;
  while (truncated) {
    req_t q = REQ(s, "GET", NULL);
    if (asprintf(&query, "%s%s%slist-type=2&prefix=%s", tok ? "continuation-token=" : "",
                 etok ? etok : "", tok ? "&" : "", enc) < 0) {
      query = NULL;
      rc = -ENOMEM;
      goto out;
    }
    q.query = query;
    rc = perform(&q, r);
    if (!rc) rc = s3_parse_list(q.buf ? q.buf : "", strlen(s->prefix), out, &truncated, &tok);
    free(q.buf);
    free(query);
    query = NULL;
    free(etok);
    etok = tok ? s3_uri_encode(tok, 0) : NULL;
    free(tok);
    tok = etok ? strdup("") : NULL; /* only "is there one" matters from here */
    if (rc) goto out;
    if (truncated && !etok) {
      rc = -EINVAL;
      goto out;
    }
  }
out:
  free(full);
  free(enc);
  free(tok);
  free(etok);
  return rc;
}

void s3_list_release(s3_list_t *l) {
  for (size_t i = 0; i < l->n; i++) free(l->v[i].key);
  free(l->v);
  l->v = NULL;
  l->n = 0;
}

/* ---- multipart ---- */

static int mp_create(const s3_t *s, const char *key, char **upload_id, s3_res_t *r) {
  req_t q = REQ(s, "POST", key);
  q.query = "uploads=";
  q.body = "";
  int rc = perform(&q, r);
  if (!rc && !(*upload_id = q.buf ? s3_xml_tag(q.buf, "UploadId", NULL) : NULL)) {
    snprintf(r->err, sizeof(r->err), "the store's answer to a multipart upload has no UploadId");
    rc = -EINVAL;
  }
  free(q.buf);
  return rc;
}

static int mp_call(const s3_t *s, const char *method, const char *key, const char *query,
                   const char *body, req_t *q, s3_res_t *r) {
  req_t z = REQ(s, method, key);
  *q = z;
  q->query = query;
  if (body) {
    q->body = body;
    q->body_len = strlen(body);
  }
  return perform(q, r);
}

int s3_put_big(const s3_t *s, const char *key, int fd, int64_t off, int64_t len,
               int64_t part_size, s3_res_t *r) {
  if (len <= part_size) return s3_put_fd(s, key, fd, off, len, r);
  if (part_size < (5 << 20)) part_size = 5 << 20;
  while (len / part_size >= MAX_PARTS) part_size *= 2;
  char *id = NULL, *eid = NULL, *xml = NULL, query[640];
  int rc = mp_create(s, key, &id, r);
  if (rc) return rc;
  rc = -ENOMEM;
  if (!(eid = s3_uri_encode(id, 0))) goto out;
  size_t cap = 128 + (size_t)(len / part_size + 1) * 200, used = 0;
  if (!(xml = malloc(cap))) goto out;
  used = (size_t)snprintf(xml, cap, "<CompleteMultipartUpload>");
  rc = 0;
  for (int part = 1; !rc && (int64_t)(part - 1) * part_size < len; part++) {
    int64_t po = (int64_t)(part - 1) * part_size;
    req_t q = REQ(s, "PUT", key);
    snprintf(query, sizeof(query), "partNumber=%d&uploadId=%s", part, eid);
    q.query = query;
    q.in_fd = fd;
    q.in_off = off + po;
    q.in_len = len - po < part_size ? len - po : part_size;
    rc = perform(&q, r);
    if (!rc && (q.sent != q.in_len || !q.etag[0])) rc = -EIO;
    free(q.buf);
    if (!rc)
      used += (size_t)snprintf(xml + used, cap - used,
                               "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>", part,
                               q.etag);
  }
  if (!rc) {
    snprintf(xml + used, cap - used, "</CompleteMultipartUpload>");
    req_t q;
    snprintf(query, sizeof(query), "uploadId=%s", eid);
    rc = mp_call(s, "POST", key, query, xml, &q, r);
    free(q.buf);
  }
  if (rc) {
    s3_res_t ar;
    req_t q;
    snprintf(query, sizeof(query), "uploadId=%s", eid);
    mp_call(s, "DELETE", key, query, NULL, &q, &ar);
    free(q.buf);
  }
out:
  if (rc == -ENOMEM) snprintf(r->err, sizeof(r->err), "out of memory");
  free(id);
  free(eid);
  free(xml);
  return rc;
}

/* ---- a job's file, whole or still in parts ---- */

static int part_order(const void *a, const void *b) {
  return strcmp(((const s3_obj_t *)a)->key, ((const s3_obj_t *)b)->key);
}

/* The parts key.part-NNNNNN in order, and their total size. */
static int list_parts(const s3_t *s, const char *key, s3_list_t *parts, int64_t *total,
                      s3_res_t *r) {
  char *pre = NULL;
  if (asprintf(&pre, "%s.part-", key) < 0) return -ENOMEM;
  int rc = s3_list(s, pre, parts, r);
  free(pre);
  if (rc) return rc;
  if (parts->n) qsort(parts->v, parts->n, sizeof(*parts->v), part_order);
  *total = 0;
  for (size_t i = 0; i < parts->n; i++) *total += parts->v[i].size;
  return parts->n ? 0 : -ENOENT;
}

int s3_read_joined(const s3_t *s, const char *key, int64_t off, int64_t len, int outfd,
                   int64_t *total, s3_res_t *r) {
  int rc = s3_get_fd(s, key, off, len, outfd, r);
  if (!rc) {
    *total = r->length;
    return 0;
  }
  if (rc != -ENOENT) return rc;
  s3_list_t parts = {0};
  rc = list_parts(s, key, &parts, total, r);
  int64_t at = 0, end = len < 0 ? *total : off + len;
  for (size_t i = 0; !rc && i < parts.n && at < end; i++) {
    int64_t ps = parts.v[i].size, from = off > at ? off - at : 0;
    if (at + ps > off && ps > 0) {
      int64_t want = (end < at + ps ? end : at + ps) - (at + from);
      rc = s3_get_fd(s, parts.v[i].key, from, want, outfd, r);
    }
    at += ps;
  }
  s3_list_release(&parts);
  return rc;
}

int s3_delete_joined(const s3_t *s, const char *key, s3_res_t *r) {
  s3_list_t parts = {0};
  int64_t total;
  int rc = s3_delete(s, key, r);
  int lr = rc ? rc : list_parts(s, key, &parts, &total, r);
  if (!rc && lr && lr != -ENOENT) rc = lr;
  for (size_t i = 0; !rc && i < parts.n; i++) rc = s3_delete(s, parts.v[i].key, r);
  s3_list_release(&parts);
  return rc;
}
