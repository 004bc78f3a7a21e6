/* Spider listings (api/spiders.c) and the runner environment (flow/env.c).
 * The runner is a shell script standing in for `python -m spiderd_runner`, so
 * these tests need neither Scrapy nor the Python runner. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "config.h"
#include "error.h"
#include "flow/env.h"
#include "api/spiders.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* FAKE_MODE picks the behaviour; every run appends its argv to FAKE_LOG. */
static const char fake_runner[] =
    "#!/bin/sh\n"
    "echo \"$*\" >> \"$FAKE_LOG\"\n"
    "case \"$FAKE_MODE\" in\n"
    "list) printf 'alpha\\nbeta\\r\\n\\ngamma\\n' ;;\n"
    "fail) printf 'some stdout\\n'\n"
    "      printf 'Traceback (most recent call last):\\n  File \"x\", line 1\\nValueError: "
    "boom\\n' >&2\n"
    "      exit 1 ;;\n"
    "failout) printf 'only stdout\\n'; exit 3 ;;\n"
    "silent) exit 4 ;;\n"
    "sleep) exec sleep 30 ;;\n"
    "env) printf 'P=%s\\nE=%s\\nV=%s\\nIO=%s\\nPP=%s\\nS=%s\\nARGS=%s\\n' \"$SCRAPY_PROJECT\" "
    "\"${SPIDERD_EGG-unset}\" \"${SCRAPYD_EGG_VERSION-unset}\" \"$PYTHONIOENCODING\" "
    "\"$PYTHONPATH\" \"${SCRAPY_SETTINGS_MODULE-unset}\" \"$*\" ;;\n"
    "big) head -c 3000000 /dev/zero | tr '\\000' x >&2; exit 1 ;;\n"
    "orphan) sleep 30 & echo one ;;\n"
    "escape) setsid sh -c 'touch \"$FAKE_LOG.ready\"; exec sleep 4' &\n"
    "        while [ ! -e \"$FAKE_LOG.ready\" ]; do sleep 0.01; done\n"
    "        rm -f \"$FAKE_LOG.ready\"; echo two ;;\n"
    "badutf8) printf 'ok\\n\\377bad\\n' ;;\n"
    "esac\n";

struct fx {
  char root[64];
  char runner[128];
  char log[128];
  char egg[128];
  uv_loop_t loop;
  config_t cfg;
  config_pair_t settings[1];
  spiders_t *sp;
};

struct result {
  int calls;
  int rc;
  char **names;
  size_t n;
  char *text;
  struct fx *f;
  int free_in_cb; /* spiders_free from inside the callback */
};

static int rm_cb(const char *p, const struct stat *st, int flag, struct FTW *f) {
  return flag == FTW_DP ? rmdir(p) : unlink(p);
}

static void write_file(const char *path, const char *content, mode_t mode) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
  close(fd);
  chmod(path, mode);
}

static int setup(void **state) {
  struct fx *f = calloc(1, sizeof(*f));
  strcpy(f->root, "/tmp/spiderd-spiders-XXXXXX");
  if (!mkdtemp(f->root)) return -1;
  snprintf(f->runner, sizeof(f->runner), "%s/fake-python", f->root);
  snprintf(f->log, sizeof(f->log), "%s/spawns.log", f->root);
  snprintf(f->egg, sizeof(f->egg), "%s/1_0.egg", f->root);
  write_file(f->runner, fake_runner, 0755);
  write_file(f->egg, "egg v1", 0644);
  setenv("FAKE_LOG", f->log, 1);
  setenv("FAKE_MODE", "list", 1);
  unsetenv("SCRAPY_SETTINGS_MODULE");
  if (uv_loop_init(&f->loop)) return -1;
  f->cfg.python = f->runner;
  f->cfg.pythonpath = (char *)"/opt/spiderd/python";
  f->settings[0].name = (char *)"fsproj";
  f->settings[0].value = (char *)"fsproj.settings";
  f->cfg.settings = f->settings;
  f->cfg.nsettings = 1;
  if (spiders_init(&f->sp, &f->loop, &f->cfg)) return -1;
  *state = f;
  return 0;
}

static int teardown(void **state) {
  struct fx *f = *state;
  spiders_free(f->sp);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  /* Every handle was closed: nothing leaked into the loop. */
  assert_int_equal(uv_loop_close(&f->loop), 0);
  nftw(f->root, rm_cb, 16, FTW_DEPTH | FTW_PHYS);
  free(f);
  return 0;
}

static void result_reset(struct result *r) {
  for (size_t i = 0; i < r->n; i++) free(r->names[i]);
  free(r->names);
  free(r->text);
  struct fx *f = r->f;
  memset(r, 0, sizeof(*r));
  r->f = f;
}

static void on_list(void *ud, int rc, char *const *names, size_t n, const char *error_text) {
  struct result *r = ud;
  r->calls++;
  r->rc = rc;
  r->n = n;
  r->names = n ? calloc(n, sizeof(char *)) : NULL;
  for (size_t i = 0; i < n; i++) r->names[i] = strdup(names[i]);
  r->text = error_text ? strdup(error_text) : NULL;
  if (r->free_in_cb) {
    spiders_free(r->f->sp);
    r->f->sp = NULL;
  }
}

static void on_watchdog(uv_timer_t *t) { *(int *)t->data = 1; }

/* Runs the loop until *calls reaches want (or a 20 s watchdog fires). */
static void run_until(struct fx *f, const int *calls, int want) {
  int expired = 0;
  uv_timer_t wd;
  uv_timer_init(&f->loop, &wd);
  wd.data = &expired;
  uv_timer_start(&wd, on_watchdog, 20000, 0);
  while (*calls < want && !expired) uv_run(&f->loop, UV_RUN_ONCE);
  uv_close((uv_handle_t *)&wd, NULL);
  uv_run(&f->loop, UV_RUN_NOWAIT);
  if (expired) fail_msg("timed out waiting for %d callbacks (got %d)", want, *calls);
}

static int spawns(const struct fx *f) {
  FILE *fp = fopen(f->log, "r");
  int n = 0, c;
  if (!fp) return 0;
  while ((c = fgetc(fp)) != EOF)
    if (c == '\n') n++;
  fclose(fp);
  return n;
}

static void assert_names(const struct result *r, const char **want, size_t n) {
  assert_int_equal(r->rc, 0);
  if (r->n != n) fail_msg("%zu names, want %zu", r->n, n);
  for (size_t i = 0; i < n; i++) assert_string_equal(r->names[i], want[i]);
}

/* ---- spiders ------------------------------------------------------------- */

static void test_list_success_then_cache_hit(void **state) {
  struct fx *f = *state;
  struct result r = {.f = f};
  const char *want[] = {"alpha", "beta", "gamma"};

  assert_int_equal(spiders_list(f->sp, "proj", f->egg, "1.0", on_list, &r), 0);
  assert_int_equal(r.calls, 0); /* a miss answers later, from the loop */
  run_until(f, &r.calls, 1);
  assert_names(&r, want, N_ELEMS(want));
  assert_null(r.text);
  assert_int_equal(spawns(f), 1);
  result_reset(&r);

  /* Same egg, unchanged: answered before spiders_list returns, no runner.
   * The version only feeds the environment; the egg file is the key. */
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, NULL, on_list, &r), 0);
  assert_int_equal(r.calls, 1);
  assert_names(&r, want, N_ELEMS(want));
  assert_int_equal(spawns(f), 1);
  result_reset(&r);
}

static void test_error_text_from_stderr(void **state) {
  struct fx *f = *state;
  struct result r = {.f = f};
  setenv("FAKE_MODE", "fail", 1);
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, NULL, on_list, &r), 0);
  run_until(f, &r.calls, 1);
  assert_int_equal(r.rc, SPD_ERUNNER);
  assert_int_equal(r.n, 0);
  assert_string_equal(r.text,
                      "Traceback (most recent call last):\n  File \"x\", line 1\nValueError: boom\n");
  result_reset(&r);

  /* Errors are not cached: the next call runs the runner again. */
  setenv("FAKE_MODE", "list", 1);
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, NULL, on_list, &r), 0);
  assert_int_equal(r.calls, 0);
  run_until(f, &r.calls, 1);
  assert_int_equal(r.rc, 0);
  assert_int_equal(spawns(f), 2);
  result_reset(&r);
}

static void test_error_text_from_stdout(void **state) {
  struct fx *f = *state;
  struct result r = {.f = f};
  setenv("FAKE_MODE", "failout", 1);
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, NULL, on_list, &r), 0);
  run_until(f, &r.calls, 1);
  assert_int_equal(r.rc, SPD_ERUNNER);
  assert_string_equal(r.text, "only stdout\n");
  result_reset(&r);

  setenv("FAKE_MODE", "silent", 1);
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, NULL, on_list, &r), 0);
  run_until(f, &r.calls, 1);
  assert_int_equal(r.rc, SPD_ERUNNER);
  assert_string_equal(r.text, "runner exited with status 4");
  result_reset(&r);
}

static void test_output_is_bounded(void **state) {
  struct fx *f = *state;
  struct result r = {.f = f};
  setenv("FAKE_MODE", "big", 1);
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, NULL, on_list, &r), 0);
  run_until(f, &r.calls, 1);
  assert_int_equal(r.rc, SPD_ERUNNER);
  const char *note = "\n[spiderd: 1951424 more bytes of output dropped]";
  assert_int_equal(strlen(r.text), 1024 * 1024 + strlen(note));
  assert_string_equal(r.text + 1024 * 1024, note);
  result_reset(&r);
}

static void test_invalid_utf8_replaced(void **state) {
  struct fx *f = *state;
  struct result r = {.f = f};
  setenv("FAKE_MODE", "badutf8", 1);
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, NULL, on_list, &r), 0);
  run_until(f, &r.calls, 1);
  const char *want[] = {"ok", "\xef\xbf\xbd" "bad"};
  assert_names(&r, want, 2);
  result_reset(&r);
}

static void test_cache_follows_egg_file(void **state) {
  struct fx *f = *state;
  struct result r = {.f = f};
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, NULL, on_list, &r), 0);
  run_until(f, &r.calls, 1);
  result_reset(&r);
  assert_int_equal(spawns(f), 1);

  /* Another size. */
  write_file(f->egg, "egg v2, longer", 0644);
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, NULL, on_list, &r), 0);
  assert_int_equal(r.calls, 0);
  run_until(f, &r.calls, 1);
  result_reset(&r);
  assert_int_equal(spawns(f), 2);

  /* Same size and inode, another mtime. */
  struct timespec times[2] = {{.tv_sec = 1000000000}, {.tv_sec = 1000000000}};
  assert_int_equal(utimensat(AT_FDCWD, f->egg, times, 0), 0);
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, NULL, on_list, &r), 0);
  assert_int_equal(r.calls, 0);
  run_until(f, &r.calls, 1);
  result_reset(&r);
  assert_int_equal(spawns(f), 3);

  /* Replaced by rename, as eggs_commit does: new inode. */
  char tmp[160];
  snprintf(tmp, sizeof(tmp), "%s.new", f->egg);
  write_file(tmp, "egg v2, longer", 0644);
  assert_int_equal(utimensat(AT_FDCWD, tmp, times, 0), 0);
  assert_int_equal(rename(tmp, f->egg), 0);
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, NULL, on_list, &r), 0);
  assert_int_equal(r.calls, 0);
  run_until(f, &r.calls, 1);
  result_reset(&r);
  assert_int_equal(spawns(f), 4);

  /* Unchanged since: a hit. */
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, NULL, on_list, &r), 0);
  assert_int_equal(r.calls, 1);
  result_reset(&r);
  assert_int_equal(spawns(f), 4);

  /* A missing egg is refused at once, without callback. */
  char missing[160];
  snprintf(missing, sizeof(missing), "%s/nosuch.egg", f->root);
  assert_int_equal(spiders_list(f->sp, "proj", missing, NULL, on_list, &r), -ENOENT);
  assert_int_equal(r.calls, 0);
}

static void test_prime(void **state) {
  struct fx *f = *state;
  struct result r = {.f = f};
  char *const names[] = {(char *)"one", (char *)"two"};
  const char *want[] = {"one", "two"};
  assert_int_equal(spiders_prime(f->sp, "proj", f->egg, names, 2), 0);
  /* Answered from the primed list, before spiders_list returns, no runner. */
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, NULL, on_list, &r), 0);
  assert_int_equal(r.calls, 1);
  assert_names(&r, want, N_ELEMS(want));
  assert_int_equal(spawns(f), 0);
  result_reset(&r);
  /* The egg changes: the primed list no longer applies. */
  write_file(f->egg, "another egg, another size", 0644);
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, NULL, on_list, &r), 0);
  assert_int_equal(r.calls, 0);
  run_until(f, &r.calls, 1);
  assert_int_equal(spawns(f), 1);
  result_reset(&r);
  /* A missing egg cannot be primed. */
  char missing[160];
  snprintf(missing, sizeof(missing), "%s/nosuch.egg", f->root);
  assert_int_equal(spiders_prime(f->sp, "proj", missing, names, 2), -ENOENT);
}

static void test_forget(void **state) {
  struct fx *f = *state;
  struct result r = {.f = f};
  char egg2[160];
  snprintf(egg2, sizeof(egg2), "%s/other.egg", f->root);
  write_file(egg2, "other", 0644);

  assert_int_equal(spiders_list(f->sp, "p1", f->egg, NULL, on_list, &r), 0);
  run_until(f, &r.calls, 1);
  result_reset(&r);
  assert_int_equal(spiders_list(f->sp, "p2", egg2, NULL, on_list, &r), 0);
  run_until(f, &r.calls, 1);
  result_reset(&r);
  assert_int_equal(spiders_list(f->sp, "fsproj", NULL, NULL, on_list, &r), 0);
  run_until(f, &r.calls, 1);
  result_reset(&r);
  assert_int_equal(spawns(f), 3);

  spiders_forget(f->sp, "p1");
  spiders_forget(f->sp, "nosuch");
  assert_int_equal(spiders_list(f->sp, "p2", egg2, NULL, on_list, &r), 0);
  assert_int_equal(r.calls, 1);
  result_reset(&r);
  assert_int_equal(spiders_list(f->sp, "fsproj", NULL, NULL, on_list, &r), 0);
  assert_int_equal(r.calls, 1);
  result_reset(&r);
  assert_int_equal(spiders_list(f->sp, "p1", f->egg, NULL, on_list, &r), 0);
  assert_int_equal(r.calls, 0);
  run_until(f, &r.calls, 1);
  result_reset(&r);
  assert_int_equal(spawns(f), 4);

  /* A [settings] project is keyed by name. */
  spiders_forget(f->sp, "fsproj");
  assert_int_equal(spiders_list(f->sp, "fsproj", NULL, NULL, on_list, &r), 0);
  assert_int_equal(r.calls, 0);
  run_until(f, &r.calls, 1);
  result_reset(&r);
  assert_int_equal(spawns(f), 5);

  /* Forgotten while the runner is still going: delivered, but not cached,
   * because the egg may have been deleted meanwhile. */
  spiders_forget(f->sp, "p1");
  assert_int_equal(spiders_list(f->sp, "p1", f->egg, NULL, on_list, &r), 0);
  spiders_forget(f->sp, "p1");
  run_until(f, &r.calls, 1);
  assert_int_equal(r.rc, 0);
  result_reset(&r);
  assert_int_equal(spiders_list(f->sp, "p1", f->egg, NULL, on_list, &r), 0);
  assert_int_equal(r.calls, 0);
  run_until(f, &r.calls, 1);
  result_reset(&r);
  assert_int_equal(spawns(f), 7);
}

static void test_environment_and_argv(void **state) {
  struct fx *f = *state;
  struct result r = {.f = f};
  char want_e[160];
  setenv("FAKE_MODE", "env", 1);
  setenv("PYTHONPATH", "/inherited", 1);
  setenv("SCRAPYD_EGG_VERSION", "stale", 1);
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, "1.0", on_list, &r), 0);
  run_until(f, &r.calls, 1);
  snprintf(want_e, sizeof(want_e), "E=%s", f->egg);
  const char *want[] = {"P=proj",
                        want_e,
                        "V=1.0",
                        "IO=UTF-8",
                        "PP=/opt/spiderd/python:/inherited",
                        "S=unset",
                        "ARGS=-m spiderd_runner list -s LOG_STDOUT=0"};
  assert_names(&r, want, N_ELEMS(want));
  result_reset(&r);

  /* A [settings] project: no egg, no version, its settings module. */
  unsetenv("PYTHONPATH");
  unsetenv("SCRAPYD_EGG_VERSION");
  assert_int_equal(spiders_list(f->sp, "fsproj", NULL, NULL, on_list, &r), 0);
  run_until(f, &r.calls, 1);
  const char *want2[] = {"P=fsproj",
                         "E=unset",
                         "V=unset",
                         "IO=UTF-8",
                         "PP=/opt/spiderd/python",
                         "S=fsproj.settings",
                         "ARGS=-m spiderd_runner list -s LOG_STDOUT=0"};
  assert_names(&r, want2, N_ELEMS(want2));
  result_reset(&r);
}

static void test_concurrent_calls_share_one_runner(void **state) {
  struct fx *f = *state;
  struct result a = {.f = f}, b = {.f = f};
  const char *want[] = {"alpha", "beta", "gamma"};
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, NULL, on_list, &a), 0);
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, "1.0", on_list, &b), 0);
  run_until(f, &b.calls, 1); /* callbacks run in call order */
  assert_int_equal(a.calls, 1);
  assert_names(&a, want, 3);
  assert_names(&b, want, 3);
  assert_int_equal(spawns(f), 1);
  result_reset(&a);
  result_reset(&b);
}

static void test_free_with_listing_in_flight(void **state) {
  struct fx *f = *state;
  struct result r = {.f = f};
  setenv("FAKE_MODE", "sleep", 1);
  uint64_t t0 = uv_hrtime();
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, NULL, on_list, &r), 0);
  /* Let the runner really start (it logs first) before pulling the plug. */
  for (int i = 0; i < 500 && spawns(f) < 1; i++) {
    uv_run(&f->loop, UV_RUN_NOWAIT);
    usleep(10000);
  }
  assert_int_equal(spawns(f), 1);
  spiders_free(f->sp);
  f->sp = NULL;
  uv_run(&f->loop, UV_RUN_DEFAULT); /* returns once every handle is closed */
  assert_int_equal(r.calls, 0);
  /* Killed, not waited for: sleep 30 would take 30 s. */
  assert_true(uv_hrtime() - t0 < 10ULL * 1000000000ULL);
}

static void test_free_from_callback(void **state) {
  struct fx *f = *state;
  struct result quick = {.f = f, .free_in_cb = 1}, slow = {.f = f}, late = {.f = f};
  char egg2[160];
  snprintf(egg2, sizeof(egg2), "%s/other.egg", f->root);
  write_file(egg2, "other", 0644);

  setenv("FAKE_MODE", "sleep", 1);
  assert_int_equal(spiders_list(f->sp, "slow", egg2, NULL, on_list, &slow), 0);
  setenv("FAKE_MODE", "list", 1);
  assert_int_equal(spiders_list(f->sp, "quick", f->egg, NULL, on_list, &quick), 0);
  /* Shares the quick runner, but comes after the callback that frees. */
  assert_int_equal(spiders_list(f->sp, "quick", f->egg, NULL, on_list, &late), 0);
  run_until(f, &quick.calls, 1);
  assert_null(f->sp);
  uv_run(&f->loop, UV_RUN_DEFAULT);
  assert_int_equal(quick.calls, 1);
  assert_int_equal(quick.rc, 0);
  assert_int_equal(slow.calls, 0);
  assert_int_equal(late.calls, 0);
  result_reset(&quick);
}

static void test_free_from_cache_hit_callback(void **state) {
  struct fx *f = *state;
  struct result r = {.f = f};
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, NULL, on_list, &r), 0);
  run_until(f, &r.calls, 1);
  result_reset(&r);
  r.free_in_cb = 1;
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, NULL, on_list, &r), 0);
  assert_int_equal(r.calls, 1);
  assert_int_equal(r.n, 3);
  assert_null(f->sp);
  result_reset(&r);
}

static void test_spawn_failure(void **state) {
  struct fx *f = *state;
  struct result r = {.f = f};
  char missing[160];
  snprintf(missing, sizeof(missing), "%s/no-python", f->root);
  f->cfg.python = missing;
  int rc = spiders_list(f->sp, "proj", f->egg, NULL, on_list, &r);
  assert_true(rc < 0);
  uv_run(&f->loop, UV_RUN_NOWAIT);
  assert_int_equal(r.calls, 0);
  assert_int_equal(spiders_list(f->sp, NULL, f->egg, NULL, on_list, &r), -EINVAL);
  assert_int_equal(spiders_list(f->sp, "p", f->egg, NULL, NULL, &r), -EINVAL);
}

static void test_orphans_do_not_hold_the_listing(void **state) {
  struct fx *f = *state;
  struct result r = {.f = f};
  /* A child left behind in the runner's group is killed with it. */
  setenv("FAKE_MODE", "orphan", 1);
  uint64_t t0 = uv_hrtime();
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, NULL, on_list, &r), 0);
  run_until(f, &r.calls, 1);
  assert_true(uv_hrtime() - t0 < 1500ULL * 1000000ULL);
  const char *want[] = {"one"};
  assert_names(&r, want, 1);
  result_reset(&r);

  /* One that left the group holds the pipes: the drain timer ends it. */
  if (access("/usr/bin/setsid", X_OK) && access("/bin/setsid", X_OK)) return;
  spiders_forget(f->sp, "proj");
  setenv("FAKE_MODE", "escape", 1);
  t0 = uv_hrtime();
  assert_int_equal(spiders_list(f->sp, "proj", f->egg, NULL, on_list, &r), 0);
  run_until(f, &r.calls, 1);
  uint64_t ms = (uv_hrtime() - t0) / 1000000;
  assert_true(ms >= 1900 && ms < 3900);
  const char *want2[] = {"two"};
  assert_names(&r, want2, 1);
  result_reset(&r);
}

/* ---- env ----------------------------------------------------------------- */

static const char *env_get(char **env, const char *name, int *count) {
  const char *found = NULL;
  size_t len = strlen(name);
  *count = 0;
  for (char **p = env; *p; p++)
    if (strncmp(*p, name, len) == 0 && (*p)[len] == '=') {
      if (!found) found = *p + len + 1;
      (*count)++;
    }
  return found;
}

static void assert_env(char **env, const char *name, const char *value) {
  int count;
  const char *v = env_get(env, name, &count);
  if (!value) {
    if (v) fail_msg("%s is set to '%s'", name, v);
    return;
  }
  if (!v) fail_msg("%s is not set", name);
  assert_int_equal(count, 1);
  assert_string_equal(v, value);
}

static void test_env_build(void **state) {
  config_t cfg;
  config_pair_t settings[] = {{(char *)"fsproj", (char *)"fsproj.settings"}};
  memset(&cfg, 0, sizeof(cfg));
  cfg.pythonpath = (char *)"/opt/py";
  cfg.settings = settings;
  cfg.nsettings = 1;

  setenv("SPD_TEST_KEEP", "kept=with=equals", 1);
  setenv("SCRAPY_PROJECT", "old", 1);
  setenv("PYTHONPATH", "/a:/b", 1);
  setenv("SPIDERD_EGG", "stale", 1);
  setenv("SCRAPYD_PASSWORD", "admin-secret", 1);
  setenv("SPIDERD_WEBHOOK_SECRET", "hook-secret", 1);
  setenv("SPIDERD_STORE", "postgresql://u:pw@db/spiderd", 1);
  setenv("SPIDERD_PASSWORDS", "not a secret of the daemon", 1);
  unsetenv("SCRAPYD_EGG_VERSION");
  unsetenv("SCRAPY_SETTINGS_MODULE");

  char **env = env_build(&cfg, "proj", "/eggs/proj/1_0.egg", "1.0", NULL);
  assert_non_null(env);
  assert_env(env, "SPD_TEST_KEEP", "kept=with=equals");
  assert_env(env, "SCRAPY_PROJECT", "proj");
  assert_env(env, "PYTHONPATH", "/opt/py:/a:/b");
  assert_env(env, "SPIDERD_EGG", "/eggs/proj/1_0.egg");
  assert_env(env, "SCRAPYD_EGG_VERSION", "1.0");
  assert_env(env, "SCRAPY_SETTINGS_MODULE", NULL);
  assert_env(env, "HOME", getenv("HOME"));
  /* The daemon's secrets stay with the daemon. */
  assert_env(env, "SCRAPYD_PASSWORD", NULL);
  assert_env(env, "SPIDERD_WEBHOOK_SECRET", NULL);
  assert_env(env, "SPIDERD_STORE", NULL);
  assert_env(env, "SPIDERD_PASSWORDS", "not a secret of the daemon");
  env_free(env);
  unsetenv("SCRAPYD_PASSWORD");
  unsetenv("SPIDERD_WEBHOOK_SECRET");
  unsetenv("SPIDERD_STORE");
  unsetenv("SPIDERD_PASSWORDS");

  /* No egg, no version: those two are not added (the inherited ones stay,
   * as Scrapyd copies the environment as it is). */
  unsetenv("SPIDERD_EGG");
  unsetenv("PYTHONPATH");
  const char *extra[] = {"PYTHONIOENCODING=UTF-8", "SCRAPY_PROJECT=override", "NOEQUALS", NULL};
  env = env_build(&cfg, "fsproj", NULL, NULL, extra);
  assert_non_null(env);
  assert_env(env, "SPIDERD_EGG", NULL);
  assert_env(env, "SCRAPYD_EGG_VERSION", NULL);
  assert_env(env, "PYTHONPATH", "/opt/py");
  assert_env(env, "SCRAPY_SETTINGS_MODULE", "fsproj.settings");
  assert_env(env, "SCRAPY_PROJECT", "override");
  assert_env(env, "PYTHONIOENCODING", "UTF-8");
  for (char **p = env; *p; p++) assert_non_null(strchr(*p, '='));
  env_free(env);

  /* An empty inherited PYTHONPATH must not add the cwd to sys.path. */
  setenv("PYTHONPATH", "", 1);
  env = env_build(&cfg, "p", NULL, NULL, NULL);
  assert_env(env, "PYTHONPATH", "/opt/py");
  env_free(env);

  /* No pythonpath configured: the inherited one is left alone. */
  setenv("PYTHONPATH", "/x", 1);
  cfg.pythonpath = NULL;
  env = env_build(&cfg, "p", NULL, NULL, NULL);
  assert_env(env, "PYTHONPATH", "/x");
  env_free(env);
  unsetenv("PYTHONPATH");
  unsetenv("SPD_TEST_KEEP");
  unsetenv("SCRAPY_PROJECT");
  env_free(NULL);
}

static void test_env_build_dedups_environ(void **state) {
  char **saved = environ;
  char *fake[] = {(char *)"A=1", (char *)"B=2", (char *)"A=3", (char *)"NOEQ", (char *)"A=4",
                  NULL};
  config_t cfg;
  memset(&cfg, 0, sizeof(cfg));
  environ = fake;
  char **env = env_build(&cfg, "p", NULL, NULL, NULL);
  environ = saved;
  assert_non_null(env);
  /* Later wins, as in Python's os.environ; one entry each. */
  assert_string_equal(env[0], "A=4");
  assert_string_equal(env[1], "B=2");
  assert_string_equal(env[2], "SCRAPY_PROJECT=p");
  assert_null(env[3]);
  env_free(env);

  char *empty[] = {NULL};
  environ = empty;
  env = env_build(&cfg, "p", NULL, NULL, NULL);
  environ = saved;
  assert_string_equal(env[0], "SCRAPY_PROJECT=p");
  assert_null(env[1]);
  env_free(env);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_env_build),
      cmocka_unit_test(test_env_build_dedups_environ),
      cmocka_unit_test_setup_teardown(test_list_success_then_cache_hit, setup, teardown),
      cmocka_unit_test_setup_teardown(test_error_text_from_stderr, setup, teardown),
      cmocka_unit_test_setup_teardown(test_error_text_from_stdout, setup, teardown),
      cmocka_unit_test_setup_teardown(test_output_is_bounded, setup, teardown),
      cmocka_unit_test_setup_teardown(test_invalid_utf8_replaced, setup, teardown),
      cmocka_unit_test_setup_teardown(test_cache_follows_egg_file, setup, teardown),
      cmocka_unit_test_setup_teardown(test_prime, setup, teardown),
      cmocka_unit_test_setup_teardown(test_forget, setup, teardown),
      cmocka_unit_test_setup_teardown(test_environment_and_argv, setup, teardown),
      cmocka_unit_test_setup_teardown(test_concurrent_calls_share_one_runner, setup, teardown),
      cmocka_unit_test_setup_teardown(test_free_with_listing_in_flight, setup, teardown),
      cmocka_unit_test_setup_teardown(test_free_from_callback, setup, teardown),
      cmocka_unit_test_setup_teardown(test_free_from_cache_hit_callback, setup, teardown),
      cmocka_unit_test_setup_teardown(test_spawn_failure, setup, teardown),
      cmocka_unit_test_setup_teardown(test_orphans_do_not_hold_the_listing, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
