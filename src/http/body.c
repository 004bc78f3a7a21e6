/* A request's parameters and body: the query string, url-encoded and
 * multipart/form-data forms (cut at field boundaries for libmicrohttpd's
 * post processor), a raw body kept whole (JSON, an egg), the body limits
 * (max_body, MAX_PARAMS) and the body-level 400s (a bad boundary, a
 * truncated form). Loop thread only; what a body takes lives in the
 * request's arena or in its bigs[], freed when the request is reset.
 */
#include <errno.h>
#include <microhttpd.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/server_int.h"

#define SMALL_VALUE 512       /* longer body values get their own buffer */
#define POST_BUFFER 16384     /* MHD post processor parse buffer */

/* ---- params ---- */

static http_param_t *param_add(http_req_t *r, const char *key, size_t klen, const char *filename,
                               int from_body) {
  if (r->nparams == r->pcap) {
    size_t cap = r->pcap ? r->pcap * 2 : 16;
    http_param_t *p = realloc(r->params, cap * sizeof(*p));
    if (!p) return NULL;
    r->params = p;
    r->pcap = cap;
  }
  const char *k = http_arena_strndup(r, key ? key : "", key ? klen : 0);
  const char *f = filename ? http_arena_strndup(r, filename, strlen(filename)) : NULL;
  if (!k || (filename && !f)) return NULL;
  http_param_t *p = &r->params[r->nparams++];
  p->key = k;
  p->value = "";
  p->len = 0;
  p->filename = f;
  p->from_body = from_body;
  return p;
}

static enum MHD_Result on_query_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                    size_t klen, const char *value, size_t vlen) {
  http_req_t *r = cls;
  http_param_t *p = param_add(r, key, klen, NULL, 0);
  if (!p) goto oom;
  if (value) {
    char *v = http_arena_strndup(r, value, vlen);
    if (!v) goto oom;
    p->value = v;
    p->len = vlen;
  }
  return MHD_YES;
oom:
  r->failed = true;
  return MHD_NO;
}

int http_query_args(http_req_t *r) {
  MHD_get_connection_values_n(r->conn, MHD_GET_ARGUMENT_KIND, on_query_arg, r);
  return r->failed ? -ENOMEM : 0;
}

static int bigs_push(http_req_t *r, char *buf) {
  if (r->nbigs == r->bigcap) {
    size_t cap = r->bigcap ? r->bigcap * 2 : 4;
    char **b = realloc(r->bigs, cap * sizeof(*b));
    if (!b) return -ENOMEM;
    r->bigs = b;
    r->bigcap = cap;
  }
  r->bigs[r->nbigs++] = buf;
  return 0;
}

/* Appends a body chunk to the value of the current param. Small values grow
 * in place at the end of the arena; large ones move to their own buffer that
 * grows by an eighth, so memory stays close to the body size. */
static int value_append(http_req_t *r, const char *data, size_t n) {
  http_param_t *p = &r->params[r->cur];
  char *v = (char *)p->value;
  size_t need = p->len + n;
  if (r->cur_big) {
    if (need + 1 > r->cur_cap) {
      size_t cap = need + need / 8 + 1;
      char *nv = realloc(v, cap);
      if (!nv) return -ENOMEM;
      r->bigs[r->nbigs - 1] = nv;
      r->cur_cap = cap;
      v = nv;
    }
  } else {
    arena_block *b = r->arena;
    bool at_end = p->len > 0 && v + p->len + 1 == b->data + b->used;
    if (at_end && b->cap - b->used >= n) {
      b->used += n;
    } else if (need < SMALL_VALUE) {
      char *nv = http_arena_alloc(r, need + 1);
      if (!nv) return -ENOMEM;
      if (p->len) memcpy(nv, v, p->len);
      v = nv;
    } else {
      size_t cap = need + need / 8 + 1;
      char *nv = malloc(cap);
      if (!nv) return -ENOMEM;
      if (p->len) memcpy(nv, v, p->len);
      if (bigs_push(r, nv)) {
        free(nv);
        return -ENOMEM;
      }
      r->cur_big = true;
      r->cur_cap = cap;
      v = nv;
    }
  }
  memcpy(v + p->len, data, n);
  v[need] = '\0';
  p->value = v;
  p->len = need;
  return 0;
}

static enum MHD_Result on_post_data(void *cls, enum MHD_ValueKind kind, const char *key,
                                    const char *filename, const char *content_type,
                                    const char *transfer_encoding, const char *data,
                                    uint64_t off, size_t size) {
  http_req_t *r = cls;
  /* off == 0 alone cannot tell a new field from a field whose first call
   * had no data yet (MHD calls with 0 bytes when input stops right after a
   * part's headers); the separators seen in the stream can. A nested part
   * (multipart/mixed) has no outer separator but starts at 0 after data. */
  if (r->new_part || r->cur == SIZE_MAX || (off == 0 && r->params[r->cur].len > 0)) {
    r->new_part = false;
    if (r->nparams >= MAX_PARAMS) { /* 40 bytes each: cap what tiny fields cost */
      r->too_big = true;
      return MHD_NO;
    }
    http_param_t *p = param_add(r, key, key ? strlen(key) : 0, filename, 1);
    if (!p) goto oom;
    r->cur = r->nparams - 1;
    r->cur_big = false;
  }
  if (size && value_append(r, data, size)) goto oom;
  return MHD_YES;
oom:
  r->failed = true;
  return MHD_NO;
}

/* ---- url-encoded bodies ----
 * MHD 0.9.75's url-encoded parser refuses values holding '=' ("x=a=b") and
 * drops some keys; Twisted uses Python's parse_qs, which splits each '&'
 * piece at its first '=', keeps blank values, skips empty pieces and decodes
 * '+' and %XX (an invalid escape stays as it is). The body is kept whole
 * (bounded by max_body) and parsed once it has arrived. */

static int ubuf_append(http_req_t *r, const char *data, size_t n) {
  if (r->ulen + n + 1 > r->ucap) {
    size_t cap = r->ulen + n + 1 + (r->ulen + n) / 8 + 64;
    char *nb = realloc(r->ubuf, cap);
    if (!nb) return -ENOMEM;
    if (r->ubuf) {
      r->bigs[r->ubig] = nb;
    } else if (bigs_push(r, nb)) {
      free(nb);
      return -ENOMEM;
    } else {
      r->ubig = r->nbigs - 1;
    }
    r->ubuf = nb;
    r->ucap = cap;
  }
  memcpy(r->ubuf + r->ulen, data, n);
  r->ulen += n;
  r->ubuf[r->ulen] = '\0';
  return 0;
}

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* unquote_plus in place over [s, s+n); returns the decoded length. */
static size_t unquote_plus(char *s, size_t n) {
  size_t w = 0;
  for (size_t i = 0; i < n; i++) {
    int hi, lo;
    if (s[i] == '+') {
      s[w++] = ' ';
    } else if (s[i] == '%' && i + 2 < n && (hi = hexval(s[i + 1])) >= 0 &&
               (lo = hexval(s[i + 2])) >= 0) {
      s[w++] = (char)(hi * 16 + lo);
      i += 2;
    } else {
      s[w++] = s[i];
    }
  }
  return w;
}

static int urlencoded_parse(http_req_t *r) {
  char *p = r->ubuf, *end = r->ubuf + r->ulen;
  while (p && p < end) {
    char *amp = memchr(p, '&', (size_t)(end - p));
    char *stop = amp ? amp : end;
    if (stop > p) {
      if (r->nparams >= MAX_PARAMS) {
        r->too_big = true;
        return -E2BIG;
      }
      char *eq = memchr(p, '=', (size_t)(stop - p));
      size_t klen = unquote_plus(p, (size_t)((eq ? eq : stop) - p));
      char *v = eq ? eq + 1 : stop;
      size_t vlen = eq ? unquote_plus(v, (size_t)(stop - v)) : 0;
      http_param_t *prm = param_add(r, p, klen, NULL, 1);
      char *val = prm ? http_arena_strndup(r, v, vlen) : NULL;
      if (!val) return -ENOMEM;
      prm->value = val;
      prm->len = vlen;
    }
    p = amp ? amp + 1 : NULL;
  }
  return 0;
}

/* ---- multipart sanity ---- */

/* MHD's multipart parser skips a preamble without a boundary, so a body
 * that is all garbage would look like an empty form; remember the boundary
 * to check that the body ended with the closing delimiter. */
static int parse_boundary(http_req_t *r, const char *ct) {
  const char *p = ct;
  while ((p = strcasestr(p, "boundary=")) != NULL) {
    if (p == ct || p[-1] == ';' || p[-1] == ' ' || p[-1] == '\t') break;
    p += 9;
  }
  if (!p) return -EINVAL;
  p += 9;
  const char *end;
  if (*p == '"') {
    end = strchr(++p, '"');
    if (!end) return -EINVAL;
  } else {
    end = p + strcspn(p, "; \t");
  }
  size_t n = (size_t)(end - p);
  if (n == 0 || n > MAX_BOUNDARY || memchr(p, '\r', n) || memchr(p, '\n', n)) return -EINVAL;
  memcpy(r->boundary, p, n);
  r->boundary[n] = '\0';
  r->blen = n;
  return 0;
}

static void tail_feed(http_req_t *r, const char *data, size_t n) {
  size_t cap = r->blen + 4 + TAIL_SLACK;
  if (n >= cap) {
    memcpy(r->tail, data + n - cap, cap);
    r->tail_len = cap;
    return;
  }
  if (r->tail_len + n > cap) {
    size_t drop = r->tail_len + n - cap;
    memmove(r->tail, r->tail + drop, r->tail_len - drop);
    r->tail_len -= drop;
  }
  memcpy(r->tail + r->tail_len, data, n);
  r->tail_len += n;
}

static bool tail_closes(const http_req_t *r) {
  size_t n = r->tail_len;
  while (n && (r->tail[n - 1] == '\r' || r->tail[n - 1] == '\n' || r->tail[n - 1] == ' ' ||
               r->tail[n - 1] == '\t'))
    n--;
  size_t want = r->blen + 4;
  if (n < want) return false;
  const char *t = r->tail + n - want;
  return t[0] == '-' && t[1] == '-' && memcmp(t + 2, r->boundary, r->blen) == 0 &&
         t[want - 2] == '-' && t[want - 1] == '-';
}

/* ---- the body as it comes ---- */

enum MHD_Result http_body_begin(http_req_t *r, const char *ct) {
  if (!ct) {
    r->raw = true;
  } else if (strncasecmp(ct, "multipart/form-data", 19) == 0) {
    r->multipart = true;
    if (parse_boundary(r, ct)) {
      r->body_error = "multipart/form-data without a valid boundary parameter";
      r->discard = true;
    } else {
      r->pp = MHD_create_post_processor(r->conn, POST_BUFFER, on_post_data, r);
      if (!r->pp) return MHD_NO;
      r->match = 2; /* the first delimiter has no CRLF before it */
    }
  } else if (strncasecmp(ct, "application/x-www-form-urlencoded", 33) == 0) {
    r->urlencoded = true;
  } else {
    r->raw = true; /* JSON and others: Scrapyd's endpoints ignore them, the native API reads them */
  }
  return MHD_YES;
}

static void drop_body_parser(http_req_t *r) {
  if (r->pp) MHD_destroy_post_processor(r->pp);
  r->pp = NULL;
  r->discard = true;
}

/* Past the limit: free what the body already took, so memory stays bounded
 * by max_body, and read the rest without keeping it. */
void http_body_shed(http_req_t *r) {
  r->too_big = true;
  drop_body_parser(r);
  for (size_t i = 0; i < r->nbigs; i++) free(r->bigs[i]);
  r->nbigs = 0;
  r->nparams = 0;
  r->ubuf = NULL;
  r->ulen = r->ucap = 0;
}

/* Feeds MHD's parser, cut right after every field separator ("&", or the
 * "\r\n--boundary" delimiter, which MHD then fully handles), so that all
 * parser callbacks between two cuts belong to one field. */
static enum MHD_Result form_feed(http_req_t *r, const char *data, size_t n) {
  size_t start = 0;
  for (size_t i = 0; i < n; i++) {
    if (r->match == 0) {
      const char *cr = memchr(data + i, '\r', n - i);
      if (!cr) break;
      i = (size_t)(cr - data);
    }
    /* '\r' occurs only first in the pattern: no KMP table needed. */
    char want = r->match < 4 ? "\r\n--"[r->match] : r->boundary[r->match - 4];
    r->match = data[i] == want ? r->match + 1 : data[i] == '\r';
    if (r->match < r->blen + 4) continue;
    r->match = 0;
    if (MHD_post_process(r->pp, data + start, i + 1 - start) != MHD_YES) return MHD_NO;
    r->new_part = true;
    start = i + 1;
  }
  if (start < n) return MHD_post_process(r->pp, data + start, n - start);
  return MHD_YES;
}

enum MHD_Result http_body_feed(http_req_t *r, const char *data, size_t n) {
  http_server_t *s = r->srv;
  r->body_len += n;
  uint64_t limit = s->max_body >= 0 ? (uint64_t)s->max_body : UINT64_MAX;
  if (r->too_big) /* MHD 0.9.75 takes no response in mid-body */
    return r->body_len > limit && r->body_len - limit > DISCARD_MAX ? MHD_NO : MHD_YES;
  if (r->body_len > limit) {
    http_body_shed(r);
    return MHD_YES;
  }
  if (r->discard) return MHD_YES;
  if (r->urlencoded || r->raw) {
    if (ubuf_append(r, data, n)) {
      r->failed = true;
      return MHD_NO;
    }
    return MHD_YES;
  }
  tail_feed(r, data, n);
  if (form_feed(r, data, n) != MHD_YES) {
    if (r->failed) return MHD_NO;
    if (r->too_big) { /* too many fields */
      http_body_shed(r);
      return MHD_YES;
    }
    r->body_error = "malformed multipart/form-data body";
    drop_body_parser(r);
  }
  return MHD_YES;
}

void http_body_finish(http_req_t *r) {
  if (r->urlencoded && !r->discard && r->ubuf) {
    int rc = urlencoded_parse(r);
    if (rc == -E2BIG) http_body_shed(r);
    else if (rc) r->failed = true;
    return;
  }
  if (!r->pp) return;
  bool ok = MHD_destroy_post_processor(r->pp) == MHD_YES;
  r->pp = NULL;
  if (!ok || (r->body_len > 0 && !tail_closes(r)))
    r->body_error = "malformed multipart/form-data body: truncated, or no closing boundary";
}
