/* Content-Encoding: gzip for the answers the daemon builds itself (JSON,
 * Scrapyd's HTML pages), decided once where a response is made (server.c,
 * stream.c) so that no handler thinks about it.
 *
 * A small answer is deflated at once and keeps its Content-Length; a large
 * one, or one written over time (a content reader), is deflated block by
 * block as libmicrohttpd pulls it for the socket, so that a 20 MB listing
 * never holds the loop for the whole of its compression, nor doubles its
 * memory. Files (http_reply_fd) are never compressed here: their ranges and
 * lengths are the file's, and the web console's come precompressed
 * (asset.c). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>

#include "http/server_int.h"
#include "log.h"

/* Below this a gzip header and trailer (18 bytes) and a round trip through
 * zlib buy little: a TCP segment carries it either way. */
#define GZ_MIN 1024
/* Up to this size an answer is deflated in one go and keeps its
 * Content-Length (about 1 ms at level 6); larger ones are deflated as they
 * are sent (chunked). */
#define GZ_ONESHOT_MAX (256 * 1024)
/* zlib's level: on the daemon's own answers level 6 deflates 130-440 MB/s
 * (the OpenAPI document; a listing of jobs), ~2.5x level 1's time, for
 * 10-30% fewer bytes; level 9 is 3-4x slower again for 2-5% (bench/
 * gzip_bench.py, docs/operations.md). */
#define GZ_LEVEL 6
#define GZ_BLOCK (32 * 1024) /* compressed bytes per read of a streamed answer */
#define GZ_IN (16 * 1024)    /* identity bytes asked of a content reader at a time */

/* ---- negotiation ---- */

/* RFC 9110 §12.5.3: an explicit gzip (or x-gzip) decides by its q;
 * otherwise "*" does; identity needs no saying. */
int http_accepts_gzip(const char *h) {
  int gzip = -1, star = -1; /* -1: not named; 0: refused (q=0); 1: accepted */
  for (const char *p = h; p && *p;) {
    p += strspn(p, " \t,");
    size_t len = strcspn(p, ",");
    size_t name = strcspn(p, " \t;,");
    if (name > len) name = len;
    int ok = 1;
    const char *q = memchr(p, ';', len);
    while (q && q < p + len) {
      q++;
      q += strspn(q, " \t");
      if ((*q == 'q' || *q == 'Q') && q[1] == '=') {
        /* q=0, q=0.0, q=0.000 refuse; anything else is some preference */
        const char *v = q + 2;
        ok = 0;
        for (; v < p + len && *v != ';' && *v != ' ' && *v != '\t'; v++)
          if (*v >= '1' && *v <= '9') ok = 1;
      }
      q = memchr(q, ';', (size_t)(p + len - q));
    }
    if ((name == 4 && !strncasecmp(p, "gzip", 4)) || (name == 6 && !strncasecmp(p, "x-gzip", 6)))
      gzip = gzip == 1 ? 1 : ok;
    else if (name == 1 && *p == '*')
      star = ok;
    p += len;
  }
  return gzip >= 0 ? gzip == 1 : star == 1;
}

/* Text the daemon renders; never an event stream (each event must reach
 * the client when written), never a format that is compressed already. */
static bool compressible(const char *ct) {
  if (!ct) return false;
  size_t n = strcspn(ct, "; \t");
  if (n == 17 && !strncasecmp(ct, "text/event-stream", n)) return false;
  if (n > 5 && !strncasecmp(ct, "text/", 5)) return true;
  static const char *const types[] = {"application/json", "application/javascript",
                                      "application/xml", "image/svg+xml"};
  for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
    if (strlen(types[i]) == n && !strncasecmp(ct, types[i], n)) return true;
  return n > 5 && (!strncasecmp(ct + n - 5, "+json", 5) || !strncasecmp(ct + n - 4, "+xml", 4));
}

static const reply_header *find_header(const http_req_t *r, const char *name) {
  for (size_t i = 0; i < r->nhdrs; i++)
    if (!strcasecmp(r->hdrs[i].name, name)) return &r->hdrs[i];
  return NULL;
}

static bool vary_names_ae(const http_req_t *r) {
  for (size_t i = 0; i < r->nhdrs; i++)
    if (!strcasecmp(r->hdrs[i].name, "Vary") &&
        (strcasestr(r->hdrs[i].value, "accept-encoding") || strchr(r->hdrs[i].value, '*')))
      return true;
  return false;
}

int http_gzip_plan(http_req_t *r, int status, const char *ct, uint64_t len) {
  if (!compressible(ct) || status < 200 || status == 204 || status == 206 || status == 304)
    return HTTP_GZ_NO;
  /* the handler's own encoding, range or length stands */
  if (find_header(r, "Content-Encoding") || find_header(r, "Content-Range") ||
      find_header(r, "Content-Length"))
    return HTTP_GZ_NO;
  if (len < GZ_MIN) return HTTP_GZ_NO; /* never compressed: it varies with nothing */
  int plan = http_accepts_gzip(http_req_header(r, "Accept-Encoding")) ? HTTP_GZ_YES : HTTP_GZ_VARY;
  /* a shared cache must keep the two encodings apart */
  if (!vary_names_ae(r) && http_reply_header(r, "Vary", "Accept-Encoding")) return HTTP_GZ_NO;
  if (plan == HTTP_GZ_YES) {
    /* the gzip bytes are not the identity bytes: a strong validator would
     * claim they are (RFC 9110 §8.8.1); a weak one still matches
     * If-None-Match, which compares weakly */
    for (size_t i = 0; i < r->nhdrs; i++) {
      reply_header *h = &r->hdrs[i];
      if (strcasecmp(h->name, "ETag") || !strncmp(h->value, "W/", 2)) continue;
      size_t n = strlen(h->value);
      char *weak = http_req_alloc(r, n + 3);
      if (!weak) return HTTP_GZ_NO;
      memcpy(weak, "W/", 2);
      memcpy(weak + 2, h->value, n + 1);
      h->value = weak;
    }
    if (http_reply_header(r, "Content-Encoding", "gzip")) return HTTP_GZ_NO;
  }
  return plan;
}

static int gz_init(z_stream *z) {
  memset(z, 0, sizeof(*z));
  /* 15 + 16: a gzip wrapper (RFC 1952) around the deflate stream */
  return deflateInit2(z, GZ_LEVEL, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK ? 0
                                                                                     : -ENOMEM;
}

/* ---- small answers: in one go ---- */

static struct MHD_Response *gz_oneshot(const void *body, size_t len) {
  z_stream z;
  if (gz_init(&z)) return NULL;
  uLong cap = deflateBound(&z, (uLong)len);
  unsigned char *out = malloc(cap);
  struct MHD_Response *resp = NULL;
  if (!out) goto out;
  z.next_in = (Bytef *)body;
  z.avail_in = (uInt)len;
  z.next_out = out;
  z.avail_out = (uInt)cap;
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) goto out;
  resp = MHD_create_response_from_buffer(cap - z.avail_out, out, MHD_RESPMEM_MUST_FREE);
  if (resp) out = NULL;
out:
  deflateEnd(&z);
  free(out);
  return resp;
}

/* ---- large answers and content readers: as they are sent ---- */

typedef struct gz_stream {
  z_stream z;
  /* the identity bytes: a content reader's, or a copy of a whole body */
  MHD_ContentReaderCallback crc;
  void *cls;
  MHD_ContentReaderFreeCallback crfc;
  uint64_t pos;    /* identity bytes read so far (the reader's pos) */
  Bytef *in;       /* the reader's last block, or the whole body */
  bool in_end;     /* no more input: finish the stream */
  bool done;       /* the gzip trailer is out */
} gz_stream;

/* Fills out with at least one byte, or says why not: the source waits (0:
 * a stream.c reader has then suspended the connection, so nothing may be
 * returned with it), the end, or an error. The source is asked again only
 * while nothing has been produced, for that reason. */
static ssize_t gz_read(void *cls, uint64_t pos, char *out, size_t max) {
  gz_stream *g = cls;
  if (g->done) return MHD_CONTENT_READER_END_OF_STREAM;
  if (max > GZ_BLOCK) max = GZ_BLOCK;
  g->z.next_out = (Bytef *)out;
  g->z.avail_out = (uInt)max;
  while (g->z.avail_out == max) {
    if (g->z.avail_in == 0 && !g->in_end) {
      ssize_t n = g->crc(g->cls, g->pos, (char *)g->in, GZ_IN);
      if (n == MHD_CONTENT_READER_END_WITH_ERROR) return n;
      if (n == 0) return 0;
      if (n == MHD_CONTENT_READER_END_OF_STREAM) {
        g->in_end = true;
      } else {
        g->z.next_in = g->in;
        g->z.avail_in = (uInt)n;
        g->pos += (uint64_t)n;
      }
    }
    int rc = deflate(&g->z, g->in_end ? Z_FINISH : Z_NO_FLUSH);
    if (rc == Z_STREAM_END) {
      g->done = true;
      break;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) return MHD_CONTENT_READER_END_WITH_ERROR;
  }
  size_t n = max - g->z.avail_out;
  return n ? (ssize_t)n : MHD_CONTENT_READER_END_OF_STREAM;
}

static void gz_free(void *cls) {
  gz_stream *g = cls;
  if (g->crfc) g->crfc(g->cls);
  deflateEnd(&g->z);
  free(g->in);
  free(g);
}

/* A stream with an input buffer of in_size bytes; NULL when out of memory. */
static gz_stream *gz_stream_new(size_t in_size) {
  gz_stream *g = calloc(1, sizeof(*g));
  if (g && gz_init(&g->z)) {
    free(g);
    return NULL;
  }
  if (g && !(g->in = malloc(in_size))) {
    gz_free(g);
    return NULL;
  }
  return g;
}

static struct MHD_Response *gz_streamed(gz_stream *g) {
  struct MHD_Response *resp =
      MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, GZ_BLOCK, gz_read, g, gz_free);
  if (!resp) {
    g->crfc = NULL; /* the caller still owns the source */
    gz_free(g);
  }
  return resp;
}

/* ---- the responses ---- */

struct MHD_Response *http_response_from_buffer(http_req_t *r, int status, const char *ct,
                                               const void *body, size_t len) {
  if (!body) body = "";
  /* zlib counts input in uInt */
  if (len > UINT32_MAX / 2 || http_gzip_plan(r, status, ct, len) != HTTP_GZ_YES)
    return MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
  /* libmicrohttpd 0.9.75 ends a HEAD's chunked answer with a last chunk
   * (a body a HEAD must not have): a HEAD is deflated at once, and its
   * Content-Length is what the GET sends */
  if (len <= GZ_ONESHOT_MAX || r->is_head) return gz_oneshot(body, len);
  gz_stream *g = gz_stream_new(len);
  if (!g) return NULL;
  memcpy(g->in, body, len);
  g->z.next_in = g->in;
  g->z.avail_in = (uInt)len;
  g->in_end = true;
  return gz_streamed(g);
}

struct MHD_Response *http_response_from_callback(http_req_t *r, int status, const char *ct,
                                                 size_t block, MHD_ContentReaderCallback crc,
                                                 void *cls, MHD_ContentReaderFreeCallback crfc) {
  if (http_gzip_plan(r, status, ct, MHD_SIZE_UNKNOWN) != HTTP_GZ_YES)
    return MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, block, crc, cls, crfc);
  gz_stream *g = gz_stream_new(GZ_IN);
  if (!g) return NULL;
  g->crc = crc;
  g->cls = cls;
  g->crfc = crfc;
  return gz_streamed(g);
}
