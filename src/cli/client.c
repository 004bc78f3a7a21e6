/* HTTP + JSON over libcurl for the client sub-commands (client.h). */
#include "net/curl_lazy.h"
#include "cli/client.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "strbuf.h"

/* Longer than any API call takes; a hung daemon must not hang scripts. */
#define CALL_TIMEOUT_MS 60000L
#define CONNECT_TIMEOUT_MS 10000L
/* An API body is at most a page of 1000 objects or 1 MiB of log text as
 * JSON; more means something is wrong on the other end. */
#define MAX_BODY (64L * 1024 * 1024)

/* A response being read: its body, and whether it grew past MAX_BODY. */
typedef struct resp {
  strbuf_t body;
  int too_big;
} resp_t;

/* RFC 3986 unreserved characters stay; everything else is %XX. */
static int buf_escape(strbuf_t *b, const char *s) {
  static const char hex[] = "0123456789ABCDEF";
  int rc = 0;
  for (; *s && !rc; s++) {
    unsigned char ch = (unsigned char)*s;
    if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') ||
        ch == '-' || ch == '_' || ch == '.' || ch == '~') {
      rc = strbuf_add(b, (const char *)&ch, 1);
    } else {
      char e[3] = {'%', hex[ch >> 4], hex[ch & 15]};
      rc = strbuf_add(b, e, 3);
    }
  }
  return rc;
}

char *client_url(const char *base, const char *const *segs, size_t nsegs,
                 const char *const *query) {
  strbuf_t b = {0};
  size_t n = strlen(base);
  int rc = strbuf_add(&b, base, n);
  if (!rc && (n == 0 || base[n - 1] != '/')) rc = strbuf_adds(&b, "/");
  if (!rc) rc = strbuf_adds(&b, "api/v1");
  for (size_t i = 0; i < nsegs && !rc; i++) {
    rc = strbuf_adds(&b, "/");
    if (!rc) rc = buf_escape(&b, segs[i]);
  }
  char sep = '?';
  for (size_t i = 0; query && query[i] && !rc; i += 2) {
    if (!query[i + 1]) continue;
    rc = strbuf_add(&b, &sep, 1);
    if (!rc) rc = buf_escape(&b, query[i]);
    if (!rc) rc = strbuf_adds(&b, "=");
    if (!rc) rc = buf_escape(&b, query[i + 1]);
    sep = '&';
  }
  if (rc || !b.p) {
    strbuf_release(&b);
    return NULL;
  }
  return b.p;
}

char *client_target_url(const char *bind, int port) {
  char *out = NULL;
  const char *host = bind && *bind ? bind : "127.0.0.1";
  /* A daemon bound to every address is reached on loopback. */
  if (!strcmp(host, "0.0.0.0")) host = "127.0.0.1";
  else if (!strcmp(host, "::") || !strcmp(host, "[::]")) host = "::1";
  int v6 = strchr(host, ':') && host[0] != '[';
  if (asprintf(&out, "http://%s%s%s:%d/", v6 ? "[" : "", host, v6 ? "]" : "", port) < 0)
    return NULL;
  return out;
}

int client_init(client_t *c, const char *base, const char *userpwd, const char *token,
                const char *unix_socket, char *err, size_t errlen) {
  memset(c, 0, sizeof(*c));
  if (strncmp(base, "http://", 7) && strncmp(base, "https://", 8)) {
    snprintf(err, errlen, "'%s' is not an http:// or https:// URL", base);
    return -EINVAL;
  }
  if (userpwd && token) {
    snprintf(err, errlen, "a username and password, or a token: not both");
    return -EINVAL;
  }
  c->base = strdup(base);
  c->userpwd = userpwd ? strdup(userpwd) : NULL;
  c->token = token ? strdup(token) : NULL;
  c->unix_socket = unix_socket ? strdup(unix_socket) : NULL;
  c->curl = curl_easy_init();
  if (!c->base || (userpwd && !c->userpwd) || (token && !c->token) ||
      (unix_socket && !c->unix_socket) || !c->curl) {
    client_release(c);
    snprintf(err, errlen, "out of memory");
    return -ENOMEM;
  }
  return 0;
}

void client_release(client_t *c) {
  if (c->curl) curl_easy_cleanup(c->curl);
  free(c->base);
  free(c->userpwd);
  free(c->token);
  free(c->unix_socket);
  free(c->cainfo);
  memset(c, 0, sizeof(*c));
}

static size_t on_data(char *p, size_t size, size_t nmemb, void *ud) {
  resp_t *r = ud;
  size_t n = size * nmemb;
  if (r->body.len + n > (size_t)MAX_BODY) {
    r->too_big = 1;
    return 0;
  }
  return strbuf_add(&r->body, p, n) ? 0 : n;
}

/* What a person should read for a failed call. */
static void api_error(const client_t *c, const strbuf_t *body, char *err, size_t errlen) {
  if (c->status == 401) {
    snprintf(err, errlen,
             c->userpwd  ? "401 Unauthorized: the daemon refused the username and password"
             : c->token ? "401 Unauthorized: the daemon refused the token (unknown, revoked "
                          "or expired)"
                        : "401 Unauthorized: the daemon needs credentials (--token TOKEN or "
                          "SPIDERD_TOKEN, or --user USER:PASS or SPIDERD_USER)");
    return;
  }
  json_t *j = body->p ? json_loadb(body->p, body->len, 0, NULL) : NULL;
  const char *msg = NULL;
  json_unpack(j, "{s:{s:s}}", "error", "message", &msg);
  if (msg)
    snprintf(err, errlen, "%s", msg);
  else
    snprintf(err, errlen, "HTTP %ld: %.200s", c->status, body->p ? body->p : "(no body)");
  json_decref(j);
}

int client_call(client_t *c, const char *method, const char *const *segs, size_t nsegs,
                const char *const *query, json_t *body, json_t **out, char *err, size_t errlen) {
  CURL *h = c->curl;
  struct curl_slist *hdrs = NULL;
  char *url = client_url(c->base, segs, nsegs, query);
  char *data = body ? json_dumps(body, JSON_COMPACT) : NULL;
  resp_t resp = {0};
  char cerr[CURL_ERROR_SIZE] = "";
  int rc = -1;
  *out = NULL;
  c->status = 0;
  if (!url || (body && !data)) {
    snprintf(err, errlen, "out of memory");
    goto out;
  }
  curl_easy_reset(h);
  curl_easy_setopt(h, CURLOPT_URL, url);
  curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, CALL_TIMEOUT_MS);
  curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
  curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &resp);
  curl_easy_setopt(h, CURLOPT_USERAGENT, "spiderd-cli/" SPIDERD_VERSION);
  /* A proxy from the environment would be wrong for a local daemon, and
   * the user can always point --url at one. */
  curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
  /* libcurl has its own CA bundle path: honour the variables the curl tool
   * and OpenSSL programs read, so a private CA can be given. */
  const char *ca = c->cainfo ? c->cainfo : getenv("CURL_CA_BUNDLE");
  if (!ca || !*ca) ca = getenv("SSL_CERT_FILE");
  if (ca && *ca) curl_easy_setopt(h, CURLOPT_CAINFO, ca);
  if (c->unix_socket) curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, c->unix_socket);
  if (c->userpwd) {
    curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BASIC);
    curl_easy_setopt(h, CURLOPT_USERPWD, c->userpwd);
  } else if (c->token) {
    /* The only method asked for is sent with the first request, as basic
     * is: no 401 round trip. */
    curl_easy_setopt(h, CURLOPT_HTTPAUTH, (long)CURLAUTH_BEARER);
    curl_easy_setopt(h, CURLOPT_XOAUTH2_BEARER, c->token);
  }
  if (!strcmp(method, "HEAD")) curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
  hdrs = curl_slist_append(hdrs, "Accept: application/json");
  if (data) {
    struct curl_slist *h2 = hdrs ? curl_slist_append(hdrs, "Content-Type: application/json") : NULL;
    if (h2) hdrs = h2;
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, data);
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(data));
  } else if (strcmp(method, "GET") && strcmp(method, "HEAD")) {
    /* libmicrohttpd waits for a body that never comes without a length. */
    curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
    curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
  }
  curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
  CURLcode cc = curl_easy_perform(h);
  curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &c->status);
  if (cc != CURLE_OK) {
    if (resp.too_big)
      snprintf(err, errlen, "%s: the response is larger than %ld bytes", url, MAX_BODY);
    else
      snprintf(err, errlen, "cannot reach spiderd at %s: %s", c->base,
               cerr[0] ? cerr : curl_easy_strerror(cc));
    goto out;
  }
  if (c->status < 200 || c->status > 299) {
    api_error(c, &resp.body, err, errlen);
    goto out;
  }
  if (resp.body.len) {
    json_error_t je;
    /* Log text may hold NUL bytes the daemon escaped as \u0000. */
    *out = json_loadb(resp.body.p, resp.body.len, JSON_ALLOW_NUL, &je);
    if (!*out) {
      snprintf(err, errlen, "%s: the response is not JSON: %s", url, je.text);
      goto out;
    }
  }
  rc = 0;
out:
  curl_slist_free_all(hdrs);
  strbuf_release(&resp.body);
  free(data);
  free(url);
  return rc;
}
