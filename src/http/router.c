/* Which handler answers a path: exact routes in an open-addressing table,
 * prefix routes by longest match, the fallback (Twisted's 404 page by
 * default); and the hooks a server is given after its start: the
 * authenticator, the access log, the observer. Loop thread only; the
 * server owns its route paths (http_routes_release frees them).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/server_int.h"

static const char not_found_page[] =
    "\n<html>\n  <head><title>404 - No Such Resource</title></head>\n  <body>\n"
    "    <h1>No Such Resource</h1>\n    <p>Sorry. No luck finding that resource.</p>\n"
    "  </body>\n</html>\n";

static void default_404(http_req_t *r, void *ud) {
  http_reply(r, 404, "text/html; charset=utf-8", not_found_page, sizeof(not_found_page) - 1);
}

static uint64_t hash_str(const char *s) {
  uint64_t h = 1469598103934665603ULL;
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

static route *exact_find(const http_server_t *s, const char *path) {
  if (!s->exact_cap) return NULL;
  size_t mask = s->exact_cap - 1;
  for (size_t i = hash_str(path) & mask;; i = (i + 1) & mask) {
    route *rt = &s->exact[i];
    if (!rt->path) return NULL;
    if (strcmp(rt->path, path) == 0) return rt;
  }
}

static int exact_insert(route *tab, size_t cap, route rt) {
  size_t mask = cap - 1;
  for (size_t i = hash_str(rt.path) & mask;; i = (i + 1) & mask) {
    if (!tab[i].path) {
      tab[i] = rt;
      return 0;
    }
  }
}

int http_route(http_server_t *s, const char *path, http_handler_fn fn, void *ud) {
  route *old = exact_find(s, path);
  if (old) {
    old->fn = fn;
    old->ud = ud;
    return 0;
  }
  if ((s->exact_n + 1) * 2 > s->exact_cap) {
    size_t cap = s->exact_cap ? s->exact_cap * 2 : 64;
    route *tab = calloc(cap, sizeof(*tab));
    if (!tab) return -ENOMEM;
    for (size_t i = 0; i < s->exact_cap; i++)
      if (s->exact[i].path) exact_insert(tab, cap, s->exact[i]);
    free(s->exact);
    s->exact = tab;
    s->exact_cap = cap;
  }
  char *copy = strdup(path);
  if (!copy) return -ENOMEM;
  exact_insert(s->exact, s->exact_cap, (route){copy, fn, ud, false, false});
  s->exact_n++;
  return 0;
}

int http_route_prefix(http_server_t *s, const char *prefix, http_handler_fn fn, void *ud) {
  size_t n = strlen(prefix);
  while (n && prefix[n - 1] == '/') n--; /* "/logs/" also matches "/logs" */
  char *copy = strndup(prefix, n);
  if (!copy) return -ENOMEM;
  route *tab = realloc(s->prefix, (s->nprefix + 1) * sizeof(*tab));
  if (!tab) {
    free(copy);
    return -ENOMEM;
  }
  s->prefix = tab;
  tab[s->nprefix++] = (route){copy, fn, ud, true, false};
  return 0;
}

void http_set_fallback(http_server_t *s, http_handler_fn fn, void *ud) {
  s->fallback = fn ? fn : default_404;
  s->fallback_ud = fn ? ud : NULL;
}

void http_set_auth(http_server_t *s, http_auth_fn check, http_auth_later_fn later,
                   http_auth_deny_fn deny, void *ud) {
  s->auth_fn = check;
  s->auth_later = later;
  s->auth_deny = deny;
  s->auth_ud = ud;
}

const char *http_server_www_auth(const http_server_t *s) { return s->www_auth; }

void http_set_access_log(http_server_t *s, http_access_fn fn, void *ud) {
  s->access = fn;
  s->access_ud = ud;
}

void http_set_observer(http_server_t *s, http_observe_fn fn, void *ud) {
  s->observe = fn;
  s->observe_ud = ud;
}

int http_route_public(http_server_t *s, const char *path) {
  route *rt = exact_find(s, path);
  if (!rt) return -ENOENT;
  rt->is_public = true;
  return 0;
}

void http_req_set_route(http_req_t *r, const char *pattern) {
  r->route_label = pattern ? http_arena_strndup(r, pattern, strlen(pattern)) : NULL;
}

route *http_route_find(http_server_t *s, const char *path) {
  route *rt = exact_find(s, path);
  if (!rt) {
    size_t best = 0;
    for (size_t i = 0; i < s->nprefix; i++) {
      size_t n = strlen(s->prefix[i].path);
      if (strncmp(path, s->prefix[i].path, n) == 0 && (path[n] == '\0' || path[n] == '/') &&
          (!rt || n > best)) {
        rt = &s->prefix[i];
        best = n;
      }
    }
  }
  return rt;
}

void http_route_request(http_req_t *r) {
  http_server_t *s = r->srv;
  route *rt = http_route_find(s, r->path);
  r->rt = rt;
  if (rt) rt->fn(r, rt->ud);
  else s->fallback(r, s->fallback_ud);
}

void http_routes_release(http_server_t *s) {
  for (size_t i = 0; i < s->exact_cap; i++) free(s->exact[i].path);
  for (size_t i = 0; i < s->nprefix; i++) free(s->prefix[i].path);
  free(s->exact);
  free(s->prefix);
  s->exact = s->prefix = NULL;
  s->exact_cap = s->exact_n = s->nprefix = 0;
}
