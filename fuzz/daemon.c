/* The in-process daemon of daemon.h, wired as main.c's serve() wires it,
 * less the modules that run processes or talk to other nodes. */
#include "daemon.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "api/auth.h"
#include "api/sse.h"
#include "config.h"
#include "fuzz.h"
#include "log.h"
#include "metrics.h"
#include "store/store.h"

static app_t the_app;
static int started;
static char sock_path[100];

static void die(const char *what, const char *err) {
  fprintf(stderr, "fuzz daemon: %s: %s\n", what, err);
  abort();
}

static void put_file(const char *dir, const char *name, const char *text) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  mkdir(dir, 0755);
  FILE *f = fopen(path, "w");
  if (!f) die("cannot write", path);
  fputs(text, f);
  fclose(f);
}

app_t *fuzz_daemon(int basic) {
  if (started) return &the_app;
  started = 1;
  app_t *app = &the_app;
  const char *tmp = fuzz_tmpdir();
  char dir[600], ui[256], err[1024];
  setenv("SPIDERD_CONFIG_FILES", "", 1);
  unsetenv("SPIDERD_STORE_PASSWORD");
  if (strlen(tmp) > 80)
    die("scratch directory too long for a Unix socket (set a shorter TMPDIR)", tmp);
  snprintf(sock_path, sizeof(sock_path), "%.80s/http.sock", tmp);
  snprintf(ui, sizeof(ui), "%s/ui", tmp);
  mkdir(ui, 0755);
  snprintf(dir, sizeof(dir), "%s/console", ui);
  put_file(dir, "index.html", "<!doctype html><title>spiderd</title>\n");
  snprintf(dir, sizeof(dir), "%s/docs", ui);
  put_file(dir, "index.html", "<!doctype html><title>docs</title>\n");
  snprintf(dir, sizeof(dir), "%s/api", ui);
  put_file(dir, "index.html", "<!doctype html><title>api</title>\n");

  char a_store[600], a_eggs[600], a_logs[600], a_items[600], a_dbs[600], a_ui[600];
  snprintf(a_store, sizeof(a_store), "spiderd.store=sqlite:%s/dbs/spiderd.db", tmp);
  snprintf(a_eggs, sizeof(a_eggs), "%s/eggs", tmp);
  snprintf(a_logs, sizeof(a_logs), "%s/logs", tmp);
  snprintf(a_items, sizeof(a_items), "%s/items", tmp);
  snprintf(a_dbs, sizeof(a_dbs), "%s/dbs", tmp);
  snprintf(a_ui, sizeof(a_ui), "spiderd.ui_dir=%s", ui);
  char *argv[] = {"--set", a_store, "--eggs-dir", a_eggs, "--logs-dir", a_logs,
                  "--items-dir", a_items, "--dbs-dir", a_dbs, "--port", "0",
                  "--unix-socket", sock_path, "--set", a_ui,
                  "--set", "spiderd.python=/nonexistent/python3",
                  "--set", "spiderd.scheduler=off", "--set", "spiderd.auth_fail_limit=0",
                  "--set", basic ? "scrapyd.username=fuzz" : "scrapyd.username=",
                  "--set", basic ? "scrapyd.password=fuzz" : "scrapyd.password=",
                  "--set", "spiderd.max_upload=1048576",
                  "--log-level", "error"};
  if (config_load(&app->cfg, (int)(sizeof(argv) / sizeof(argv[0])), argv, err, sizeof(err)))
    die("config", err);
  if (config_load_secrets(&app->cfg, err, sizeof(err))) die("config secrets", err);
  log_open("/dev/null");
  log_set_level("error");
  signal(SIGPIPE, SIG_IGN);
  mkdir(a_eggs, 0755);
  mkdir(a_logs, 0755);
  mkdir(a_items, 0755);
  mkdir(a_dbs, 0755);
  /* a finished crawl's files, for /logs/ and /items/ to serve */
  /* (testproj/quotes/abc for the pages, myproject/hello/j1 for the ops
   * seeds' job j1) */
  for (int i = 0; i < 4; i++) {
    char d[700];
    const char *proj = i < 2 ? "testproj" : "myproject", *spider = i < 2 ? "quotes" : "hello";
    const char *base = i % 2 ? a_items : a_logs;
    snprintf(d, sizeof(d), "%s/%s", base, proj);
    mkdir(d, 0755);
    snprintf(d, sizeof(d), "%s/%s/%s", base, proj, spider);
    char name[16];
    snprintf(name, sizeof(name), "%s.%s", i < 2 ? "abc" : "j1", i % 2 ? "jl" : "log");
    put_file(d, name,
             i % 2 ? "{\"text\": \"a\"}\n{\"text\": \"\\u00e9\"}\n"
               : "2026-01-01 00:00:00 [scrapy.core.engine] INFO: Spider opened\n\xc3(\n");
  }

  /* what main.c's recover() reads before serving: the job tokens' secret,
   * users and tokens */
  store_t *s = NULL;
  if (store_open(app->cfg.store, &s, err, sizeof(err))) die("store", err);
  char *secret = NULL, *gen = NULL;
  if (!store_meta_get(s, JOBTOKEN_META_KEY, &secret) && secret &&
      strlen(secret) == JOBTOKEN_SECRET_HEX)
    memcpy(app->job_secret, secret, JOBTOKEN_SECRET_HEX + 1);
  else if (jobtoken_secret_new(app->job_secret) ||
           store_meta_set(s, JOBTOKEN_META_KEY, app->job_secret))
    die("store", "job token secret");
  free(secret);
  principal_list_t who = {0};
  if (store_auth_gen(s, &gen) || store_principals_list(s, &who) || auth_init(app, &who, gen))
    die("auth", "init");
  principal_list_release(&who);
  free(gen);
  store_close(s);

  app->loop = uv_default_loop();
  if (!(app->metrics = metrics_new())) die("metrics", "out of memory");
  if (store_pool_start(app->loop, app->cfg.store, &app->store, err, sizeof(err)))
    die("store", err);
  store_pool_set_metrics(app->store, app->metrics);
  if (spiders_init(&app->spiders, app->loop, &app->cfg)) die("spiders", "init");
  http_options_t ho = {
      .bind_address = app->cfg.bind_address,
      .port = 0,
      .unix_socket_path = sock_path,
      .realm = "Scrapyd",
      .max_body = app->cfg.max_upload,
  };
  if (http_server_start(app->loop, &ho, &app->http, err, sizeof(err))) die("http", err);
  if (sse_hub_init(app, &app->sse)) die("sse", "init");
  if (api_scrapyd_register(app) || api_rest_register(app) || api_ui_register(app) ||
      api_metrics_register(app))
    die("routes", "register");
  if (auth_start(app)) die("auth", "start");
  app->started_ms = 1;
  return app;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* One turn of the loop, waiting at most ms for it (or for fd, if >= 0). */
static void turn(app_t *app, int fd, short events, int ms) {
  struct pollfd p[2] = {{.fd = uv_backend_fd(app->loop), .events = POLLIN},
                        {.fd = fd, .events = events}};
  int t = uv_backend_timeout(app->loop);
  if (t < 0 || t > ms) t = ms;
  poll(p, fd >= 0 ? 2 : 1, t);
  uv_run(app->loop, UV_RUN_NOWAIT);
}

int fuzz_daemon_run(app_t *app, int (*done)(void *ud), void *ud, int ms) {
  int64_t end = now_ms() + ms;
  while (!done(ud)) {
    if (now_ms() >= end) return 0;
    turn(app, -1, 0, 5);
  }
  return 1;
}

size_t fuzz_daemon_request(app_t *app, const char *req, size_t len, int ms) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) die("socket", strerror(errno));
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
  if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) die("connect", strerror(errno));
  int64_t end = now_ms() + ms;
  size_t off = 0, got = 0;
  int eof = 0;
  char buf[65536];
  while (!eof && now_ms() < end) {
    if (off < len) {
      ssize_t n = send(fd, req + off, len - off, MSG_NOSIGNAL);
      if (n > 0) off += (size_t)n;
      else if (n < 0 && errno != EAGAIN && errno != EINTR) off = len; /* closed early */
    }
    turn(app, fd, off < len ? POLLIN | POLLOUT : POLLIN, 5);
    for (;;) {
      ssize_t n = recv(fd, buf, sizeof(buf), 0);
      if (n > 0) {
        if (getenv("FUZZ_DEBUG")) fprintf(stderr, "%.*s", (int)(n < 300 ? n : 300), buf);
        got += (size_t)n;
        continue;
      }
      if (n == 0 || (errno != EAGAIN && errno != EINTR)) eof = 1;
      break;
    }
  }
  if (getenv("FUZZ_DEBUG")) fprintf(stderr, "\n[%zu bytes%s]\n", got, eof ? "" : ", timed out");
  close(fd);
  /* let the daemon notice and finish the connection */
  for (int i = 0; i < 4; i++) turn(app, -1, 0, 0);
  return got;
}
