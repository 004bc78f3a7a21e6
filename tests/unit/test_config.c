/* Unit tests for config.h (config.c, config_load.c, config_secret.c):
 * sources and their order, validation messages, [services] and [settings],
 * derived values. Every test works in its own temporary directory and reads
 * only the files it names, through SPIDERD_CONFIG_FILES, except the one
 * that walks the default file list. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config.h"
#include "error.h"

extern char **environ;

struct fx {
  char dir[PATH_MAX];     /* the test's temporary directory */
  char oldcwd[PATH_MAX];  /* restored after the test */
  char *oldhome;
  config_t c;
  char err[512];
};

/* ---- helpers ---- */

/* Clears every variable config_load reads, so the caller's environment
 * cannot change the outcome. */
static void clear_env(void) {
  for (;;) {
    char name[256] = "";
    for (char **e = environ; *e; e++)
      if (strncmp(*e, "SPIDERD_", 8) == 0 || strncmp(*e, "SCRAPYD_", 8) == 0) {
        size_t n = strcspn(*e, "=");
        if (n >= sizeof(name)) n = sizeof(name) - 1;
        memcpy(name, *e, n);
        name[n] = '\0';
        break;
      }
    if (!name[0]) return;
    unsetenv(name);
  }
}

static char *path_in(struct fx *f, const char *rel) {
  char *p = NULL;
  if (asprintf(&p, "%s/%s", f->dir, rel) < 0) fail();
  return p;
}

/* mkdir -p DIR/REL */
static void make_dirs(struct fx *f, const char *rel) {
  char *sub = strdup(rel);
  assert_non_null(sub);
  for (char *s = sub;; s++) {
    char c = *s;
    if (c == '/' || c == '\0') {
      *s = '\0';
      char *p = path_in(f, sub);
      mkdir(p, 0755);
      free(p);
      *s = c;
    }
    if (!c) break;
  }
  free(sub);
}

/* Writes TEXT to DIR/REL (creating parents) and returns the full path. */
static char *write_file(struct fx *f, const char *rel, const char *text) {
  const char *slash = strrchr(rel, '/');
  if (slash) {
    char *parent = strndup(rel, (size_t)(slash - rel));
    assert_non_null(parent);
    make_dirs(f, parent);
    free(parent);
  }
  char *p = path_in(f, rel);
  FILE *fp = fopen(p, "w");
  assert_non_null(fp);
  fputs(text, fp);
  fclose(fp);
  return p;
}

/* SPIDERD_CONFIG_FILES = the given files of the test dir, ':'-joined. */
static void use_files(struct fx *f, const char *first, ...) {
  char *list = strdup("");
  va_list ap;
  va_start(ap, first);
  for (const char *rel = first; rel; rel = va_arg(ap, const char *)) {
    char *longer = NULL;
    if (asprintf(&longer, "%s%s%s/%s", list, *list ? ":" : "", f->dir, rel) < 0) fail();
    free(list);
    list = longer;
  }
  va_end(ap);
  setenv("SPIDERD_CONFIG_FILES", list, 1);
  free(list);
}

static int load(struct fx *f, int argc, char **argv) {
  f->err[0] = '\0';
  return config_load(&f->c, argc, argv, f->err, sizeof(f->err));
}

/* Loads and expects failure with exactly MESSAGE. */
static void expect_error(struct fx *f, int argc, char **argv, const char *message) {
  int rc = load(f, argc, argv);
  assert_int_not_equal(rc, 0);
  assert_true(rc < 0);
  assert_string_equal(f->err, message);
  /* released on failure: nothing left to free, nothing dangling */
  assert_null(f->c.sources);
  assert_null(f->c.services);
  assert_null(f->c.bind_address);
}

/* A file with one key, expected to be rejected with REASON. */
static void expect_file_error(struct fx *f, const char *section, const char *key,
                              const char *value, const char *reason) {
  char text[512], msg[1024];
  snprintf(text, sizeof(text), "[%s]\n%s = %s\n", section, key, value);
  char *p = write_file(f, "bad.conf", text);
  use_files(f, "bad.conf", NULL);
  snprintf(msg, sizeof(msg), "%s: [%s] %s: %s", p, section, key, reason);
  expect_error(f, 0, NULL, msg);
  free(p);
}

static int rm_entry(const char *p, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st;
  (void)flag;
  (void)ftw;
  return remove(p);
}

static int setup(void **state) {
  struct fx *f = calloc(1, sizeof(*f));
  if (!f) return -1;
  if (!getcwd(f->oldcwd, sizeof(f->oldcwd))) return -1;
  const char *tmp = getenv("TMPDIR");
  snprintf(f->dir, sizeof(f->dir), "%s/spiderd-config-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(f->dir)) return -1;
  /* later tests compare paths with getcwd(), which resolves symlinks */
  char real[PATH_MAX];
  if (!realpath(f->dir, real)) return -1;
  snprintf(f->dir, sizeof(f->dir), "%s", real);
  const char *home = getenv("HOME");
  f->oldhome = home ? strdup(home) : NULL;
  clear_env();
  setenv("SPIDERD_CONFIG_FILES", "", 1);
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;
  config_release(&f->c);
  if (chdir(f->oldcwd) != 0) return -1;
  nftw(f->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
  if (f->oldhome) setenv("HOME", f->oldhome, 1);
  else unsetenv("HOME");
  free(f->oldhome);
  clear_env();
  free(f);
  return 0;
}

static const char *const scrapyd_services[] = {
    "daemonstatus.json", "addversion.json",  "schedule.json",     "cancel.json",
    "status.json",       "listprojects.json", "listversions.json", "listspiders.json",
    "delproject.json",   "delversion.json",  "listjobs.json",
};

/* ---- defaults ---- */

static void test_defaults(void **state) {
  struct fx *f = *state;
  assert_int_equal(load(f, 0, NULL), 0);
  config_t *c = &f->c;
  assert_string_equal(c->bind_address, "127.0.0.1");
  assert_int_equal(c->http_port, 6800);
  assert_string_equal(c->unix_socket_path, "");
  assert_string_equal(c->username, "");
  assert_string_equal(c->password, "");
  assert_true(c->poll_interval == 5.0);
  assert_int_equal(c->max_proc, 0);
  assert_int_equal(c->max_proc_per_cpu, 4);
  assert_string_equal(c->logs_dir, "logs");
  assert_string_equal(c->items_dir, "");
  assert_string_equal(c->jobs_dir, "");
  assert_int_equal(c->jobs_to_keep, 5);
  assert_string_equal(c->runner, "scrapyd.runner");
  assert_string_equal(c->prefix_header, "x-forwarded-prefix");
  char host[256];
  assert_int_equal(gethostname(host, sizeof(host)), 0);
  assert_string_equal(c->node_name, host);
  assert_int_equal(c->debug, 0);
  assert_string_equal(c->eggs_dir, "eggs");
  assert_int_equal(c->finished_to_keep, 100);
  assert_string_equal(c->dbs_dir, "dbs");

  assert_int_equal(c->nservices, 11);
  for (size_t i = 0; i < 11; i++) {
    assert_string_equal(c->services[i].name, scrapyd_services[i]);
    assert_true(config_service_enabled(c, scrapyd_services[i]));
  }
  assert_string_equal(c->services[0].value, "scrapyd.webservice.DaemonStatus");
  assert_false(config_service_enabled(c, "DAEMONSTATUS.JSON"));
  assert_false(config_service_enabled(c, "jobs"));
  assert_int_equal(c->nsettings, 0);
  assert_null(config_project_settings(c, "default"));

  assert_string_equal(c->store, "sqlite:dbs/spiderd.db");
  assert_string_equal(c->python, SPIDERD_DEFAULT_PYTHON);
  assert_string_equal(c->pythonpath, SPIDERD_PYTHONDIR);
  assert_string_equal(c->ui_dir, SPIDERD_UI_DIR);
  assert_true(c->cancel_grace == 60.0);
  assert_true(c->shutdown_grace == 10.0);
  assert_true(c->drain_grace == 30.0); /* Kubernetes' terminationGracePeriodSeconds */
  assert_true(c->job_timeout == 0.0);
  assert_int_equal(c->job_retries, 0);
  assert_true(c->retry_backoff == 10.0);
  assert_true(c->heartbeat_interval == 5.0);
  assert_true(c->heartbeat_timeout == 60.0);
  assert_true(c->max_upload == 64LL * 1024 * 1024);
  assert_int_equal(c->http_timeout, 60);
  assert_int_equal(c->http_connections, 4096);
  /* No resource limits unless configured. */
  assert_true(c->job_memory_limit == 0 && c->job_log_limit == 0 && c->job_items_limit == 0);
  assert_true(c->job_cpu_limit == 0.0);
  assert_int_equal(c->job_max_procs, 0);
  assert_string_equal(c->job_limits, "auto");
  assert_string_equal(c->log_file, "");
  assert_string_equal(c->log_level, "info");
  assert_string_equal(c->pidfile, "");
  assert_int_equal(c->history_per_spider, 0);
  assert_true(c->history_days == 0.0);
  assert_true(c->events_days == 30.0);
  assert_true(c->janitor_interval == 60.0);
  assert_int_equal(c->nretention, 0);
  assert_null(c->retention);
  assert_int_equal(c->nsources, 0);
  assert_null(c->sources);
}

/* ---- files ---- */

static void test_file_order_and_override(void **state) {
  struct fx *f = *state;
  char *a = write_file(f, "a.conf",
                       "# Scrapyd's own keys\n"
                       "[scrapyd]\n"
                       "bind_address = 0.0.0.0\n"
                       "http_port    = 6801\n"
                       "max_proc     = 2\n"
                       "logs_dir     = /var/log/a\n"
                       "debug        = on\n"
                       "poll_interval = 2.5\n"
                       "\n"
                       "[spiderd]\n"
                       "cancel_grace = 5\n"
                       "log_level = WARNING\n");
  char *b = write_file(f, "b.conf",
                       "; the later file wins\n"
                       "[scrapyd]\n"
                       "max_proc: 3\n"
                       "logs_dir =\n"
                       "[spiderd]\n"
                       "max_upload = 2M\n"
                       "[other]\n"
                       "max_proc = 99\n");
  use_files(f, "a.conf", "missing.conf", "b.conf", NULL);
  assert_int_equal(load(f, 0, NULL), 0);
  config_t *c = &f->c;
  assert_string_equal(c->bind_address, "0.0.0.0");
  assert_int_equal(c->http_port, 6801);
  assert_int_equal(c->max_proc, 3);
  assert_string_equal(c->logs_dir, "");
  assert_int_equal(c->debug, 1);
  assert_true(c->poll_interval == 2.5);
  assert_true(c->cancel_grace == 5.0);
  assert_string_equal(c->log_level, "warning");
  assert_true(c->max_upload == 2 * 1024 * 1024);
  /* the missing file is skipped and not listed */
  assert_int_equal(c->nsources, 2);
  assert_string_equal(c->sources[0], a);
  assert_string_equal(c->sources[1], b);
  free(a);
  free(b);
}

static void test_confd_sorted(void **state) {
  struct fx *f = *state;
  make_dirs(f, "conf.d/subdir");
  free(write_file(f, "conf.d/20-b.conf", "[scrapyd]\nnode_name = b\njobs_to_keep = 20\n"));
  free(write_file(f, "conf.d/10-a.conf", "[scrapyd]\nnode_name = a\neggs_dir = /a/eggs\n"));
  free(write_file(f, "conf.d/30-c", "[scrapyd]\nnode_name = c\n"));
  free(write_file(f, "conf.d/.hidden", "[scrapyd]\nnode_name = hidden\n"));
  free(write_file(f, "conf.d/subdir/x.conf", "[scrapyd]\nnode_name = subdir\n"));
  free(write_file(f, "conf.d/B-upper", "[scrapyd]\nfinished_to_keep = 7\n"));
  use_files(f, "conf.d", NULL);
  assert_int_equal(load(f, 0, NULL), 0);
  config_t *c = &f->c;
  assert_string_equal(c->node_name, "c");
  assert_string_equal(c->eggs_dir, "/a/eggs");
  assert_int_equal(c->jobs_to_keep, 20);
  assert_int_equal(c->finished_to_keep, 7);
  /* byte order, as Python's sorted(): digits < upper case; no dot files,
   * no subdirectories */
  assert_int_equal(c->nsources, 4);
  const char *order[] = {"10-a.conf", "20-b.conf", "30-c", "B-upper"};
  for (size_t i = 0; i < 4; i++) {
    char *p = path_in(f, "conf.d");
    char *want = NULL;
    assert_true(asprintf(&want, "%s/%s", p, order[i]) > 0);
    assert_string_equal(c->sources[i], want);
    free(want);
    free(p);
  }
}

static void test_empty_file_list(void **state) {
  struct fx *f = *state;
  free(write_file(f, "scrapyd.conf", "[scrapyd]\nhttp_port = 1\n"));
  assert_int_equal(chdir(f->dir), 0);
  setenv("SPIDERD_CONFIG_FILES", "", 1);
  assert_int_equal(load(f, 0, NULL), 0);
  assert_int_equal(f->c.http_port, 6800);
  assert_int_equal(f->c.nsources, 0);
}

/* The default list: ./scrapyd.conf, ~/.scrapyd.conf, then the closest
 * scrapy.cfg. Skipped where a real /etc/scrapyd could change the outcome. */
static void test_default_list_and_scrapy_cfg(void **state) {
  struct fx *f = *state;
  if (access("/etc/scrapyd", F_OK) == 0) skip();
  unsetenv("SPIDERD_CONFIG_FILES");
  char *far = write_file(f, "proj/scrapy.cfg",
                         "[settings]\nfar = far.settings\n[scrapyd]\neggs_dir = far\n");
  char *cfg = write_file(f, "proj/app/scrapy.cfg",
                         "[settings]\n"
                         "default = app.settings\n"
                         "[deploy]\n"
                         "url = http://localhost:6800/\n"
                         "project = app\n"
                         "[scrapyd]\n"
                         "http_port = 6903\n");
  make_dirs(f, "proj/app/sub/deeper");
  char *local = write_file(f, "proj/app/sub/deeper/scrapyd.conf",
                           "[scrapyd]\nhttp_port = 6901\nmax_proc = 1\njobs_to_keep = 1\n");
  char *home = path_in(f, "home");
  make_dirs(f, "home");
  char *user = write_file(f, "home/.scrapyd.conf", "[scrapyd]\nhttp_port = 6902\nmax_proc = 2\n");
  setenv("HOME", home, 1);
  char *cwd = path_in(f, "proj/app/sub/deeper");
  assert_int_equal(chdir(cwd), 0);

  assert_int_equal(load(f, 0, NULL), 0);
  config_t *c = &f->c;
  assert_int_equal(c->http_port, 6903);
  assert_int_equal(c->max_proc, 2);
  assert_int_equal(c->jobs_to_keep, 1);
  assert_string_equal(c->eggs_dir, "eggs");
  assert_string_equal(config_project_settings(c, "default"), "app.settings");
  assert_null(config_project_settings(c, "far"));
  assert_int_equal(c->nsources, 3);
  assert_string_equal(c->sources[0], local);
  assert_string_equal(c->sources[1], user);
  assert_string_equal(c->sources[2], cfg);

  /* from a directory above app/, the far scrapy.cfg is the closest one */
  config_release(&f->c);
  char *proj = path_in(f, "proj");
  assert_int_equal(chdir(proj), 0);
  assert_int_equal(load(f, 0, NULL), 0);
  assert_string_equal(c->eggs_dir, "far");
  assert_string_equal(c->sources[c->nsources - 1], far);
  free(proj);
  free(far);
  free(cfg);
  free(local);
  free(home);
  free(user);
  free(cwd);
}

static void test_multiline_interpolation_case(void **state) {
  struct fx *f = *state;
  free(write_file(f, "a.conf",
                  "[DEFAULT]\n"
                  "root = /srv/spiderd\n"
                  "[scrapyd]\n"
                  "LOGS_DIR = %(root)s/logs\n"
                  "eggs_dir = %(base)s/eggs\n"
                  "base = /data\n"
                  "password = 100%%\n"
                  "prefix_header = first\n"
                  "    second\n"
                  "\t# a comment inside does not join\n"
                  "    third\n"
                  "runner = my.runner ; inih strips this comment, ConfigParser would not\n"
                  "jobs_dir = a;b\n"
                  "[services]\n"
                  "x.json = a.B\n"
                  "[settings]\n"
                  "  MyProject = %(pkg)s.settings\n"
                  "pkg = mine\n"));
  free(write_file(f, "b.conf",
                  "[scrapyd]\n"
                  "  base = /later\n"));
  use_files(f, "a.conf", "b.conf", NULL);
  assert_int_equal(load(f, 0, NULL), 0);
  config_t *c = &f->c;
  assert_string_equal(c->logs_dir, "/srv/spiderd/logs");
  /* resolved against the merged files, as ConfigParser does */
  assert_string_equal(c->eggs_dir, "/later/eggs");
  assert_string_equal(c->password, "100%");
  assert_string_equal(c->prefix_header, "first\nsecond\nthird");
  assert_string_equal(c->runner, "my.runner");
  assert_string_equal(c->jobs_dir, "a;b");
  assert_string_equal(c->services[c->nservices - 1].value, "a.B");
  /* names are lower-cased like ConfigParser's optionxform */
  assert_string_equal(config_project_settings(c, "myproject"), "mine.settings");
  assert_string_equal(config_project_settings(c, "pkg"), "mine");
  assert_null(config_project_settings(c, "MyProject"));
}

static void test_unknown_scrapyd_keys_ignored(void **state) {
  struct fx *f = *state;
  free(write_file(f, "a.conf",
                  "[scrapyd]\n"
                  "application = scrapyd.app.application\n"
                  "webroot = scrapyd.website.Root\n"
                  "launcher = scrapyd.launcher.Launcher\n"
                  "spiderqueue = scrapyd.spiderqueue.SqliteSpiderQueue\n"
                  "poller = scrapyd.poller.QueuePoller\n"
                  "eggstorage = scrapyd.eggstorage.FilesystemEggStorage\n"
                  "jobstorage = scrapyd.jobstorage.SqliteJobStorage\n"
                  "something_new = 1\n"
                  "bad_percent = 50%\n"
                  "max_proc = 6\n"));
  use_files(f, "a.conf", NULL);
  char *argv[] = {"--set", "scrapyd.not_a_key=x"};
  assert_int_equal(load(f, 2, argv), 0);
  assert_int_equal(f->c.max_proc, 6);
  /* noted for the start-up lines: the classes, and the keys nobody knows */
  assert_int_equal(f->c.nclasses, 10);
  assert_int_equal(config_check_scrapyd_classes(&f->c, f->err, sizeof(f->err)), 0);
  for (size_t i = 0; i < f->c.nclasses; i++) {
    const config_class_t *e = &f->c.classes[i];
    char msg[1024];
    enum config_class_verdict v = config_scrapyd_class(&f->c, e, msg, sizeof(msg));
    if (e->kind == CONFIG_CLASS_KEY) assert_int_equal(v, CONFIG_CLASS_MAPPED);
    else assert_int_equal(v, CONFIG_CLASS_IGNORED);
  }
  const config_class_t *last = &f->c.classes[f->c.nclasses - 1];
  assert_string_equal(last->name, "not_a_key");
  assert_string_equal(last->src, "--set");
  assert_null(last->value);
}

/* ---- Scrapyd's class keys ---- */

/* The entry KIND NAME of c->classes, or NULL. */
static const config_class_t *class_of(const config_t *c, enum config_class_kind kind,
                                      const char *name) {
  for (size_t i = 0; i < c->nclasses; i++)
    if (c->classes[i].kind == kind && !strcmp(c->classes[i].name, name)) return &c->classes[i];
  return NULL;
}

/* The verdict on KIND NAME, and its sentence in msg. */
static enum config_class_verdict verdict(const config_t *c, enum config_class_kind kind,
                                         const char *name, char *msg, size_t n) {
  const config_class_t *e = class_of(c, kind, name);
  if (!e) fail_msg("%s was not noted", name);
  return config_scrapyd_class(c, e, msg, n);
}

static void test_scrapyd_classes_mapped(void **state) {
  struct fx *f = *state;
  /* every class of Scrapyd 1.6's default_scrapyd.conf, and its second job storage */
  free(write_file(f, "a.conf",
                  "[scrapyd]\n"
                  "application = scrapyd.app.application\n"
                  "spiderqueue = scrapyd.spiderqueue.SqliteSpiderQueue\n"
                  "poller = scrapyd.poller.QueuePoller\n"
                  "launcher = scrapyd.launcher.Launcher\n"
                  "webroot = scrapyd.website.Root\n"
                  "eggstorage = scrapyd.eggstorage.FilesystemEggStorage\n"
                  "jobstorage = scrapyd.jobstorage.MemoryJobStorage\n"
                  "max_proc = 3\n"
                  "[services]\n"
                  "schedule.json = scrapyd.webservice.Schedule\n"
                  "listjobs.json = scrapyd.webservice.ListJobs\n"
                  "daemonstatus.json =\n"));
  free(write_file(f, "b.conf", "[scrapyd]\njobstorage = scrapyd.jobstorage.SqliteJobStorage\n"));
  use_files(f, "a.conf", "b.conf", NULL);
  assert_int_equal(load(f, 0, NULL), 0);
  config_t *c = &f->c;
  assert_int_equal(config_check_scrapyd_classes(c, f->err, sizeof(f->err)), 0);
  /* one entry per key, the later file's value */
  assert_int_equal(c->nclasses, 10);
  assert_string_equal(class_of(c, CONFIG_CLASS_KEY, "jobstorage")->value,
                      "scrapyd.jobstorage.SqliteJobStorage");
  for (size_t i = 0; i < c->nclasses; i++) {
    char msg[1024];
    assert_int_equal(config_scrapyd_class(c, &c->classes[i], msg, sizeof(msg)),
                     CONFIG_CLASS_MAPPED);
    assert_true(strlen(msg) > 10);
  }
  char msg[1024];
  verdict(c, CONFIG_CLASS_KEY, "spiderqueue", msg, sizeof(msg));
  assert_string_equal(msg, "spiderd keeps its queue in its store (store = sqlite:dbs/spiderd.db)");
  verdict(c, CONFIG_CLASS_KEY, "launcher", msg, sizeof(msg));
  assert_non_null(strstr(msg, "at most 3 at once"));
  verdict(c, CONFIG_CLASS_KEY, "eggstorage", msg, sizeof(msg));
  assert_string_equal(msg, "spiderd keeps eggs in eggs_dir (eggs)");
  verdict(c, CONFIG_CLASS_SERVICE, "daemonstatus.json", msg, sizeof(msg));
  assert_string_equal(msg, "disabled: spiderd does not serve /daemonstatus.json");
  verdict(c, CONFIG_CLASS_SERVICE, "schedule.json", msg, sizeof(msg));
  assert_string_equal(msg, "spiderd serves /schedule.json itself");
  assert_false(config_service_enabled(c, "daemonstatus.json"));
}

/* One file setting SECTION's KEY = CLASS is refused with a message holding
 * every string of WANT (NULL-terminated). */
static void expect_refused(struct fx *f, const char *section, const char *key, const char *cls,
                           const char *const *want) {
  char text[512], head[1024];
  snprintf(text, sizeof(text), "[%s]\n%s = %s\n", section, key, cls);
  char *p = write_file(f, "x.conf", text);
  use_files(f, "x.conf", NULL);
  assert_int_equal(load(f, 0, NULL), 0); /* the command-line client still reads it */
  assert_int_equal(config_check_scrapyd_classes(&f->c, f->err, sizeof(f->err)), SPD_ECONFIG);
  snprintf(head, sizeof(head), "%s: [%s] %s = %s: ", p, section, key, cls);
  if (strncmp(f->err, head, strlen(head))) fail_msg("'%s' does not start '%s'", f->err, head);
  assert_non_null(strstr(f->err, "set unknown_scrapyd_classes = warn in [spiderd]"));
  for (; *want; want++)
    if (!strstr(f->err, *want)) fail_msg("'%s' does not say '%s'", f->err, *want);
  config_release(&f->c);
  /* the override starts it, the class still noted as unknown */
  snprintf(text, sizeof(text), "[%s]\n%s = %s\n[spiderd]\nunknown_scrapyd_classes = WARN\n",
           section, key, cls);
  free(write_file(f, "x.conf", text));
  assert_int_equal(load(f, 0, NULL), 0);
  assert_string_equal(f->c.unknown_scrapyd_classes, "warn");
  assert_int_equal(config_check_scrapyd_classes(&f->c, f->err, sizeof(f->err)), 0);
  assert_int_equal(f->c.nclasses, 1);
  char msg[1024];
  assert_int_equal(config_scrapyd_class(&f->c, &f->c.classes[0], msg, sizeof(msg)),
                   CONFIG_CLASS_UNKNOWN);
  config_release(&f->c);
  free(p);
}

static void test_scrapyd_classes_refused(void **state) {
  struct fx *f = *state;
  expect_refused(f, "scrapyd", "spiderqueue", "scrapyd_pg.queue.PostgresSpiderQueue",
                 (const char *const[]){"store = postgresql://", "every node", NULL});
  expect_refused(f, "scrapyd", "launcher", "mycompany.launcher.DockerLauncher",
                 (const char *const[]){"[hooks]", "max_proc", "[concurrency]", NULL});
  expect_refused(f, "scrapyd", "jobstorage", "scrapyd_mongo.MongoJobStorage",
                 (const char *const[]){"finished_to_keep", "jobs_to_keep", "[retention]", NULL});
  expect_refused(f, "scrapyd", "eggstorage", "s3eggs.S3EggStorage",
                 (const char *const[]){"eggs_dir", NULL});
  expect_refused(f, "scrapyd", "poller", "my.Poller", (const char *const[]){"priority", NULL});
  expect_refused(f, "scrapyd", "webroot", "my.Root", (const char *const[]){"/api/v1/", NULL});
  expect_refused(f, "scrapyd", "application", "my.app",
                 (const char *const[]){"not a Twisted application", NULL});
  expect_refused(f, "services", "mywebservice.json", "amodule.MyWebService",
                 (const char *const[]){"no endpoint /mywebservice.json", "schedule.json",
                                       "listjobs.json", "/api/v1/", NULL});
  expect_refused(f, "services", "schedule.json", "mine.Schedule",
                 (const char *const[]){"serves its own /schedule.json", NULL});
}

static void test_scrapyd_classes_sources(void **state) {
  struct fx *f = *state;
  /* a later file's default class replaces an earlier plugin */
  free(write_file(f, "a.conf", "[scrapyd]\nspiderqueue = plugin.Queue\nsomething_new = 1\n"
                               "jobstorage = %(js)s\njs = scrapyd.jobstorage.SqliteJobStorage\n"));
  free(write_file(f, "b.conf", "[scrapyd]\nspiderqueue = scrapyd.spiderqueue.SqliteSpiderQueue\n"
                               "[spiderd]\nstore = postgresql://u:hunter2@db/spiders\n"));
  use_files(f, "a.conf", "b.conf", NULL);
  assert_int_equal(load(f, 0, NULL), 0);
  assert_int_equal(config_check_scrapyd_classes(&f->c, f->err, sizeof(f->err)), 0);
  char msg[1024];
  assert_int_equal(verdict(&f->c, CONFIG_CLASS_KEY, "spiderqueue", msg, sizeof(msg)),
                   CONFIG_CLASS_MAPPED);
  assert_non_null(strstr(msg, "postgresql://u:***@db/spiders"));
  assert_null(strstr(msg, "hunter2"));
  /* interpolated like any key */
  assert_string_equal(class_of(&f->c, CONFIG_CLASS_KEY, "jobstorage")->value,
                      "scrapyd.jobstorage.SqliteJobStorage");
  /* a key nobody knows is ignored, as Scrapyd would, and said so */
  assert_int_equal(verdict(&f->c, CONFIG_CLASS_OTHER, "something_new", msg, sizeof(msg)),
                   CONFIG_CLASS_IGNORED);
  assert_null(class_of(&f->c, CONFIG_CLASS_OTHER, "js")); /* only a part of another value */
  config_release(&f->c);

  /* --set names a class too */
  char *argv[] = {"--set", "scrapyd.launcher=my.Launcher", "--set", "services.x.json=a.X"};
  assert_int_equal(load(f, 4, argv), 0);
  assert_int_equal(config_check_scrapyd_classes(&f->c, f->err, sizeof(f->err)), SPD_ECONFIG);
  assert_non_null(strstr(f->err, "--set: [scrapyd] launcher = my.Launcher: "));
  assert_string_equal(class_of(&f->c, CONFIG_CLASS_SERVICE, "x.json")->src, "--set");
}

static void test_log_format_key(void **state) {
  struct fx *f = *state;
  assert_int_equal(load(f, 0, NULL), 0);
  assert_string_equal(f->c.log_format, "text");
  assert_string_equal(f->c.unknown_scrapyd_classes, "refuse");
  assert_int_equal(f->c.nclasses, 0); /* built-in defaults are not noted */
  config_release(&f->c);
  char *argv[] = {"--log-format", "JSON"};
  assert_int_equal(load(f, 2, argv), 0);
  assert_string_equal(f->c.log_format, "json");
  config_release(&f->c);
  setenv("SPIDERD_LOG_FORMAT", "json", 1);
  assert_int_equal(load(f, 0, NULL), 0);
  assert_string_equal(f->c.log_format, "json");
  config_release(&f->c);
  unsetenv("SPIDERD_LOG_FORMAT");
  expect_file_error(f, "spiderd", "log_format", "xml", "'xml' is not one of text, json");
  expect_file_error(f, "spiderd", "unknown_scrapyd_classes", "ignore",
                    "'ignore' is not one of refuse, warn");
}

static void test_booleans(void **state) {
  struct fx *f = *state;
  static const struct {
    const char *text;
    int value;
  } cases[] = {{"1", 1},   {"yes", 1}, {"TRUE", 1},  {"On", 1},  {"0", 0},
               {"no", 0},  {"False", 0}, {"OFF", 0}, {"true", 1}, {"nO", 0}};
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char text[64];
    snprintf(text, sizeof(text), "[scrapyd]\ndebug = %s\n", cases[i].text);
    free(write_file(f, "b.conf", text));
    use_files(f, "b.conf", NULL);
    assert_int_equal(load(f, 0, NULL), 0);
    assert_int_equal(f->c.debug, cases[i].value);
    config_release(&f->c);
  }
}

static void test_numbers(void **state) {
  struct fx *f = *state;
  free(write_file(f, "a.conf",
                  "[scrapyd]\n"
                  "max_proc = +1_000\n"
                  "max_proc_per_cpu = 1\n"
                  "jobs_to_keep = 0\n"
                  "finished_to_keep = 0\n"
                  "poll_interval = 1e-1\n"
                  "http_port = 0\n"
                  "[spiderd]\n"
                  "cancel_grace = 0\n"
                  "shutdown_grace = 0.5\n"
                  "max_upload = 1024\n"
                  "job_memory_limit = 512M\n"
                  "job_log_limit = 10k\n"
                  "job_cpu_limit = 1.5\n"
                  "job_max_procs = 64\n"
                  "job_limits = RLIMIT\n"));
  use_files(f, "a.conf", NULL);
  assert_int_equal(load(f, 0, NULL), 0);
  config_t *c = &f->c;
  assert_int_equal(c->max_proc, 1000);
  assert_int_equal(c->max_proc_per_cpu, 1);
  assert_int_equal(c->jobs_to_keep, 0);
  assert_int_equal(c->finished_to_keep, 0);
  assert_true(c->poll_interval == 0.1);
  assert_int_equal(c->http_port, 0);
  assert_true(c->cancel_grace == 0.0);
  assert_true(c->shutdown_grace == 0.5);
  assert_true(c->max_upload == 1024);
  assert_true(c->job_memory_limit == 512LL << 20);
  assert_true(c->job_log_limit == 10240);
  assert_true(c->job_cpu_limit == 1.5);
  assert_int_equal(c->job_max_procs, 64);
  assert_string_equal(c->job_limits, "rlimit");
  config_release(c);

  static const struct {
    const char *text;
    long long value;
  } sizes[] = {{"1k", 1024}, {"3K", 3072}, {"1m", 1 << 20}, {"5G", 5LL << 30}, {"4096", 4096}};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    char set[64];
    snprintf(set, sizeof(set), "spiderd.max_upload=%s", sizes[i].text);
    char *argv[] = {"--set", set};
    assert_int_equal(load(f, 2, argv), 0);
    assert_true(c->max_upload == sizes[i].value);
    config_release(c);
  }
}

/* ---- environment ---- */

static void test_env_overrides(void **state) {
  struct fx *f = *state;
  free(write_file(f, "a.conf",
                  "[scrapyd]\n"
                  "bind_address = 10.0.0.1\n"
                  "http_port = 7000\n"
                  "max_proc = 2\n"
                  "logs_dir = /var/log/x\n"
                  "username = fileuser\n"));
  use_files(f, "a.conf", NULL);
  setenv("SCRAPYD_BIND_ADDRESS", "0.0.0.0", 1);
  setenv("SCRAPYD_HTTP_PORT", "7001", 1);
  setenv("SCRAPYD_UNIX_SOCKET_PATH", "/run/spiderd.sock", 1);
  setenv("SCRAPYD_USERNAME", "alice", 1);
  setenv("SCRAPYD_PASSWORD", "s3cret", 1);
  setenv("SPIDERD_MAX_PROC", "9", 1);
  setenv("SPIDERD_STORE", "postgresql://db/spiderd", 1);
  setenv("SPIDERD_LOGS_DIR", "", 1);
  setenv("SPIDERD_DEBUG", "yes", 1);
  setenv("SPIDERD_CANCEL_GRACE", "2.5", 1);
  setenv("SPIDERD_DRAIN_GRACE", "0", 1);
  setenv("SPIDERD_JOB_RETRIES", "3", 1);
  setenv("SPIDERD_HEARTBEAT_TIMEOUT", "0", 1);
  setenv("SPIDERD_LOG_LEVEL", "debug", 1);
  setenv("SPIDERD_UI_DIR", "/usr/share/spiderd/ui", 1);
  /* not config keys: spiders get these, they must not disturb the daemon */
  setenv("SPIDERD_URL", "http://x", 1);
  setenv("SPIDERD_JOB", "abc", 1);
  assert_int_equal(load(f, 0, NULL), 0);
  config_t *c = &f->c;
  assert_string_equal(c->bind_address, "0.0.0.0");
  assert_int_equal(c->http_port, 7001);
  assert_string_equal(c->unix_socket_path, "/run/spiderd.sock");
  assert_string_equal(c->username, "alice");
  assert_string_equal(c->password, "s3cret");
  assert_int_equal(c->max_proc, 9);
  assert_string_equal(c->store, "postgresql://db/spiderd");
  assert_string_equal(c->logs_dir, "");
  assert_int_equal(c->debug, 1);
  assert_true(c->cancel_grace == 2.5);
  assert_true(c->drain_grace == 0.0);
  assert_int_equal(c->job_retries, 3);
  assert_true(c->heartbeat_timeout == 0.0);
  assert_string_equal(c->log_level, "debug");
  assert_string_equal(c->ui_dir, "/usr/share/spiderd/ui");
  config_release(c);

  /* SPIDERD_<KEY> comes after SCRAPYD_*; an empty SCRAPYD_* is unset */
  setenv("SPIDERD_HTTP_PORT", "7002", 1);
  setenv("SCRAPYD_BIND_ADDRESS", "", 1);
  assert_int_equal(load(f, 0, NULL), 0);
  assert_int_equal(c->http_port, 7002);
  assert_string_equal(c->bind_address, "10.0.0.1");
}

/* ---- flags ---- */

static void test_flags(void **state) {
  struct fx *f = *state;
  char *a = write_file(f, "a.conf", "[scrapyd]\nmax_proc = 2\nnode_name = file\n");
  char *extra1 = write_file(f, "extra1.conf", "[scrapyd]\njobs_to_keep = 11\nmax_proc = 3\n");
  char *extra2 = write_file(f, "extra2.conf", "[scrapyd]\njobs_to_keep = 12\n");
  use_files(f, "a.conf", NULL);
  setenv("SPIDERD_NODE_NAME", "env", 1);
  setenv("SPIDERD_PYTHON", "/env/python", 1);
  char conf1[PATH_MAX + 16];
  snprintf(conf1, sizeof(conf1), "--config=%s", extra1);
  char *argv[] = {
      conf1,
      "--config", extra2,
      "--bind", "::0",
      "--port=7100",
      "--unix-socket", "/tmp/s.sock",
      "--store=redis://r/0",
      "--python", "/opt/py/bin/python3",
      "--max-proc", "7",
      "--eggs-dir=/e",
      "--logs-dir", "/l",
      "--items-dir", "s3://bucket/items",
      "--dbs-dir", "/d",
      "--node-name=flag",
      "--log-file", "/var/log/spiderd.log",
      "--log-level=error",
      "--pidfile=",
      "--ui-dir", "/u",
      "--set", "spiderd.shutdown_grace=3",
      "--set=scrapyd.finished_to_keep=0",
      "--set", "scrapyd.password=a=b",
  };
  assert_int_equal(load(f, (int)(sizeof(argv) / sizeof(argv[0])), argv), 0);
  config_t *c = &f->c;
  assert_string_equal(c->bind_address, "::0");
  assert_int_equal(c->http_port, 7100);
  assert_string_equal(c->unix_socket_path, "/tmp/s.sock");
  assert_string_equal(c->store, "redis://r/0");
  assert_string_equal(c->python, "/opt/py/bin/python3");
  assert_int_equal(c->max_proc, 7);
  assert_string_equal(c->eggs_dir, "/e");
  assert_string_equal(c->logs_dir, "/l");
  assert_string_equal(c->items_dir, "s3://bucket/items");
  assert_string_equal(c->dbs_dir, "/d");
  assert_string_equal(c->node_name, "flag");
  assert_string_equal(c->log_file, "/var/log/spiderd.log");
  assert_string_equal(c->log_level, "error");
  assert_string_equal(c->pidfile, "");
  assert_string_equal(c->ui_dir, "/u");
  assert_true(c->shutdown_grace == 3.0);
  assert_int_equal(c->finished_to_keep, 0);
  assert_string_equal(c->password, "a=b");
  /* --config files come after the list, in order */
  assert_int_equal(c->jobs_to_keep, 12);
  assert_int_equal(c->nsources, 3);
  assert_string_equal(c->sources[0], a);
  assert_string_equal(c->sources[1], extra1);
  assert_string_equal(c->sources[2], extra2);
  config_release(c);

  /* environment beats --config files, flags beat the environment */
  char *argv2[] = {"--config", extra1};
  setenv("SPIDERD_MAX_PROC", "4", 1);
  assert_int_equal(load(f, 2, argv2), 0);
  assert_int_equal(c->max_proc, 4);
  assert_string_equal(c->node_name, "env");
  assert_string_equal(c->python, "/env/python");
  free(a);
  free(extra1);
  free(extra2);
}

/* ---- [services] and [settings] ---- */

static void test_services(void **state) {
  struct fx *f = *state;
  free(write_file(f, "a.conf",
                  "[services]\n"
                  "schedule.json =\n"
                  "cancel.json =\n"
                  "custom.json = mypkg.Custom\n"));
  free(write_file(f, "b.conf",
                  "[services]\n"
                  "schedule.json = scrapyd.webservice.Schedule\n"
                  "listjobs.json = mypkg.ListJobs\n"));
  use_files(f, "a.conf", "b.conf", NULL);
  char *argv[] = {"--set", "services.daemonstatus.json=", "--set", "services.flag.json=x.Y"};
  assert_int_equal(load(f, 4, argv), 0);
  config_t *c = &f->c;
  assert_false(config_service_enabled(c, "cancel.json"));
  assert_false(config_service_enabled(c, "daemonstatus.json"));
  assert_true(config_service_enabled(c, "schedule.json"));
  assert_true(config_service_enabled(c, "custom.json"));
  assert_true(config_service_enabled(c, "flag.json"));
  /* a re-enabled service keeps its place, as in ConfigParser */
  const char *order[] = {"addversion.json",   "schedule.json",    "status.json",
                         "listprojects.json", "listversions.json", "listspiders.json",
                         "delproject.json",   "delversion.json",  "listjobs.json",
                         "custom.json",       "flag.json"};
  assert_int_equal(c->nservices, 11);
  for (size_t i = 0; i < 11; i++) assert_string_equal(c->services[i].name, order[i]);
  assert_string_equal(c->services[8].value, "mypkg.ListJobs");
  assert_string_equal(c->services[9].value, "mypkg.Custom");
}

static void test_settings(void **state) {
  struct fx *f = *state;
  free(write_file(f, "a.conf",
                  "[settings]\n"
                  "alpha = alpha.settings\n"
                  "beta = beta.settings\n"
                  "empty =\n"));
  free(write_file(f, "b.conf",
                  "[settings]\n"
                  "gamma = gamma.settings\n"
                  "alpha = alpha.other_settings\n"));
  use_files(f, "a.conf", "b.conf", NULL);
  char *argv[] = {"--set", "settings.delta=delta.settings"};
  assert_int_equal(load(f, 2, argv), 0);
  config_t *c = &f->c;
  assert_int_equal(c->nsettings, 5);
  const char *names[] = {"alpha", "beta", "empty", "gamma", "delta"};
  for (size_t i = 0; i < 5; i++) assert_string_equal(c->settings[i].name, names[i]);
  assert_string_equal(config_project_settings(c, "alpha"), "alpha.other_settings");
  assert_string_equal(config_project_settings(c, "beta"), "beta.settings");
  assert_string_equal(config_project_settings(c, "empty"), "");
  assert_string_equal(config_project_settings(c, "delta"), "delta.settings");
  assert_null(config_project_settings(c, "zeta"));
}

/* ---- derived values ---- */

static void test_retention(void **state) {
  struct fx *f = *state;
  free(write_file(f, "a.conf",
                  "[spiderd]\n"
                  "history_per_spider = 3\n"
                  "history_days = 7.5\n"
                  "events_days = 0\n"
                  "janitor_interval = 0.5\n"
                  "[retention]\n"
                  "News/FrontPage = 500 7\n"
                  "news = 10\n"
                  "shop/price =  0   0 \n"));
  free(write_file(f, "b.conf",
                  "[retention]\n"
                  "news = 20 3\n"
                  "news/frontpage = 1\n"));
  use_files(f, "a.conf", "b.conf", NULL);
  char *argv[] = {"--set", "retention.shop/Toys=4 1.5"};
  assert_int_equal(load(f, 2, argv), 0);
  config_t *c = &f->c;
  assert_int_equal(c->history_per_spider, 3);
  assert_true(c->history_days == 7.5);
  assert_true(c->events_days == 0.0);
  assert_true(c->janitor_interval == 0.5);
  /* Names keep their case; a later file's key replaces the earlier entry
   * in place; no DAYS is "not given" (< 0), 0 is "forever". */
  assert_int_equal(c->nretention, 5);
  assert_string_equal(c->retention[0].project, "News");
  assert_string_equal(c->retention[0].spider, "FrontPage");
  assert_int_equal(c->retention[0].count, 500);
  assert_true(c->retention[0].days == 7.0);
  assert_string_equal(c->retention[1].project, "news");
  assert_null(c->retention[1].spider);
  assert_int_equal(c->retention[1].count, 20);
  assert_true(c->retention[1].days == 3.0);
  assert_string_equal(c->retention[2].spider, "price");
  assert_int_equal(c->retention[2].count, 0);
  assert_true(c->retention[2].days == 0.0);
  assert_string_equal(c->retention[3].spider, "frontpage");
  assert_int_equal(c->retention[3].count, 1);
  assert_true(c->retention[3].days < 0);
  assert_string_equal(c->retention[4].spider, "Toys");
  assert_true(c->retention[4].days == 1.5);
  setenv("SPIDERD_HISTORY_PER_SPIDER", "8", 1);
  config_release(c);
  assert_int_equal(load(f, 0, NULL), 0);
  assert_int_equal(c->history_per_spider, 8);
  unsetenv("SPIDERD_HISTORY_PER_SPIDER");
}

static void test_concurrency(void **state) {
  struct fx *f = *state;
  free(write_file(f, "a.conf",
                  "[concurrency]\n"
                  "News/FrontPage = 1\n"
                  "news = 4\n"));
  free(write_file(f, "b.conf", "[concurrency]\nnews = 6\n"));
  use_files(f, "a.conf", "b.conf", NULL);
  char *argv[] = {"--set", "concurrency.shop/toys=2"};
  assert_int_equal(load(f, 2, argv), 0);
  config_t *c = &f->c;
  assert_int_equal(c->nlimits, 3);
  assert_string_equal(c->limits[0].project, "News");
  assert_string_equal(c->limits[0].spider, "FrontPage");
  assert_int_equal(c->limits[0].max, 1);
  assert_string_equal(c->limits[1].project, "news");
  assert_null(c->limits[1].spider);
  assert_int_equal(c->limits[1].max, 6); /* the later file's value, in place */
  assert_string_equal(c->limits[2].spider, "toys");
  config_release(c);

  const char *bad[] = {"news = 0\n", "news = two\n", "news = 1 2\n", "../x = 1\n",
                       "news/ = 1\n"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
    char text[128];
    snprintf(text, sizeof(text), "[concurrency]\n%s", bad[i]);
    free(write_file(f, "c.conf", text));
    use_files(f, "c.conf", NULL);
    assert_int_not_equal(load(f, 0, NULL), 0);
    assert_non_null(strstr(f->err, "[concurrency]"));
  }
}

/* [hooks]: defaults, a file, a multi-line command, --set, the environment
 * (SPIDERD_HOOKS_<KEY>, apart from spiderd's own keys), and refusals. */
static void test_hooks(void **state) {
  struct fx *f = *state;
  use_files(f, NULL);
  assert_int_equal(load(f, 0, NULL), 0);
  config_t *c = &f->c;
  assert_string_equal(c->hook_job_queued, "");
  assert_string_equal(c->hook_job_ended, "");
  assert_true(c->hook_timeout == 30.0);
  assert_int_equal(c->hook_concurrency, 4);
  config_release(c);

  free(write_file(f, "a.conf",
                  "[hooks]\n"
                  "JOB_QUEUED = /usr/local/bin/notify-queued\n"
                  "job_started = logger started $SPIDERD_JOB\n"
                  "job_finished = echo one\n"
                  "  echo two\n"
                  "job_failed = %(job_queued)s --failed\n"
                  "timeout = 2.5\n"
                  "concurrency = 1\n"));
  free(write_file(f, "b.conf", "[hooks]\njob_lost = page-oncall\n"));
  use_files(f, "a.conf", "b.conf", NULL);
  setenv("SPIDERD_HOOKS_CONCURRENCY", "2", 1);
  setenv("SPIDERD_HOOKS_JOB_CANCELLED", "echo cancelled", 1);
  setenv("SPIDERD_TIMEOUT", "99", 1); /* not a key: the hooks' have HOOKS_ */
  char *argv[] = {"--set", "hooks.job_ended=echo ended"};
  assert_int_equal(load(f, 2, argv), 0);
  assert_string_equal(c->hook_job_queued, "/usr/local/bin/notify-queued");
  assert_string_equal(c->hook_job_started, "logger started $SPIDERD_JOB");
  assert_string_equal(c->hook_job_finished, "echo one\necho two");
  assert_string_equal(c->hook_job_failed, "/usr/local/bin/notify-queued --failed");
  assert_string_equal(c->hook_job_lost, "page-oncall");
  assert_string_equal(c->hook_job_cancelled, "echo cancelled");
  assert_string_equal(c->hook_job_ended, "echo ended");
  assert_true(c->hook_timeout == 2.5);
  assert_int_equal(c->hook_concurrency, 2);
  config_release(c);
  unsetenv("SPIDERD_HOOKS_CONCURRENCY");
  unsetenv("SPIDERD_HOOKS_JOB_CANCELLED");
  unsetenv("SPIDERD_TIMEOUT");

  expect_file_error(f, "hooks", "timeout", "0", "'0' is out of range (must be > 0)");
  expect_file_error(f, "hooks", "timeout", "soon", "'soon' is not a number");
  expect_file_error(f, "hooks", "concurrency", "0", "'0' is out of range (must be >= 1)");
  expect_file_error(f, "hooks", "concurrency", "1.5", "'1.5' is not an integer");
  expect_file_error(f, "hooks", "on_spider_closed", "x",
                    "unknown key (job_queued, job_started, job_finished, job_failed, "
                    "job_cancelled, job_lost, job_ended, timeout or concurrency)");
  expect_file_error(f, "spiderd", "job_finished", "x", "belongs in [hooks]");
  expect_file_error(f, "hooks", "max_proc", "4", "belongs in [scrapyd]");
  use_files(f, NULL);
  char *bad[] = {"--set", "hooks.concurrency=-1"};
  expect_error(f, 2, bad, "flag --set: [hooks] concurrency: '-1' is out of range (must be >= 1)");
}

static void test_store_follows_dbs_dir(void **state) {
  struct fx *f = *state;
  config_t *c = &f->c;
  free(write_file(f, "a.conf", "[scrapyd]\ndbs_dir = /var/lib/spiderd/\n"));
  use_files(f, "a.conf", NULL);
  assert_int_equal(load(f, 0, NULL), 0);
  assert_string_equal(c->store, "sqlite:/var/lib/spiderd/spiderd.db");
  config_release(c);

  /* a later source moves it too */
  char *argv[] = {"--dbs-dir", "/elsewhere"};
  assert_int_equal(load(f, 2, argv), 0);
  assert_string_equal(c->store, "sqlite:/elsewhere/spiderd.db");
  config_release(c);

  setenv("SPIDERD_DBS_DIR", ":memory:", 1);
  assert_int_equal(load(f, 0, NULL), 0);
  assert_string_equal(c->store, "sqlite::memory:");
  config_release(c);
  unsetenv("SPIDERD_DBS_DIR");

  /* an explicit store is kept whatever dbs_dir says */
  free(write_file(f, "b.conf", "[spiderd]\nstore = sqlite:/x.db\n"));
  use_files(f, "b.conf", NULL);
  assert_int_equal(load(f, 2, argv), 0);
  assert_string_equal(c->store, "sqlite:/x.db");
  assert_string_equal(c->dbs_dir, "/elsewhere");
}

static void test_max_proc(void **state) {
  struct fx *f = *state;
  config_t *c = &f->c;
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu < 1) ncpu = 1;
  char *argv[] = {"--set", "scrapyd.max_proc_per_cpu=3"};
  assert_int_equal(load(f, 2, argv), 0);
  assert_int_equal(c->max_proc, 0);
  assert_int_equal(config_max_proc(c), (int)ncpu * 3);
  config_release(c);
  char *argv2[] = {"--max-proc", "5"};
  assert_int_equal(load(f, 2, argv2), 0);
  assert_int_equal(config_max_proc(c), 5);
}

static void test_items_remote(void **state) {
  struct fx *f = *state;
  config_t *c = &f->c;
  static const struct {
    const char *in, *items_dir;
    int remote;
  } cases[] = {
      {"", "", 0},
      {"items", "items", 0},
      {"/srv/items", "/srv/items", 0},
      {"s3://bucket/items", "s3://bucket/items", 1},
      {"ftp://user:pass@host/items", "ftp://user:pass@host/items", 1},
      {"gs+x.y-z://b", "gs+x.y-z://b", 1},
      {"file:///srv/items", "/srv/items", 0},
      {"FILE://localhost/srv/i", "/srv/i", 0},
      {"c:relative", "c:relative", 0},
      {"3s://x", "3s://x", 0},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    char *argv[] = {"--items-dir", (char *)cases[i].in};
    assert_int_equal(load(f, 2, argv), 0);
    assert_string_equal(c->items_dir, cases[i].items_dir);
    assert_int_equal(config_items_remote(c), cases[i].remote);
    config_release(c);
  }
}

static void test_release_reuse(void **state) {
  struct fx *f = *state;
  config_t *c = &f->c;
  free(write_file(f, "a.conf", "[settings]\np = q\n"));
  use_files(f, "a.conf", NULL);
  assert_int_equal(load(f, 0, NULL), 0);
  config_release(c);
  assert_null(c->services);
  assert_null(c->sources);
  assert_int_equal(c->nsettings, 0);
  config_release(c);
  /* a struct with garbage is fine: config_load need not see it initialised */
  memset(c, 0xa5, sizeof(*c));
  assert_int_equal(load(f, 0, NULL), 0);
  assert_int_equal(c->nsources, 1);
  assert_string_equal(config_project_settings(c, "p"), "q");
}

/* ---- errors ---- */

static void test_error_values(void **state) {
  struct fx *f = *state;
  expect_file_error(f, "scrapyd", "max_proc", "abc", "'abc' is not an integer");
  expect_file_error(f, "scrapyd", "max_proc", "1.5", "'1.5' is not an integer");
  expect_file_error(f, "scrapyd", "max_proc", "-1", "'-1' is out of range (must be >= 0)");
  expect_file_error(f, "scrapyd", "max_proc", "99999999999", "'99999999999' is too large");
  expect_file_error(f, "scrapyd", "max_proc_per_cpu", "0",
                    "'0' is out of range (must be >= 1)");
  expect_file_error(f, "scrapyd", "jobs_to_keep", "-3", "'-3' is out of range (must be >= 0)");
  expect_file_error(f, "scrapyd", "finished_to_keep", "-1",
                    "'-1' is out of range (must be >= 0)");
  expect_file_error(f, "scrapyd", "poll_interval", "0", "'0' is out of range (must be > 0)");
  expect_file_error(f, "scrapyd", "poll_interval", "soon", "'soon' is not a number");
  expect_file_error(f, "scrapyd", "poll_interval", "nan", "'nan' is not a finite number");
  expect_file_error(f, "scrapyd", "http_port", "65536", "'65536' is not a port (0-65535)");
  expect_file_error(f, "scrapyd", "http_port", "-1", "'-1' is not a port (0-65535)");
  expect_file_error(f, "scrapyd", "debug", "maybe",
                    "'maybe' is not a boolean (1/yes/true/on or 0/no/false/off)");
  expect_file_error(f, "scrapyd", "username", "a:b", "'a:b' must not contain ':'");
  expect_file_error(f, "spiderd", "cancel_grace", "-1", "'-1' is out of range (must be >= 0)");
  expect_file_error(f, "spiderd", "shutdown_grace", "x", "'x' is not a number");
  expect_file_error(f, "spiderd", "job_timeout", "-5", "'-5' is out of range (must be >= 0)");
  expect_file_error(f, "spiderd", "job_retries", "2.5", "'2.5' is not an integer");
  expect_file_error(f, "spiderd", "retry_backoff", "soon", "'soon' is not a number");
  expect_file_error(f, "spiderd", "heartbeat_interval", "0", "'0' is out of range (must be > 0)");
  expect_file_error(f, "spiderd", "heartbeat_timeout", "-1", "'-1' is out of range (must be >= 0)");
  expect_file_error(f, "spiderd", "max_upload", "512", "'512' is out of range (must be >= 1024)");
  expect_file_error(f, "spiderd", "http_timeout", "0", "'0' is out of range (must be >= 1)");
  expect_file_error(f, "spiderd", "http_timeout", "1.5", "'1.5' is not an integer");
  expect_file_error(f, "spiderd", "http_connections", "0", "'0' is out of range (must be >= 1)");
  expect_file_error(f, "spiderd", "max_upload", "10T",
                    "'10T' is not a size (bytes, or a number with a K, M or G suffix)");
  expect_file_error(f, "spiderd", "max_upload", "99999999999G", "'99999999999G' is too large");
  expect_file_error(f, "spiderd", "log_level", "verbose",
                    "'verbose' is not one of debug, info, warning, error");
  expect_file_error(f, "spiderd", "job_memory_limit", "lots",
                    "'lots' is not a size (bytes, or a number with a K, M or G suffix)");
  expect_file_error(f, "spiderd", "job_log_limit", "-1M", "'-1M' is out of range (must be >= 0)");
  expect_file_error(f, "spiderd", "job_cpu_limit", "-1", "'-1' is out of range (must be >= 0)");
  expect_file_error(f, "spiderd", "job_max_procs", "x", "'x' is not an integer");
  expect_file_error(f, "spiderd", "job_limits", "cgroups",
                    "'cgroups' is not one of auto, cgroup, rlimit, off");
  expect_file_error(f, "spiderd", "history_per_spider", "-1",
                    "'-1' is out of range (must be >= 0)");
  expect_file_error(f, "spiderd", "history_days", "week", "'week' is not a number");
  expect_file_error(f, "spiderd", "events_days", "-2", "'-2' is out of range (must be >= 0)");
  expect_file_error(f, "spiderd", "janitor_interval", "0", "'0' is out of range (must be > 0)");
  expect_file_error(f, "retention", "news/front", "many",
                    "count 'many' is not an integer >= 0 (the jobs kept; 0 = no limit)");
  expect_file_error(f, "retention", "news", "-1",
                    "count '-1' is not an integer >= 0 (the jobs kept; 0 = no limit)");
  expect_file_error(f, "retention", "news", "5 -2",
                    "days '-2' is not a number >= 0 (0 = forever)");
  expect_file_error(f, "retention", "news", "5 soon",
                    "days 'soon' is not a number >= 0 (0 = forever)");
  expect_file_error(f, "retention", "news", "5 7 9", "'5 7 9' is not COUNT [DAYS] (e.g. '500 7')");
  expect_file_error(f, "retention", "news", "", "'' is not COUNT [DAYS] (e.g. '500 7')");
  expect_file_error(f, "retention", "news/a/b", "5",
                    "not PROJECT or PROJECT/SPIDER: spider 'a/b' must not contain '/' or '..'");
  expect_file_error(f, "retention", "news/", "5",
                    "not PROJECT or PROJECT/SPIDER: spider must not be empty");
  expect_file_error(f, "spiderd", "max_prc", "4", "unknown key");
  expect_file_error(f, "spiderd", "max_proc", "4", "belongs in [scrapyd]");
  expect_file_error(f, "scrapyd", "store", "postgresql://db/x", "belongs in [spiderd]");
  expect_file_error(f, "scrapyd", "ui_dir", "/srv/ui", "belongs in [spiderd]");
  expect_file_error(f, "scrapyd", "logs_dir", "50%", "'50%': '%' must be followed by '%' or '(' "
                                                     "(write %% for '%')");
  expect_file_error(f, "scrapyd", "logs_dir", "%(nothere)s/x",
                    "'%(nothere)s/x' refers to 'nothere', which is not set in [scrapyd]");
  expect_file_error(f, "scrapyd", "logs_dir", "%(open",
                    "'%(open': bad interpolation reference (write %(name)s, or %% for '%')");
  expect_file_error(f, "scrapyd", "logs_dir", "%(logs_dir)s",
                    "'%(logs_dir)s': interpolation nested deeper than 10");
}

static void test_error_env_and_flags(void **state) {
  struct fx *f = *state;
  setenv("SCRAPYD_HTTP_PORT", "99999", 1);
  expect_error(f, 0, NULL, "environment SCRAPYD_HTTP_PORT: '99999' is not a port (0-65535)");
  unsetenv("SCRAPYD_HTTP_PORT");
  setenv("SCRAPYD_USERNAME", "x:y", 1);
  expect_error(f, 0, NULL, "environment SCRAPYD_USERNAME: 'x:y' must not contain ':'");
  unsetenv("SCRAPYD_USERNAME");
  setenv("SPIDERD_MAX_PROC", "many", 1);
  expect_error(f, 0, NULL, "environment SPIDERD_MAX_PROC: 'many' is not an integer");
  unsetenv("SPIDERD_MAX_PROC");
  setenv("SPIDERD_DEBUG", "", 1);
  expect_error(f, 0, NULL,
               "environment SPIDERD_DEBUG: '' is not a boolean (1/yes/true/on or 0/no/false/off)");
  unsetenv("SPIDERD_DEBUG");

  char *a1[] = {"--max-proc", "abc"};
  expect_error(f, 2, a1, "flag --max-proc: 'abc' is not an integer");
  char *a2[] = {"--port=http"};
  expect_error(f, 1, a2, "flag --port: 'http' is not a port (0-65535)");
  char *a3[] = {"--max-procs", "3"};
  expect_error(f, 2, a3, "unknown option '--max-procs'");
  char *a4[] = {"--x=1"};
  expect_error(f, 1, a4, "unknown option '--x'");
  char *a5[] = {"--port", "1", "--store"};
  expect_error(f, 3, a5, "option '--store' requires a value");
  char *a6[] = {"serve"};
  expect_error(f, 1, a6, "unexpected argument 'serve'");
  char *a7[] = {"-p", "1"};
  expect_error(f, 2, a7, "unknown option '-p'");
  char *a8[] = {"--set", "scrapyd.max_proc=abc"};
  expect_error(f, 2, a8, "flag --set: [scrapyd] max_proc: 'abc' is not an integer");
  char *a9[] = {"--set", "spiderd.nope=1"};
  expect_error(f, 2, a9, "flag --set: [spiderd] nope: unknown key");
  char *a9b[] = {"--set", "scrapyd.log_level=debug"};
  expect_error(f, 2, a9b, "flag --set: [scrapyd] log_level: belongs in [spiderd]");
  char *a10[] = {"--set", "max_proc=1"};
  expect_error(f, 2, a10, "flag --set: 'max_proc=1' is not SECTION.KEY=VALUE");
  char *a11[] = {"--set", "scrapyd.max_proc"};
  expect_error(f, 2, a11, "flag --set: 'scrapyd.max_proc' is not SECTION.KEY=VALUE");
  char *a12[] = {"--set", "deploy.url=x"};
  expect_error(f, 2, a12,
               "flag --set: unknown section 'deploy' (scrapyd, spiderd, services, settings, "
                   "retention, concurrency or hooks)");
  char *a13[] = {"--log-level", "loud"};
  expect_error(f, 2, a13, "flag --log-level: 'loud' is not one of debug, info, warning, error");
  char *missing = path_in(f, "nope.conf");
  char *a14[] = {"--config", missing};
  char msg[PATH_MAX + 64];
  snprintf(msg, sizeof(msg), "%s: cannot read: No such file or directory", missing);
  expect_error(f, 2, a14, msg);
  free(missing);
}

static void test_error_syntax(void **state) {
  struct fx *f = *state;
  char msg[PATH_MAX + 256];
  char *p = write_file(f, "s.conf", "[scrapyd]\nmax_proc = 1\nthis line is broken\n");
  use_files(f, "s.conf", NULL);
  snprintf(msg, sizeof(msg),
           "%s:3: syntax error: 'this line is broken' is neither a [section] nor a "
           "'name = value' line",
           p);
  expect_error(f, 0, NULL, msg);
  free(p);

  p = write_file(f, "s.conf", "[scrapyd\nmax_proc = 1\n");
  snprintf(msg, sizeof(msg),
           "%s:1: syntax error: '[scrapyd' is neither a [section] nor a 'name = value' line", p);
  expect_error(f, 0, NULL, msg);
  free(p);

  p = write_file(f, "s.conf", "max_proc = 1\n[scrapyd]\n");
  snprintf(msg, sizeof(msg), "%s:1: 'max_proc' comes before any [section]", p);
  expect_error(f, 0, NULL, msg);
  free(p);

  p = write_file(f, "s.conf", "[scrapyd]\nmax_proc = 1\n\n[spiderd]\n[scrapyd]\nMax_Proc = 2\n");
  snprintf(msg, sizeof(msg), "%s:6: [scrapyd] max_proc: set twice (first on line 2)", p);
  expect_error(f, 0, NULL, msg);
  free(p);

  /* a line of any length is read whole (a long URL, a long path) */
  char line[4000];
  memset(line, 'x', sizeof(line));
  memcpy(line, "[scrapyd]\nlogs_dir = /", 22);
  line[sizeof(line) - 2] = '\n';
  line[sizeof(line) - 1] = '\0';
  free(write_file(f, "s.conf", line));
  use_files(f, "s.conf", NULL);
  assert_int_equal(load(f, 0, NULL), 0);
  assert_int_equal(strlen(f->c.logs_dir), sizeof(line) - 2 - 21);
  config_release(&f->c);

  /* as with Scrapyd, only the merged value counts: a bad value that a later
   * file overrides is no error, one that stays names its file */
  free(write_file(f, "s.conf", "[scrapyd]\nmax_proc = x\n"));
  p = write_file(f, "t.conf", "[scrapyd]\nmax_proc = 3\nhttp_port = x\n");
  use_files(f, "s.conf", "t.conf", NULL);
  snprintf(msg, sizeof(msg), "%s: [scrapyd] http_port: 'x' is not a port (0-65535)", p);
  expect_error(f, 0, NULL, msg);
  free(write_file(f, "t.conf", "[scrapyd]\nmax_proc = 3\n"));
  assert_int_equal(load(f, 0, NULL), 0);
  assert_int_equal(f->c.max_proc, 3);
  free(p);
}

/* Only a missing file is skipped; any other failure to read one is an error. */
static void test_error_unreadable(void **state) {
  struct fx *f = *state;
  char msg[PATH_MAX + 64];
  char *loop = path_in(f, "loop.conf");
  assert_int_equal(symlink(loop, loop), 0);
  use_files(f, "loop.conf", NULL);
  snprintf(msg, sizeof(msg), "%s: cannot read: Too many levels of symbolic links", loop);
  expect_error(f, 0, NULL, msg);
  free(loop);

  /* a path through a regular file is as missing as a missing one */
  free(write_file(f, "plain", "[scrapyd]\n"));
  use_files(f, "plain/scrapyd.conf", NULL);
  assert_int_equal(load(f, 0, NULL), 0);
  assert_int_equal(f->c.nsources, 0);
  config_release(&f->c);

  if (geteuid() == 0) return; /* root reads mode 000 files */
  char *p = write_file(f, "locked.conf", "[scrapyd]\n");
  assert_int_equal(chmod(p, 0), 0);
  use_files(f, "locked.conf", NULL);
  snprintf(msg, sizeof(msg), "%s: cannot read: Permission denied", p);
  expect_error(f, 0, NULL, msg);
  assert_int_equal(chmod(p, 0644), 0);
  free(p);
}

/* The message buffer may be small or absent; the code is still returned. */
static void test_error_buffer(void **state) {
  struct fx *f = *state;
  char *argv[] = {"--nope"};
  char small[8];
  assert_int_equal(config_load(&f->c, 1, argv, small, sizeof(small)), SPD_ECONFIG);
  assert_string_equal(small, "unknown");
  assert_int_equal(config_load(&f->c, 1, argv, NULL, 0), SPD_ECONFIG);
}

/* Passwords in store URLs are shown as *** in every message. */
static void test_redact_url(void **state) {
  (void)state;
  char out[256];
  static const char *const cases[][2] = {
      {"postgresql://u:pw@h:5432/db?schema=s", "postgresql://u:***@h:5432/db?schema=s"},
      {"redis://:p%40ss@h:6379/0", "redis://:***@h:6379/0"},
      {"redis://user:p@ss@h/0", "redis://user:***@h/0"},
      {"postgresql://u@h/db?sslmode=require&password=x%2Fy&a=b",
       "postgresql://u@h/db?sslmode=require&password=***&a=b"},
      {"postgresql://h/db?password=abc", "postgresql://h/db?password=***"},
      {"postgresql://u@h/db?sslmode=verify-full", "postgresql://u@h/db?sslmode=verify-full"},
      {"sqlite:dbs/spiderd.db", "sqlite:dbs/spiderd.db"},
      {"redis://h/0?mypassword=1", "redis://h/0?mypassword=1"},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    config_redact_url(cases[i][0], out, sizeof(out));
    assert_string_equal(out, cases[i][1]);
  }
}

/* The store password joins the URL as password= (escaped), unless the URL
 * has one; it leaves the environment; a missing file is named. */
static void test_store_password(void **state) {
  struct fx *f = *state;
  char *pw = write_file(f, "pw", "a b/&%\n");
  char *conf = NULL;
  assert_true(asprintf(&conf, "[spiderd]\nstore = postgresql://u@h/db?schema=s\n"
                              "store_password_file = %s\n", pw) > 0);
  free(write_file(f, "s.conf", conf));
  use_files(f, "s.conf", NULL);
  assert_int_equal(load(f, 0, NULL), 0);
  assert_int_equal(config_load_secrets(&f->c, f->err, sizeof(f->err)), 0);
  assert_string_equal(f->c.store_password, "a b/&%");
  assert_string_equal(f->c.store, "postgresql://u@h/db?schema=s&password=a%20b%2F%26%25");
  config_release(&f->c);

  setenv("SPIDERD_STORE_PASSWORD", "envpw", 1);
  char *argv[] = {"--store", "redis://:urlpw@h/0"};
  assert_int_equal(load(f, 2, argv), 0);
  assert_int_equal(config_load_secrets(&f->c, f->err, sizeof(f->err)), 0);
  assert_null(getenv("SPIDERD_STORE_PASSWORD"));
  assert_string_equal(f->c.store, "redis://:urlpw@h/0"); /* the URL's own wins */
  config_release(&f->c);

  free(conf);
  assert_true(asprintf(&conf, "[spiderd]\nstore_password_file = %s.nope\n", pw) > 0);
  free(write_file(f, "s.conf", conf));
  assert_int_equal(load(f, 0, NULL), 0);
  assert_int_equal(config_load_secrets(&f->c, f->err, sizeof(f->err)), SPD_ECONFIG);
  assert_non_null(strstr(f->err, "store_password_file"));
  assert_non_null(strstr(f->err, "No such file"));
  config_release(&f->c);
  free(conf);
  free(pw);
}

/* https_cert and https_key go together; a rejected secret is not echoed. */
static void test_https_keys(void **state) {
  struct fx *f = *state;
  use_files(f, NULL);
  char *argv[] = {"--set", "spiderd.https_cert=/c.pem"};
  expect_error(f, 2, argv, "[spiderd] https_cert and https_key go together: https_cert is "
                           "set, https_key is not");
  char *argv2[] = {"--set", "spiderd.https_cert=/c.pem", "--set", "spiderd.https_key=/k.pem"};
  assert_int_equal(load(f, 4, argv2), 0);
  assert_string_equal(f->c.https_priorities, "NORMAL:-VERS-TLS1.0:-VERS-TLS1.1");
  config_release(&f->c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_redact_url, setup, teardown),
      cmocka_unit_test_setup_teardown(test_store_password, setup, teardown),
      cmocka_unit_test_setup_teardown(test_https_keys, setup, teardown),
      cmocka_unit_test_setup_teardown(test_defaults, setup, teardown),
      cmocka_unit_test_setup_teardown(test_file_order_and_override, setup, teardown),
      cmocka_unit_test_setup_teardown(test_confd_sorted, setup, teardown),
      cmocka_unit_test_setup_teardown(test_empty_file_list, setup, teardown),
      cmocka_unit_test_setup_teardown(test_default_list_and_scrapy_cfg, setup, teardown),
      cmocka_unit_test_setup_teardown(test_multiline_interpolation_case, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unknown_scrapyd_keys_ignored, setup, teardown),
      cmocka_unit_test_setup_teardown(test_scrapyd_classes_mapped, setup, teardown),
      cmocka_unit_test_setup_teardown(test_scrapyd_classes_refused, setup, teardown),
      cmocka_unit_test_setup_teardown(test_scrapyd_classes_sources, setup, teardown),
      cmocka_unit_test_setup_teardown(test_log_format_key, setup, teardown),
      cmocka_unit_test_setup_teardown(test_booleans, setup, teardown),
      cmocka_unit_test_setup_teardown(test_numbers, setup, teardown),
      cmocka_unit_test_setup_teardown(test_env_overrides, setup, teardown),
      cmocka_unit_test_setup_teardown(test_flags, setup, teardown),
      cmocka_unit_test_setup_teardown(test_services, setup, teardown),
      cmocka_unit_test_setup_teardown(test_settings, setup, teardown),
      cmocka_unit_test_setup_teardown(test_retention, setup, teardown),
      cmocka_unit_test_setup_teardown(test_concurrency, setup, teardown),
      cmocka_unit_test_setup_teardown(test_hooks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_store_follows_dbs_dir, setup, teardown),
      cmocka_unit_test_setup_teardown(test_max_proc, setup, teardown),
      cmocka_unit_test_setup_teardown(test_items_remote, setup, teardown),
      cmocka_unit_test_setup_teardown(test_release_reuse, setup, teardown),
      cmocka_unit_test_setup_teardown(test_error_values, setup, teardown),
      cmocka_unit_test_setup_teardown(test_error_env_and_flags, setup, teardown),
      cmocka_unit_test_setup_teardown(test_error_syntax, setup, teardown),
      cmocka_unit_test_setup_teardown(test_error_unreadable, setup, teardown),
      cmocka_unit_test_setup_teardown(test_error_buffer, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
