/* HTTP server glue on libmicrohttpd, driven by the libuv loop.
 *
 * libmicrohttpd runs in external-epoll mode: its epoll fd is watched by a
 * uv_poll and its timeouts by a uv_timer, so every callback here runs on the
 * loop thread. One MHD daemon per listener (TCP and/or a Unix socket; both can
 * listen at once).
 *
 * A handler is called once per request, after the whole body has arrived and
 * been parsed into parameters (query string + url-encoded or multipart form).
 * It replies with http_reply*() at once or later from any loop callback: the
 * connection stays suspended until then. Each request gets exactly one reply.
 *
 * Ownership: request memory (params, headers, path) lives until the reply has
 * been queued; handlers copy what they keep. Reply bodies are copied.
 */
#ifndef SPIDERD_HTTP_H
#define SPIDERD_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <uv.h>

typedef struct http_server http_server_t;
typedef struct http_req http_req_t;
typedef void (*http_handler_fn)(http_req_t *req, void *ud);

typedef struct http_options {
  const char *bind_address;     /* TCP address ("127.0.0.1", "0.0.0.0", "::") */
  int port;                     /* 0 = no TCP listener */
  const char *unix_socket_path; /* NULL or "" = none; created with mode 0660 */
  const char *realm;            /* "Scrapyd": the default 401's WWW-Authenticate */
  long long max_body;           /* larger bodies get 413 (Content-Length checked
                                   before reading; streamed bodies as they come) */
  int timeout;                  /* seconds: a connection idle this long, or one
                                   whose request headers have not all arrived this
                                   long after it opened or its previous response
                                   was sent, is closed; 0 = 300 */
  int max_connections;          /* per listener, at most the descriptors the
                                   process may open less a reserve; 0 = 4096 */
  /* HTTPS on the TCP listener when both are set (PEM files, read at start);
   * the Unix socket stays plain HTTP. */
  const char *https_cert;       /* certificate, then its chain */
  const char *https_key;        /* private key, possibly encrypted */
  const char *https_key_password; /* its passphrase, or NULL/"" */
  const char *https_priorities; /* GnuTLS priority string; NULL: TLS >= 1.2 */
  /* Reverse proxies whose X-Forwarded-For names the client (http/trust.h):
   * addresses and CIDR blocks, comma or space separated; NULL or "": none,
   * and the header is ignored. */
  const char *trusted_proxies;
} http_options_t;

typedef struct http_param {
  const char *key;
  const char *value;    /* NUL-terminated; may also hold NUL bytes: use len */
  size_t len;
  const char *filename; /* filename of a multipart file part, else NULL */
  int from_body;        /* 1 = form body, 0 = query string */
} http_param_t;

/* Binds the listeners and starts serving on loop. Returns 0 or a negative
 * code with a reason in err (e.g. "127.0.0.1:6800: Address already in use"). */
int http_server_start(uv_loop_t *loop, const http_options_t *o,
                      http_server_t **out, char *err, size_t errlen);

/* Stops accepting, ends connections, closes the uv handles; the server is
 * freed once they are closed (the loop must run). Requests still waiting for
 * a reply are dropped. */
void http_server_stop(http_server_t *s);

/* Exact, case-sensitive path route ("/daemonstatus.json"). */
int http_route(http_server_t *s, const char *path, http_handler_fn fn, void *ud);
/* Prefix route: "/logs/" matches "/logs" and everything under "/logs/". */
int http_route_prefix(http_server_t *s, const char *prefix, http_handler_fn fn, void *ud);
/* Unmatched paths go here; default: Twisted's 404 "No Such Resource" page. */
void http_set_fallback(http_server_t *s, http_handler_fn fn, void *ud);
/* ---- who sends a request ----
 * Without an authenticator every route is served to anyone. With one, it
 * alone decides for every route that is not public: the server decodes
 * the Authorization header into credentials and asks it, on the loop, at
 * the request's headers (before the body is read): */
enum http_cred_scheme {
  HTTP_CRED_NONE = 0, /* no Authorization header */
  HTTP_CRED_BASIC,    /* user and secret (the password) */
  HTTP_CRED_BEARER,   /* secret (the token) */
  HTTP_CRED_BAD,      /* a header that is neither, or malformed */
};
typedef struct http_credentials {
  int scheme;
  const char *user;   /* BASIC: the user name */
  const char *secret; /* BASIC: the password; BEARER: the token */
} http_credentials_t;
enum http_auth_verdict {
  HTTP_AUTH_DENY = 0, /* 401: the body is not read */
  HTTP_AUTH_ALLOW,    /* served */
  HTTP_AUTH_LATER,    /* the verdict needs work off the loop (a password
                       * hash): the body is read, then later(ud, r) runs and
                       * ends, now or later, with http_req_auth_done() */
  HTTP_AUTH_THROTTLE, /* 429: too many failed attempts; the body is not read */
};
typedef int (*http_auth_fn)(void *ud, http_req_t *r, const http_credentials_t *cred);
typedef void (*http_auth_later_fn)(void *ud, http_req_t *r);
/* Renders a refusal (DENY or THROTTLE) in place of the default 401/429;
 * NULL keeps the defaults. It must reply. */
typedef void (*http_auth_deny_fn)(void *ud, http_req_t *r, int verdict);
void http_set_auth(http_server_t *s, http_auth_fn check, http_auth_later_fn later,
                   http_auth_deny_fn deny, void *ud);
/* Ends an HTTP_AUTH_LATER: ALLOW routes the request, DENY or THROTTLE
 * refuses it. Exactly once per LATER. */
void http_req_auth_done(http_req_t *r, int verdict);
/* What the authenticator attached to the request (NULL: nothing, e.g. a
 * public route). The pointer is the authenticator's; memory from
 * http_req_alloc() lives as long as the request. */
void http_req_set_auth(http_req_t *r, void *who);
void *http_req_auth(const http_req_t *r);
/* The WWW-Authenticate header of a refusal ("basic realm=..."). */
const char *http_server_www_auth(const http_server_t *s);
/* The client's address: "203.0.113.7", "2001:db8::1", or "unix" (a Unix
 * socket); "?" when unknown. Behind a trusted proxy, the client it forwards
 * for (http_options.trusted_proxies). Lives as long as the request. */
const char *http_req_addr(const http_req_t *r);
/* Zeroed memory that lives as long as the request (NULL when out of memory). */
void *http_req_alloc(http_req_t *r, size_t n);
/* Called after each reply: method, path, status, bytes (access log). */
typedef void (*http_access_fn)(void *ud, const char *method, const char *path,
                               int status, uint64_t bytes);
void http_set_access_log(http_server_t *s, http_access_fn fn, void *ud);
/* Called after each reply, as the access log, with the request's route
 * label instead of its path, and the seconds from its headers to the reply
 * being queued (metrics). The label is the matched exact route's path, a
 * prefix route's prefix with a trailing "/" ("/logs/"), what the handler
 * set with http_req_set_route, or "other" when no route matched. */
typedef void (*http_observe_fn)(void *ud, const char *method, const char *route, int status,
                                double seconds);
void http_set_observer(http_server_t *s, http_observe_fn fn, void *ud);
/* Marks the exact route path (already registered) as answered without
 * authentication (health probes, metrics). -ENOENT when there is no such route. */
int http_route_public(http_server_t *s, const char *path);

/* ---- the request ---- */
const char *http_req_method(const http_req_t *r);   /* "GET", "POST", ... */
const char *http_req_path(const http_req_t *r);     /* percent-decoded path */
const char *http_req_header(const http_req_t *r, const char *name); /* any case */
/* Every parameter in order: query string first, then the body. */
const http_param_t *http_req_params(const http_req_t *r, size_t *n);
/* First value of key; a key present in the body hides the query string's
 * (as Twisted's request.args). NULL when absent. */
const http_param_t *http_req_param(const http_req_t *r, const char *key);
/* The body as it came when it was not a form (url-encoded or multipart):
 * JSON, an egg, ...; at most max_body bytes, NUL-terminated after len.
 * NULL with *len = 0 when there was none. */
const void *http_req_body(const http_req_t *r, size_t *len);
/* Is this HEAD? (Handlers answer as for GET; no body is sent.) */
int http_req_is_head(const http_req_t *r);
/* Names the route pattern that answers (e.g. "/api/v1/jobs/{id}") for
 * http_set_observer, where a prefix route dispatches further; copied. */
void http_req_set_route(http_req_t *r, const char *pattern);

/* A waiting request (its reply deferred) is not watched by libmicrohttpd:
 * a client that gives up is only noticed when the reply is written. This
 * watches the connection instead: fn(ud) runs once when the client closes
 * it (the handler must still reply; the reply is dropped). A watch ends when
 * it fires, when http_watch_cancel() ends it, or silently when the request
 * is replied to (do not cancel it after replying). NULL when the request
 * cannot be watched (it then waits as before). A client that sends more
 * bytes (a pipelined request) is no longer watched. */
typedef struct http_watch http_watch_t;
http_watch_t *http_req_watch_close(http_req_t *r, void (*fn)(void *ud), void *ud);
void http_watch_cancel(http_watch_t *w);

/* ---- the reply ---- */
/* A streamed reply of unknown length (chunked), e.g. Server-Sent Events.
 * on_gone(ud) runs exactly once, when the response is gone: the client
 * left, the server stopped, the stream ended and was sent, or it could not
 * start (then before this returns NULL; a 500 is sent when possible). The
 * stream must not be used after on_gone. A stream waiting for data never
 * times out: send a keep-alive now and then. */
typedef struct http_stream http_stream_t;
http_stream_t *http_reply_stream(http_req_t *r, int status, const char *content_type,
                                 void (*on_gone)(void *ud), void *ud);
/* A pulled stream: the same, and more(ud) runs on the loop each time all
 * that was queued has been sent (first when the reply starts to be sent):
 * it queues the next chunk (at least one byte) or ends the stream, now or
 * later from any loop callback; meanwhile the connection waits suspended
 * and more() is not called again. So a listing of any length holds one
 * chunk at a time. Its writes are not bounded by the 1 MiB below. */
http_stream_t *http_reply_pull(http_req_t *r, int status, const char *content_type,
                               void (*more)(void *ud), void (*on_gone)(void *ud), void *ud);
/* Queues bytes (copied). -EPIPE once ended, -ENOBUFS when the client lags
 * more than 1 MiB behind (it is then disconnected), -ENOMEM. */
int http_stream_write(http_stream_t *st, const void *data, size_t len);
/* Ends the reply once everything queued has been sent. */
void http_stream_end(http_stream_t *st);
/* Ends the reply at once, cut short (the connection is closed): a
 * producer that cannot go on. on_gone still runs. */
void http_stream_fail(http_stream_t *st);

/* Adds a header to the coming reply. */
int http_reply_header(http_req_t *r, const char *name, const char *value);
/* Replies with a copy of body; content_type may be NULL (none). */
void http_reply(http_req_t *r, int status, const char *content_type,
                const void *body, size_t len);
/* calloc(1, size) for a handler's own state (the caller frees it); when
 * memory runs out, replies 500 and returns NULL, so the handler just returns. */
void *http_req_calloc(http_req_t *r, size_t size);
/* Replies by streaming an open fd from offset for len bytes (takes the fd). */
void http_reply_fd(http_req_t *r, int status, const char *content_type, int fd,
                   uint64_t offset, uint64_t len);

/* Serves root_dir/rel_path like Twisted's static.File: a file (content type
 * by extension, default text/plain; Last-Modified; Accept-Ranges; Range ->
 * 206 or 416), a directory without trailing slash -> 302 to url_path + "/",
 * a directory -> Twisted's "Directory listing for <url_path>" page, a missing
 * file or a path escaping root_dir -> 404 "File not found.". url_path is the
 * request's path as shown in the listing (e.g. "/logs/p/s/"). */
void http_serve_tree(http_req_t *r, const char *root_dir, const char *rel_path,
                     const char *url_path);

/* ---- the files of a built web application (asset.c) ---- */

typedef struct http_asset_opts {
  const char *cache_control; /* the Cache-Control header, or NULL for none */
  int gzip;                  /* send NAME.gz in place of NAME when it exists and
                                the client accepts gzip (Vary: Accept-Encoding
                                on every answer) */
  /* An HTML file is sent with the first html_from in it replaced by html_to
   * (a <base href> that carries a reverse proxy's prefix): read whole (at
   * most 1 MiB, else -EFBIG), never its gzip sibling, with an ETag that
   * names html_to too. Both NULL, or equal: the file as it is. */
  const char *html_from, *html_to;
} http_asset_opts_t;

/* Serves the regular file rel (a percent-decoded path) under root_dir:
 * Content-Type by extension (http_asset_type), X-Content-Type-Options:
 * nosniff, a strong ETag from the inode, size and mtime (ns) of the file
 * sent (the gzip sibling's with a "-gz" suffix), 304 without a body when
 * If-None-Match names it, else 200 streamed from the file (HEAD: headers
 * only). The lookup never leaves root_dir: ".." segments, backslashes and
 * control characters are refused, and so is a symlink that resolves outside
 * root_dir (every symlink, where the kernel lacks openat2).
 * Returns 0 once it has replied, or a negative code without replying, so
 * that the caller chooses the answer: -EINVAL (a refused path), -EXDEV or
 * -ELOOP (it leads out of the tree), -ENOENT (no such regular file, or no
 * root_dir), -EISDIR (a directory), -EACCES, -ENOMEM. */
int http_serve_asset(http_req_t *r, const char *root_dir, const char *rel,
                     const http_asset_opts_t *o);
/* The Content-Type for a file name: text types with charset=utf-8, and
 * application/octet-stream when the extension is unknown. Static string. */
const char *http_asset_type(const char *name);
/* 0 when rel may name a file under a served tree, -EINVAL when a segment is
 * "..", or it holds a backslash or a control character. */
int http_asset_path_ok(const char *rel);

/* Does an Accept-Encoding value let gzip through (RFC 9110 §12.5.3: q=0
 * refuses, "*" counts when gzip is not named)? 1 or 0; NULL: 0. */
int http_accepts_gzip(const char *accept_encoding);

/* The path prefix a reverse proxy says it serves the daemon under (the
 * value of X-Forwarded-Prefix or the like), fit to go before an absolute
 * path in a URL and in HTML: "/a/b" from "/a/b" or "/a/b/", "" from NULL,
 * "" or "/". Anything but a plain absolute path is refused (-EINVAL, and
 * out is ""): it must start with a single '/', hold only letters, digits,
 * "-._~!$+,;=:@/" and %XX escapes, no "." or ".." segment and no "//",
 * and fit in outlen. A refused prefix is best treated as none. */
int http_path_prefix(const char *value, char *out, size_t outlen);

/* HTML-escapes s (& < > " ') into a malloc'd string. */
char *http_html_escape(const char *s);

#endif
