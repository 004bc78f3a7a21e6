/* The HTTP server's private side, shared by its files: server.c (a
 * request's life and its replies), body.c (parameters and bodies),
 * router.c (routes and hooks), credentials.c (the Authorization header),
 * listen.c (sockets, TLS, the loop), conn.c (header deadlines), stream.c
 * (streamed replies), watch.c (clients leaving), gzip.c (compression),
 * client.c (the client's address). Loop thread only; ownership as in
 * http.h.
 */
#ifndef SPIDERD_HTTP_SERVER_INT_H
#define SPIDERD_HTTP_SERVER_INT_H

#include <microhttpd.h>
#include <stdbool.h>
#include <stdint.h>

#include "http/http.h"
#include "http/trust.h"

#define MAX_BOUNDARY 200      /* RFC 2046 says 70; be lenient */
#define TAIL_SLACK 64         /* trailing whitespace tolerated after "--b--" */
#define MAX_PARAMS 10000      /* fields in one request */
/* Past max_body a streamed body is read and dropped so the client still gets
 * its 413; beyond this much more, it is cut off instead. */
#define DISCARD_MAX (64ULL << 20)

/* ---- data structures ---- */

typedef struct arena_block {
  struct arena_block *next;
  size_t cap, used;
  char data[];
} arena_block;

typedef struct reply_header {
  const char *name, *value;
} reply_header;

struct listener;

/* A reply of unknown length that the application writes to over time
 * (Server-Sent Events). MHD pulls from buf through stream_read; when buf is
 * empty the connection is suspended and a write resumes it. Freed by MHD's
 * free callback once the response is gone. */
struct http_stream {
  http_req_t *req; /* NULL once the connection is done */
  char *buf;
  size_t off, len, cap;
  bool ended, failed, waiting;
  bool talks;                 /* the client sent bytes: its socket is not watched */
  struct stream_watch *watch; /* the socket, watched while the stream waits */
  void (*on_gone)(void *ud);
  void (*more)(void *ud);     /* a pulled stream's producer (http_reply_pull) */
  bool asked;                 /* more() was called and has not queued yet */
  void *ud;
};

struct http_req {
  http_server_t *srv;          /* NULL once detached from a stopped server */
  struct listener *lsn;
  struct MHD_Connection *conn; /* NULL once MHD is done with the connection */
  struct http_req *next, *prev; /* pool or suspended list */

  const char *method, *path;    /* copies in the arena: outlive the connection */
  bool is_head, keepalive10;
  bool dispatched, in_handler, replied, suspended, dropped, failed;
  bool too_big, unauthorized, discard, multipart, urlencoded;
  bool raw;                     /* keep the body as it came (JSON, an egg) */
  bool new_part;                /* the next post data starts a new field */
  unsigned match;               /* bytes of "\r\n--boundary" (or "&") seen */
  const char *body_error;       /* static text: why the request is rejected (400) */
  bool nul_in_path;             /* the request line's path has a %00 (on_uri) */
  uint64_t body_len;

  struct MHD_PostProcessor *pp;
  size_t cur;                   /* param being filled by body chunks */
  bool cur_big;                 /* its value lives in bigs[], not the arena */
  size_t cur_cap;
  char **bigs;
  size_t nbigs, bigcap;
  char *ubuf;                   /* a url-encoded body, parsed when complete,
                                   or a raw one */
  size_t ulen, ucap, ubig;      /* ubig: its index in bigs[] */

  http_param_t *params;
  size_t nparams, pcap;
  reply_header *hdrs;
  size_t nhdrs, hcap;

  arena_block *arena;           /* current block first; the last is kept */

  http_stream_t *stream;        /* a streamed reply in progress */
  struct MHD_Response *pending; /* deferred reply waiting for the resume */
  void *who;                    /* what the authenticator attached (http_req_set_auth) */
  const char *addr;             /* the client's address, in the arena (http_req_addr) */
  bool auth_later;              /* HTTP_AUTH_LATER: ask again once the body is in */
  int refused;                  /* HTTP_AUTH_DENY or HTTP_AUTH_THROTTLE when unauthorized */
  const struct route *rt;       /* the route found at the headers, or NULL */
  const char *route_label;      /* http_req_set_route's copy, in the arena */
  uint64_t t0;                  /* uv_hrtime at the headers (http_set_observer) */
  struct http_watch *watches;   /* http_req_watch_close: called if the client leaves */
  struct close_poll *cpoll;     /* the socket watch they share */
  unsigned pending_status;
  uint64_t pending_bytes;

  char boundary[MAX_BOUNDARY + 1];
  size_t blen;
  char tail[MAX_BOUNDARY + 4 + TAIL_SLACK];
  size_t tail_len;
};

typedef struct route {
  char *path;
  http_handler_fn fn;
  void *ud;
  bool prefix;    /* a prefix route: its label is path + "/" */
  bool is_public; /* answered without authentication (http_route_public) */
} route;

struct listener {
  http_server_t *srv;
  struct MHD_Daemon *mhd;
  uv_poll_t poll;
  uv_timer_t timer;
  bool in_run, kick, handles_open;
  char name[128]; /* "127.0.0.1:6800" or the socket path, for messages */
  char *tls_cert, *tls_key; /* PEM texts, for MHD's lifetime (HTTPS only) */
  char start_log[256];      /* MHD's last complaint while starting */
  uv_timer_t sweep;         /* header deadlines (conn.c) */
  struct http_conn *conns;  /* open connections (conn.c) */
  unsigned nconns, conn_max; /* their number, and MHD's limit */
};

struct http_server {
  uv_loop_t *loop;
  struct listener *lsn[2];
  int nlsn;
  int open_handles;
  bool closing;

  route *exact; /* open addressing, power-of-two capacity */
  size_t exact_cap, exact_n;
  route *prefix;
  size_t nprefix;
  http_handler_fn fallback;
  void *fallback_ud;
  http_access_fn access;
  void *access_ud;
  http_observe_fn observe;
  void *observe_ud;
  http_auth_fn auth_fn;
  http_auth_later_fn auth_later;
  http_auth_deny_fn auth_deny;
  void *auth_ud;

  char *www_auth;
  long long max_body;
  int timeout_s;            /* idle and header deadline */
  unsigned max_conns;       /* per listener */
  char *unix_path;
  http_trust_t trust;       /* trusted proxies (http_options.trusted_proxies) */

  http_req_t *pool;
  size_t npool;
  http_req_t *suspended;
};

/* ---- a request (server.c) ---- */
/* n bytes (a NUL-terminated copy of s's n bytes) in r's arena, which lives
 * until the request is reset; NULL without memory. */
char *http_arena_alloc(http_req_t *r, size_t n);
char *http_arena_strndup(http_req_t *r, const char *s, size_t n);
/* libmicrohttpd's callbacks for every listener (cls: the listener). */
void *http_on_uri(void *cls, const char *uri, struct MHD_Connection *c);
enum MHD_Result http_on_access(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload,
                               size_t *upload_size, void **con_cls);
void http_on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                       enum MHD_RequestTerminationCode toe);
/* ---- its parameters and body (body.c) ---- */
/* Collects the query string's parameters. 0 or -ENOMEM (r->failed). */
int http_query_args(http_req_t *r);
/* Chooses how the body is read from its Content-Type (ct may be NULL). */
enum MHD_Result http_body_begin(http_req_t *r, const char *ct);
/* One chunk of the body, as libmicrohttpd hands it over. */
enum MHD_Result http_body_feed(http_req_t *r, const char *data, size_t n);
/* The body is all in: parses a url-encoded one, checks a form's end. */
void http_body_finish(http_req_t *r);
/* Over a limit: frees what the body took and reads the rest unkept. */
void http_body_shed(http_req_t *r);
/* ---- who sends it (credentials.c) ---- */
/* The authenticator's verdict on r (HTTP_AUTH_*), from its Authorization
 * header; only when the server has an authenticator. */
int http_authenticate(http_req_t *r);
/* ---- routes (router.c) ---- */
/* The route for path (exact, else the longest prefix), or NULL. */
route *http_route_find(http_server_t *s, const char *path);
/* Calls r's route, or the fallback. */
void http_route_request(http_req_t *r);
/* Frees the route tables. */
void http_routes_release(http_server_t *s);
/* The client's address at its headers (client.c): the peer, or behind a
 * trusted proxy the client it forwards for; in the arena, NULL without memory. */
const char *http_client_of(http_req_t *r);
/* Frees a request that is not in the pool (a detached one). */
void http_req_free(http_req_t *r);
/* The server's list of suspended connections (a stop resumes them all). */
void http_suspended_link(http_req_t *r);
void http_suspended_unlink(http_req_t *r);
/* Content-Type and the handler's headers on a response. 0 or -EINVAL. */
int http_add_headers(http_req_t *r, struct MHD_Response *resp, const char *ct);
/* Makes the next loop iteration run MHD for a resumed connection (listen.c). */
void http_kick(struct listener *l);
/* Takes resp: queues it now inside the handler, else resumes the
 * connection to send it. */
void http_deliver(http_req_t *r, struct MHD_Response *resp, unsigned status, uint64_t bytes);
/* Ends every close watch of r: fired (the client is gone) or silently
 * (a reply is under way). watch.c. */
void http_watches_end(http_req_t *r, bool fire);
/* Header deadlines (conn.c): the sweep timer, MHD's connection notifier,
 * a request's headers complete, a request done (the next one's wait begins),
 * and what is left once MHD has stopped. */
int http_conn_init(struct listener *l);
void http_conn_notify(void *cls, struct MHD_Connection *c, void **socket_context,
                      enum MHD_ConnectionNotificationCode code);
void http_conn_headers_done(struct MHD_Connection *c);
void http_conn_request_done(struct listener *l, struct MHD_Connection *c);
void http_conn_free_all(struct listener *l);
/* ---- responses (gzip.c): the one place they are made ----
 * A reply of a text type the daemon renders (JSON, HTML, text; never an
 * event stream), of at least 1 KiB or of unknown length, to a client whose
 * Accept-Encoding takes gzip, is sent gzip'd with Content-Encoding: gzip;
 * every such reply, compressed or not, says Vary: Accept-Encoding. Not
 * compressed: statuses 1xx, 204, 206 and 304, and a reply whose handler set
 * Content-Encoding, Content-Range or Content-Length. */
enum { HTTP_GZ_NO, HTTP_GZ_VARY, HTTP_GZ_YES };
/* Decides for r's coming reply and adds the headers that go with the
 * decision to r (Vary, Content-Encoding; an ETag becomes weak when
 * compressed). len: the identity length, or MHD_SIZE_UNKNOWN. */
int http_gzip_plan(http_req_t *r, int status, const char *ct, uint64_t len);
/* A response with a copy of body, compressed when http_gzip_plan says so.
 * NULL when out of memory. */
struct MHD_Response *http_response_from_buffer(http_req_t *r, int status, const char *ct,
                                               const void *body, size_t len);
/* MHD_create_response_from_callback (unknown size) with the reader's bytes
 * deflated on the fly when http_gzip_plan says so. A reader may suspend its
 * connection and return 0 (stream.c): nothing is returned with it, and
 * what zlib holds goes out with the next bytes or the end. On failure NULL,
 * and crfc has not run (as MHD's). */
struct MHD_Response *http_response_from_callback(http_req_t *r, int status, const char *ct,
                                                 size_t block, MHD_ContentReaderCallback crc,
                                                 void *cls, MHD_ContentReaderFreeCallback crfc);
/* The reply could not be made: the connection is closed. */
void http_reply_failed(http_req_t *r);

#endif
