/* Scrapyd's web pages: the home page, /jobs, and the /logs/ and /items/
 * trees. ScrapydWeb scrapes /jobs and the directory listings with regular
 * expressions (scrapyd-api.md §7.3), so the row layout is kept exactly: one
 * <td> per line, no attributes on job rows' <tr> and <td>. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "api/auth.h"
#include "api/listing.h"
#include "api/proxy.h"
#include "api/render.h"
#include "app.h"
#include "error.h"
#include "store/eggs.h"
#include "strbuf.h"

/* The prefix a reverse proxy asks links to carry (prefix_header); a value
 * that is not a plain path (it comes from whoever connects) is none. */
static char *link_prefix(app_t *app, http_req_t *req) {
  char p[256];
  http_path_prefix(http_req_header(req, app->cfg.prefix_header), p, sizeof(p));
  return http_html_escape(p);
}

static void reply_html(http_req_t *req, strbuf_t *b) {
  if (b->failed) http_reply(req, 500, "text/plain", "out of memory\n", 14);
  else http_reply(req, 200, "text/html; charset=utf-8", b->p, b->len);
  strbuf_release(b);
}

static int get_only(http_req_t *req) {
  const char *m = http_req_method(req);
  if (!strcmp(m, "GET") || http_req_is_head(req)) return 1;
  static const char body[] =
      "\n<html>\n  <head><title>405 - Method Not Allowed</title></head>\n  <body>\n"
      "    <h1>Method Not Allowed</h1>\n    <p>Your browser approached me (at the page) with "
      "the method \"\" that I do not support.</p>\n  </body>\n</html>\n";
  http_reply_header(req, "Allow", "HEAD, GET");
  http_reply(req, 405, "text/html; charset=utf-8", body, sizeof(body) - 1);
  return 0;
}

/* 403 for a caller limited to projects: the pages that show them all. */
static int limited(app_t *app, http_req_t *req) {
  const auth_who_t *w = auth_who(app, req);
  if (!w->projects[0]) return 0;
  char msg[256];
  int n = snprintf(msg, sizeof(msg), "%s is limited to projects %.150s: this page shows all.\n",
                   w->actor, w->projects);
  http_reply(req, 403, "text/plain; charset=utf-8", msg, (size_t)n);
  return 1;
}

/* ---- / ---- */

static void on_home(http_req_t *req, void *ud) {
  app_t *app = ud;
  if (!get_only(req)) return;
  char *prefix = link_prefix(app, req);
  const char *pf = prefix ? prefix : "";
  int items_local = app->cfg.items_dir[0] && !config_items_remote(&app->cfg);
  strbuf_t b = {0};
  strbuf_addf(&b,
          "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n    <meta charset=\"utf-8\">\n"
          "    <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "    <title>Scrapyd</title>\n    <style>\n        body { font-family: sans-serif; }\n"
          "    </style>\n</head>\n<body>\n    <h1>Scrapyd</h1>\n\n    <ul>\n"
          "        <li><a href=\"%s/jobs\">Jobs</a></li>\n        ",
          pf);
  if (items_local) strbuf_addf(&b, "<li><a href=\"%s/items/\">Items</a></li>", pf);
  strbuf_addf(&b,
          "\n        <li><a href=\"%s/logs/\">Logs</a></li>\n",
          pf);
  if (app->cfg.ui_dir[0])
    strbuf_addf(&b, "        <li><a href=\"%s/ui/\">Console</a></li>\n", pf);
  strbuf_addf(&b,
          "        <li><a href=\"https://scrapyd.readthedocs.io/en/latest/\">Documentation</a></li>\n"
          "    </ul>\n\n");
  char **v = NULL;
  size_t n = 0;
  eggs_projects(app->cfg.eggs_dir, &v, &n);
  size_t total = n + app->cfg.nsettings;
  char **all = total ? calloc(total, sizeof(*all)) : NULL;
  size_t k = 0;
  const char *mine = auth_who(app, req)->projects;
  for (size_t i = 0; all && i < n; i++)
    if (principal_project_ok(mine, v[i])) all[k++] = v[i];
  for (size_t i = 0; all && i < app->cfg.nsettings; i++) {
    int dup = !principal_project_ok(mine, app->cfg.settings[i].name);
    for (size_t j = 0; j < n; j++) dup |= !strcmp(v[j], app->cfg.settings[i].name);
    if (!dup) all[k++] = app->cfg.settings[i].name;
  }
  for (size_t i = 1; i < k; i++) /* sorted, as Scrapyd's page */
    for (size_t j = i; j > 0 && strcmp(all[j - 1], all[j]) > 0; j--) {
      char *t = all[j - 1];
      all[j - 1] = all[j];
      all[j] = t;
    }
  if (k) {
    strbuf_addf(&b, "    <p>Scrapy projects:</p>\n    <ul>\n");
    for (size_t i = 0; i < k; i++) {
      char *e = http_html_escape(all[i]);
      strbuf_addf(&b, "        <li>%s</li>\n", e ? e : "");
      free(e);
    }
    strbuf_addf(&b, "    </ul>\n");
  } else {
    strbuf_addf(&b, "    <p>No Scrapy projects yet.</p>\n");
  }
  free(all);
  strv_free(v, n);
  strbuf_addf(&b,
          "\n    <p>\n        This web UI is for monitoring only. To upload projects and schedule "
          "crawls, use the API.\n        For example, using <a href=\"https://curl.se/\">curl</a>:\n"
          "    </p>\n\n    <p>\n        <code>curl http://localhost:6800/schedule.json -d "
          "project=default -d spider=somespider</code>\n    </p>\n\n    <p>\n        See the <a "
          "href=\"https://scrapyd.readthedocs.io/en/latest/\">Scrapyd documentation</a> for "
          "details.\n    </p>\n</body>\n</html>\n");
  free(prefix);
  reply_html(req, &b);
}

/* ---- /jobs ---- */

typedef struct jobs_page {
  app_t *app;
  char *prefix;
  int64_t now; /* running jobs' runtime is up to the request's time */
} jobs_page_t;

/* Row cells are indented as Scrapyd's page (24 + 4 spaces). */
#define ROW "                        "

static void cell(strbuf_t *b, const char *text) {
  char *e = text ? http_html_escape(text) : NULL;
  strbuf_addf(b, ROW "    <td>%s</td>\n", e ? e : "");
  free(e);
}

static void link_cell(strbuf_t *b, const char *prefix, char *url, const char *label) {
  if (url) strbuf_addf(b, ROW "    <td><a href=\"%s%s\">%s</a></td>\n", prefix, url, label);
  else strbuf_addf(b, ROW "    <td></td>\n");
  free(url);
}

static void cancel_cell(strbuf_t *b, jobs_page_t *pg, const job_t *j) {
  char *p = http_html_escape(j->project), *jb = http_html_escape(j->jobid);
  strbuf_addf(b,
          ROW "    <td>\n" ROW "    <form method=\"post\" onsubmit=\"return confirm('Are you "
          "sure?');\" action=\"%s/cancel.json\">\n" ROW
          "    <input type=\"hidden\" name=\"project\" value=\"%s\">\n" ROW
          "    <input type=\"hidden\" name=\"job\" value=\"%s\">\n" ROW
          "    <input type=\"submit\" style=\"float: left;\" value=\"Cancel\">\n" ROW
          "    </form>\n" ROW "    </td>\n",
          pg->prefix, p ? p : "", jb ? jb : "");
  free(p);
  free(jb);
}

static void job_row(void *ud, int section, size_t idx, job_t *j, strbuf_t *b) {
  jobs_page_t *pg = ud;
  const config_t *cfg = &pg->app->cfg;
  int64_t now = pg->now;
  (void)idx;
  int items_local = cfg->items_dir[0] && !config_items_remote(cfg);
  int cancel = config_service_enabled(cfg, "cancel.json");
  char t1[32], t2[32], rt[32], pid[24];
  strbuf_addf(b, ROW "<tr>\n");
  cell(b, j->project);
  cell(b, j->spider);
  cell(b, j->jobid);
  if (section == 0) {
    for (int i = 0; i < 5 + items_local; i++) cell(b, NULL);
  } else {
    snprintf(pid, sizeof(pid), "%d", j->pid);
    cell(b, section == 1 && j->pid ? pid : NULL);
    render_time(j->start_ms, 0, t1);
    cell(b, j->start_ms ? t1 : NULL);
    render_runtime((section == 1 ? now : j->end_ms) - j->start_ms, rt);
    cell(b, j->start_ms ? rt : NULL);
    render_time(j->end_ms, 0, t2);
    cell(b, section == 2 && j->end_ms ? t2 : NULL);
    link_cell(b, pg->prefix, render_log_url(cfg, j), "Log");
    if (items_local) link_cell(b, pg->prefix, render_items_url(cfg, j), "Items");
  }
  if (cancel) {
    if (section < 2) cancel_cell(b, pg, j);
    else cell(b, NULL);
  }
  strbuf_addf(b, ROW "</tr>\n");
}

static int jobs_cols(const config_t *cfg, int *items_local, int *cancel) {
  *items_local = cfg->items_dir[0] && !config_items_remote(cfg);
  *cancel = config_service_enabled(cfg, "cancel.json");
  return 8 + *items_local + *cancel;
}

static void jobs_head(void *ud, strbuf_t *b) {
  jobs_page_t *pg = ud;
  int items_local, cancel;
  jobs_cols(&pg->app->cfg, &items_local, &cancel);
  strbuf_addf(b,
          "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n    <meta charset=\"utf-8\">\n"
          "    <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
          "    <title>Scrapyd</title>\n    <style>\n        body { font-family: sans-serif; }\n"
          "        table { border-collapse: collapse; }\n"
          "        th, td { border-style: solid; border-width: 1px; }\n"
          "        tbody > tr:first-child { background-color: #eee; }\n"
          "        th, td { padding: .5rem; }\n    </style>\n</head>\n<body>\n"
          "    <h1>Jobs</h1>\n    <p><a href=\"./\">Go up</a></p>\n    <table id=\"jobs\">\n"
          "        <thead>\n" ROW "<tr>\n");
  static const char *const heads[] = {"Project", "Spider", "Job", "PID", "Start",
                                      "Runtime", "Finish", "Log"};
  for (size_t i = 0; i < 8; i++) strbuf_addf(b, ROW "    <th>%s</th>\n", heads[i]);
  if (items_local) strbuf_addf(b, ROW "    <th>Items</th>\n");
  if (cancel) strbuf_addf(b, ROW "    <th>Cancel</th>\n");
  strbuf_addf(b, ROW "</tr>\n        </thead>\n");
}

static void jobs_open(void *ud, int sec, strbuf_t *b) {
  jobs_page_t *pg = ud;
  static const char *const titles[3] = {"Pending", "Running", "Finished"};
  int items_local, cancel;
  int cols = jobs_cols(&pg->app->cfg, &items_local, &cancel);
  strbuf_addf(b, "        <tbody>\n" ROW "<tr>\n" ROW "    <th colspan=\"%d\">%s</th>\n" ROW
                 "</tr>\n",
              cols, titles[sec]);
}

static void jobs_close(void *ud, int sec, strbuf_t *b) {
  (void)ud;
  (void)sec;
  strbuf_addf(b, "        </tbody>\n");
}

static void jobs_tail(void *ud, strbuf_t *b) {
  (void)ud;
  strbuf_addf(b, "    </table>\n</body>\n</html>\n");
}

static void jobs_headers(void *ud, http_req_t *req) {
  (void)ud;
  (void)req;
}

static void jobs_free(void *ud) {
  jobs_page_t *pg = ud;
  free(pg->prefix);
  free(pg);
}

static void jobs_failed(void *ud, http_req_t *req, int rc) {
  (void)rc;
  jobs_free(ud);
  http_reply(req, 500, "text/plain", "the job list could not be read\n", 31);
}

/* Every job, read and sent a page at a time (api/listing.h). */
static const api_listing_fmt_t jobs_fmt = {jobs_head, jobs_open,    job_row,     jobs_close,
                                           jobs_tail, jobs_headers, jobs_failed, jobs_free};

static void on_jobs(http_req_t *req, void *ud) {
  app_t *app = ud;
  if (!get_only(req) || limited(app, req)) return;
  jobs_page_t *pg = http_req_calloc(req, sizeof(*pg));
  if (!pg) return;
  pg->app = app;
  pg->now = clock_wall_ms();
  pg->prefix = link_prefix(app, req);
  if (!pg->prefix ||
      api_listing_start(app, req, NULL, "text/html; charset=utf-8", &jobs_fmt, pg)) {
    jobs_free(pg);
    http_reply(req, 503, "text/plain", "the daemon is shutting down\n", 28);
  }
}

/* ---- /logs/ and /items/ ---- */

static void serve_tree(app_t *app, http_req_t *req, const char *root, const char *mount) {
  if (!get_only(req)) return;
  const char *path = http_req_path(req);
  const char *rel = path + strlen(mount);
  while (*rel == '/') rel++;
  /* the first segment is the project: a limited caller sees its own only */
  const auth_who_t *w = auth_who(app, req);
  size_t n = strcspn(rel, "/");
  char project[256];
  snprintf(project, sizeof(project), "%.*s", (int)(n < 255 ? n : 255), rel);
  if (w->projects[0] && (!n || !principal_project_ok(w->projects, project))) {
    if (!n) {
      limited(app, req);
    } else {
      http_reply(req, 404, "text/html", "File not found.", 15);
    }
    return;
  }
  api_proxy_serve(app, req, root, rel, path);
}

static void on_logs(http_req_t *req, void *ud) {
  app_t *app = ud;
  serve_tree(app, req, app->cfg.logs_dir, "/logs");
}

static void on_items(http_req_t *req, void *ud) {
  app_t *app = ud;
  serve_tree(app, req, app->cfg.items_dir, "/items");
}

int api_ui_register(app_t *app) {
  int rc;
  if ((rc = http_route(app->http, "/", on_home, app))) return rc;
  if ((rc = http_route(app->http, "/jobs", on_jobs, app))) return rc;
  if (app->cfg.logs_dir[0] && (rc = http_route_prefix(app->http, "/logs/", on_logs, app)))
    return rc;
  if (app->cfg.items_dir[0] && !config_items_remote(&app->cfg) &&
      (rc = http_route_prefix(app->http, "/items/", on_items, app)))
    return rc;
  return api_console_register(app);
}
