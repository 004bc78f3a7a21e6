/* The web console, the rendered docs and the API explorer (Swagger UI):
 * files built from ui/ by `make ui` into ui_dir (console/, docs/, api/),
 * served at /ui/, /docs/ and /api/ (the REST API's /api/v1 is routed
 * before /api: the longer prefix wins). The console is a single-page app:
 * a path of its own (/ui/jobs/12) that names no file gets its index.html,
 * and its router takes it from there. Hashed files under assets/ never
 * change, so browsers keep them for a year; everything else (index.html
 * above all) is revalidated on every load, cheaply, by its ETag. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "app.h"
#include "log.h"
#include "strbuf.h"

typedef struct mount {
  const char *url;  /* "/ui": the route, without its slash */
  const char *dir;  /* under ui_dir */
  const char *what; /* for the page that says it is not built */
  bool spa;         /* a path without a dot that names no file: index.html */
  bool html_ext;    /* /docs/NAME may be NAME.html */
  /* The <base href> its HTML is built with, which a reverse proxy's prefix
   * goes in front of. Its pages' other URLs are relative (to that base, or
   * to the page: the docs and the API explorer are one level down). */
  const char *base;
} mount_t;

static const mount_t mounts[] = {
    {"/ui", "console", "web console", true, false, "<base href=\"/ui/\">"},
    {"/docs", "docs", "documentation", false, true, NULL},
    {"/api", "api", "API explorer", false, false, NULL},
};
#define NMOUNTS (sizeof(mounts) / sizeof(mounts[0]))

static const char cache_immutable[] = "public, max-age=31536000, immutable";
static const char cache_revalidate[] = "no-cache";

static const mount_t *mount_of(const char *path) {
  for (size_t i = 0; i < NMOUNTS; i++) {
    size_t n = strlen(mounts[i].url);
    if (!strncmp(path, mounts[i].url, n) && (path[n] == '\0' || path[n] == '/')) return &mounts[i];
  }
  return NULL;
}

/* A build names files under assets/ by their content's hash. */
static bool under_assets(const char *rel) {
  for (const char *p = rel;;) {
    const char *slash = strchr(p, '/');
    if (!slash) return false;
    if (slash - p == 6 && !strncmp(p, "assets", 6)) return true;
    p = slash + 1;
  }
}

static bool last_has_dot(const char *rel) {
  const char *slash = strrchr(rel, '/');
  return strchr(slash ? slash + 1 : rel, '.') != NULL;
}

/* ---- pages ---- */

static void page(http_req_t *req, int status, const char *title, const char *html) {
  strbuf_t b = {0};
  strbuf_addf(&b,
              "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n    <meta charset=\"utf-8\">\n"
              "    <title>%s</title>\n</head>\n<body>\n    <h1>%s</h1>\n%s</body>\n</html>\n",
              title, title, html);
  http_reply_header(req, "X-Content-Type-Options", "nosniff");
  http_reply_header(req, "Cache-Control", cache_revalidate);
  if (b.failed) http_reply(req, 500, "text/plain", "out of memory\n", 14);
  else http_reply(req, status, "text/html; charset=utf-8", b.p, b.len);
  strbuf_release(&b);
}

static void not_built(const char *prefix, http_req_t *req, const mount_t *m) {
  char title[64];
  snprintf(title, sizeof(title), "The %s is not built", m->what);
  strbuf_t html = {0};
  strbuf_addf(&html,
              "    <p>spiderd serves it from the <code>%s/</code> directory of "
              "<code>ui_dir</code>, which has no <code>index.html</code>.</p>\n"
              "    <p>Build it in spiderd's source tree with <code>make ui</code>, or set "
              "<code>ui_dir</code> in the <code>[spiderd]</code> section of scrapyd.conf to the "
              "directory that holds the built files.</p>\n"
              "    <p>Meanwhile: <a href=\"%s/\">Scrapyd's pages</a>, and the REST API's OpenAPI "
              "document at <a href=\"%s/api/v1/openapi.json\">/api/v1/openapi.json</a>.</p>\n",
              m->dir, prefix, prefix);
  if (html.failed) http_reply(req, 500, "text/plain", "out of memory\n", 14);
  else page(req, 404, title, html.p);
  strbuf_release(&html);
}

static void refuse(http_req_t *req, int status) {
  if (status == 400)
    page(req, 400, "Bad Request", "    <p>That path cannot name a file here.</p>\n");
  else if (status == 403)
    page(req, 403, "Forbidden", "    <p>That path leads out of the served files.</p>\n");
  else
    page(req, 404, "Not Found", "    <p>No such file.</p>\n");
}

/* ---- serving ---- */

/* One request's lookup: the tree, and its HTML's <base> as built and as
 * sent (with the proxy's prefix), or NULLs. */
typedef struct lookup {
  http_req_t *req;
  const char *root;
  const char *base_from, *base_to;
  const char *vary; /* the prefix header, for the HTML written per prefix */
} lookup_t;

static bool is_html(const char *rel) {
  size_t n = strlen(rel);
  return n >= 5 && !strcmp(rel + n - 5, ".html");
}

static int try_file(lookup_t *lk, const char *rel) {
  if (lk->vary && is_html(rel)) {
    /* a shared cache must not give one prefix's page to another */
    http_reply_header(lk->req, "Vary", lk->vary);
    lk->vary = NULL;
  }
  http_asset_opts_t o = {
      .cache_control = under_assets(rel) ? cache_immutable : cache_revalidate,
      .gzip = 1,
      .html_from = lk->base_from,
      .html_to = lk->base_to,
  };
  return http_serve_asset(lk->req, lk->root, rel, &o);
}

static int try_suffixed(lookup_t *lk, const char *rel, const char *suffix) {
  char *name = NULL;
  if (asprintf(&name, "%s%s", rel, suffix) < 0) return -ENOMEM;
  int rc = try_file(lk, name);
  free(name);
  return rc;
}

static bool has_index(const char *root) {
  char *path = NULL;
  struct stat st;
  bool ok = asprintf(&path, "%s/index.html", root) >= 0 && stat(path, &st) == 0 &&
            S_ISREG(st.st_mode);
  free(path);
  return ok;
}

static void serve(app_t *app, http_req_t *req, const mount_t *m, const char *rel) {
  char *root = NULL, *base = NULL;
  /* the header comes from whoever connects: a value that is not a plain
   * path is no prefix (http_path_prefix) */
  char prefix[256];
  http_path_prefix(http_req_header(req, app->cfg.prefix_header), prefix, sizeof(prefix));
  if (asprintf(&root, "%s/%s", app->cfg.ui_dir, m->dir) < 0 ||
      (m->base && *prefix && asprintf(&base, "<base href=\"%s%s/\">", prefix, m->url) < 0)) {
    free(root);
    http_reply(req, 500, "text/plain", "out of memory\n", 14);
    return;
  }
  lookup_t lk = {req, root, base ? m->base : NULL, base, m->base ? app->cfg.prefix_header : NULL};
  size_t len = strlen(rel);
  bool dir = len == 0 || rel[len - 1] == '/';
  int rc = http_asset_path_ok(rel);
  if (rc == 0) rc = dir ? try_suffixed(&lk, rel, "index.html") : try_file(&lk, rel);
  if ((rc == -ENOENT || rc == -EISDIR) && m->html_ext && !dir)
    rc = try_suffixed(&lk, rel, ".html");
  if ((rc == -ENOENT || rc == -EISDIR) && m->spa && !last_has_dot(rel))
    rc = try_file(&lk, "index.html");
  switch (rc) {
  case 0: break;
  case -EINVAL: refuse(req, 400); break;
  case -EXDEV:
  case -ELOOP:
  case -EACCES: refuse(req, 403); break;
  case -ENOMEM: http_reply(req, 500, "text/plain", "out of memory\n", 14); break;
  default:
    if (has_index(root)) refuse(req, 404);
    else not_built(prefix, req, m);
  }
  free(root);
  free(base);
}

static void on_request(http_req_t *req, void *ud) {
  app_t *app = ud;
  const char *path = http_req_path(req);
  const mount_t *m = mount_of(path);
  if (!m) { /* the routes are the mounts: cannot happen */
    refuse(req, 404);
    return;
  }
  const char *method = http_req_method(req);
  if (strcmp(method, "GET") && !http_req_is_head(req)) {
    http_reply_header(req, "Allow", "HEAD, GET");
    page(req, 405, "Method Not Allowed", "    <p>Only GET and HEAD are served here.</p>\n");
    return;
  }
  const char *rest = path + strlen(m->url);
  if (!*rest) {
    /* relative, so that it holds behind a reverse proxy's prefix too */
    char loc[16];
    snprintf(loc, sizeof(loc), "%s/", m->url + 1);
    http_reply_header(req, "Location", loc);
    page(req, 301, "Moved Permanently", "    <p>This page is one level down.</p>\n");
    return;
  }
  rest++;
  /* the REST API's own prefix takes /api/v1 first; never a file, whatever
   * the routes become */
  if (!strcmp(m->url, "/api") && !strncmp(rest, "v1", 2) && (rest[2] == '\0' || rest[2] == '/')) {
    refuse(req, 404);
    return;
  }
  serve(app, req, m, rest);
}

int api_console_register(app_t *app) {
  if (!app->cfg.ui_dir[0]) return 0;
  for (size_t i = 0; i < NMOUNTS; i++) {
    int rc = http_route_prefix(app->http, mounts[i].url, on_request, app);
    if (rc) return rc;
  }
  char *root = NULL;
  if (asprintf(&root, "%s/console", app->cfg.ui_dir) >= 0 && !has_index(root))
    log_info("ui", "%s has no index.html: /ui/ says the web console is not built (make ui)",
             root);
  free(root);
  return 0;
}
