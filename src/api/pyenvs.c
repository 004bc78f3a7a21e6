/* Building Python environments (api/pyenvs.h). */
#include "api/pyenvs.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "flow/env.h"
#include "fsutil.h"
#include "log.h"
#include "store/eggs.h"

/* How much of a failed build's log its refusal quotes. */
#define TAIL_LINES 15
#define TAIL_BYTES 3000

typedef struct waiter {
  pyenvs_cb cb;
  void *ud;
} waiter_t;

typedef struct build {
  struct build *next;
  pyenvs_t *pe;
  char key[PYENV_KEY_LEN + 1];
  char *log_path, *req_path, *dir;
  waiter_t *waiters;
  size_t nwaiters;
  uv_process_t proc;
  uv_timer_t timer;
  int open; /* handles not yet closed */
  int spawned, timed_out, cancelled;
  int64_t status;
  int sig;
} build_t;

typedef struct hold {
  char key[PYENV_KEY_LEN + 1];
  int n;      /* uploads recording it, crawls running in it */
  int spared; /* a collection left it for the hold alone */
} hold_t;

struct pyenvs {
  uv_loop_t *loop;
  const config_t *cfg;
  char *dir;
  build_t *builds;
  hold_t *holds;
  size_t nholds;
  uint64_t nbuilt;
  unsigned trash_seq;
  int closing;
};

/* ---- removing directories off the loop ---- */

typedef struct trash {
  uv_work_t work;
  char *path;
} trash_t;

static void trash_work(uv_work_t *w) { fs_rmtree(((trash_t *)w->data)->path); }

static void trash_done(uv_work_t *w, int status) {
  (void)status;
  trash_t *t = w->data;
  free(t->path);
  free(t);
}

/* Moves path aside at once (so its name is free and nothing uses it by that
 * name) and removes it on the thread pool. */
static void trash(pyenvs_t *pe, const char *path) {
  char aside[PATH_MAX];
  snprintf(aside, sizeof(aside), "%s/.trash-%d-%u", pe->dir, (int)getpid(), pe->trash_seq++);
  if (rename(path, aside)) return;
  trash_t *t = calloc(1, sizeof(*t));
  if (t && (t->path = strdup(aside))) {
    t->work.data = t;
    if (uv_queue_work(pe->loop, &t->work, trash_work, trash_done) == 0) return;
  }
  if (t) free(t->path);
  free(t);
  fs_rmtree(aside);
}

/* ---- set-up ---- */

/* What a crash left: unfinished environments, build files, trash. */
static void clean_dir(pyenvs_t *pe) {
  DIR *d = opendir(pe->dir);
  if (!d) return;
  struct dirent *de;
  char path[PATH_MAX];
  while ((de = readdir(d))) {
    if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
    if ((size_t)snprintf(path, sizeof(path), "%s/%s", pe->dir, de->d_name) >= sizeof(path))
      continue;
    if (de->d_name[0] == '.') {
      fs_rmtree(path);
    } else if (!pyenv_ready(pe->dir, de->d_name)) {
      log_info("envs", "removing the unfinished environment %s", de->d_name);
      fs_rmtree(path);
    }
  }
  closedir(d);
}

int pyenvs_init(pyenvs_t **out, uv_loop_t *loop, const config_t *cfg) {
  pyenvs_t *pe = calloc(1, sizeof(*pe));
  if (!pe) return -ENOMEM;
  pe->loop = loop;
  pe->cfg = cfg;
  pe->dir = pyenv_dir(cfg->dbs_dir);
  if (!pe->dir) {
    free(pe);
    return -ENOMEM;
  }
  int rc = fs_mkdirs(pe->dir, 0755);
  if (rc) {
    log_error("envs", "cannot create %s: %s", pe->dir, strerror(-rc));
    free(pe->dir);
    free(pe);
    return rc;
  }
  clean_dir(pe);
  *out = pe;
  return 0;
}

const char *pyenvs_dir(const pyenvs_t *pe) { return pe->dir; }

uint64_t pyenvs_builds(const pyenvs_t *pe) { return pe->nbuilt; }

static build_t *find_build(const pyenvs_t *pe, const char *key) {
  for (build_t *b = pe->builds; b; b = b->next)
    if (!strcmp(b->key, key)) return b;
  return NULL;
}

int pyenvs_building(const pyenvs_t *pe, const char *key) { return find_build(pe, key) != NULL; }

/* ---- a build's end ---- */

static void build_free(build_t *b) {
  free(b->log_path);
  free(b->req_path);
  free(b->dir);
  free(b->waiters);
  free(b);
}

static void build_closed(uv_handle_t *h) {
  build_t *b = h->data;
  if (--b->open == 0) {
    pyenvs_t *pe = b->pe;
    build_free(b);
    if (pe->closing && !pe->builds) {
      free(pe->dir);
      free(pe->holds);
      free(pe);
    }
  }
}

static void build_unlink(build_t *b) {
  for (build_t **pp = &b->pe->builds; *pp; pp = &(*pp)->next)
    if (*pp == b) {
      *pp = b->next;
      return;
    }
}

/* The last lines of the log, for the refusal. */
static void log_tail(const char *path, char *out, size_t cap) {
  char buf[TAIL_BYTES + 1];
  out[0] = '\0';
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  off_t end = lseek(fd, 0, SEEK_END);
  off_t from = end > TAIL_BYTES ? end - TAIL_BYTES : 0;
  ssize_t n = pread(fd, buf, TAIL_BYTES, from);
  close(fd);
  if (n <= 0) return;
  buf[n] = '\0';
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r')) buf[--n] = '\0';
  const char *start = buf;
  int lines = 0;
  for (ssize_t i = n - 1; i >= 0; i--)
    if (buf[i] == '\n' && ++lines == TAIL_LINES) {
      start = buf + i + 1;
      break;
    }
  if (start == buf && from > 0) { /* a partial first line */
    const char *nl = strchr(buf, '\n');
    if (nl) start = nl + 1;
  }
  snprintf(out, cap, "%s", start);
}

static void build_finish(build_t *b) {
  pyenvs_t *pe = b->pe;
  char why[TAIL_BYTES + 256];
  int rc = 0;
  why[0] = '\0';
  build_unlink(b);
  if (!b->timed_out && b->status == 0 && b->sig == 0 && pyenv_ready(pe->dir, b->key)) {
    char dst[PATH_MAX];
    snprintf(dst, sizeof(dst), "%s/build.log", b->dir);
    if (rename(b->log_path, dst)) log_warn("envs", "cannot keep %s: %s", dst, strerror(errno));
    log_info("envs", "environment %s is built", b->key);
  } else {
    char tail[TAIL_BYTES + 1];
    log_tail(b->log_path, tail, sizeof(tail));
    if (b->timed_out)
      snprintf(why, sizeof(why), "the build took longer than env_build_timeout (%g s)%s%s",
               pe->cfg->env_build_timeout, tail[0] ? ":\n" : "", tail);
    else
      snprintf(why, sizeof(why), "%s", tail[0] ? tail : "the build failed with no output");
    log_warn("envs", "environment %s could not be built (%s %d)", b->key,
             b->sig ? "signal" : "exit status", b->sig ? b->sig : (int)b->status);
    unlink(b->log_path);
    struct stat st;
    if (lstat(b->dir, &st) == 0) trash(pe, b->dir);
    rc = SPD_ERUNNER;
  }
  unlink(b->req_path);
  for (size_t i = 0; i < b->nwaiters; i++)
    b->waiters[i].cb(b->waiters[i].ud, rc, b->key, rc ? why : NULL);
}

static void on_build_exit(uv_process_t *p, int64_t status, int sig) {
  build_t *b = p->data;
  b->status = status;
  b->sig = sig;
  uv_timer_stop(&b->timer);
  if (b->cancelled) build_unlink(b);
  else build_finish(b);
  uv_close((uv_handle_t *)&b->proc, build_closed);
  uv_close((uv_handle_t *)&b->timer, build_closed);
}

static void on_build_timeout(uv_timer_t *t) {
  build_t *b = t->data;
  b->timed_out = 1;
  log_warn("envs", "environment %s: the build is still running after %g s: killing it", b->key,
           b->pe->cfg->env_build_timeout);
  kill(-b->proc.pid, SIGKILL);
}

/* ---- starting one ---- */

/* pip's settings, in its environment: no `ps` shows an index's password. */
static int pip_vars(const config_t *cfg, char *vars[8]) {
  size_t n = 0;
  int rc = 0;
  const char *idx = cfg->pip_index_url;
  if (idx && (!strcmp(idx, "none") || !strcmp(idx, "off")))
    rc |= asprintf(&vars[n++], "PIP_NO_INDEX=1") < 0;
  else if (idx && *idx)
    rc |= asprintf(&vars[n++], "PIP_INDEX_URL=%s", idx) < 0;
  if (cfg->pip_extra_index_url && *cfg->pip_extra_index_url)
    rc |= asprintf(&vars[n++], "PIP_EXTRA_INDEX_URL=%s", cfg->pip_extra_index_url) < 0;
  if (cfg->pip_find_links && *cfg->pip_find_links)
    rc |= asprintf(&vars[n++], "PIP_FIND_LINKS=%s", cfg->pip_find_links) < 0;
  if (cfg->pip_trusted_hosts && *cfg->pip_trusted_hosts)
    rc |= asprintf(&vars[n++], "PIP_TRUSTED_HOST=%s", cfg->pip_trusted_hosts) < 0;
  rc |= asprintf(&vars[n++], "PYTHONIOENCODING=UTF-8") < 0;
  rc |= asprintf(&vars[n++], "PIP_NO_INPUT=1") < 0;
  vars[n] = NULL;
  return rc ? -ENOMEM : 0;
}

static int write_file(const char *path, const char *text) {
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return -errno;
  int rc = eggs_write_all(fd, text, strlen(text));
  if (close(fd) && !rc) rc = -errno;
  return rc;
}

static int build_spawn(build_t *b, const char *interp, const char *reqs) {
  pyenvs_t *pe = b->pe;
  char *vars[8] = {0};
  char **env = NULL;
  int rc = write_file(b->req_path, reqs);
  if (rc) return rc;
  int log_fd = open(b->log_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (log_fd < 0) return -errno;
  rc = pip_vars(pe->cfg, vars);
  if (!rc) env = env_build(pe->cfg, "", NULL, NULL, (const char *const *)vars);
  for (size_t i = 0; i < 8; i++) free(vars[i]);
  if (!env) {
    close(log_fd);
    return -ENOMEM;
  }
  char *args[] = {(char *)interp, "-m", "spiderd_runner.envbuild", b->dir, b->req_path, NULL};
  uv_stdio_container_t stdio[3] = {{.flags = UV_IGNORE},
                                   {.flags = UV_INHERIT_FD, .data.fd = log_fd},
                                   {.flags = UV_INHERIT_FD, .data.fd = log_fd}};
  uv_process_options_t opts = {.exit_cb = on_build_exit, .file = interp, .args = args,
                               .env = env, .flags = UV_PROCESS_DETACHED, .stdio_count = 3,
                               .stdio = stdio};
  b->proc.data = b;
  rc = uv_spawn(pe->loop, &b->proc, &opts);
  close(log_fd);
  env_free(env);
  return rc;
}

static int add_waiter(build_t *b, pyenvs_cb cb, void *ud) {
  waiter_t *w = realloc(b->waiters, (b->nwaiters + 1) * sizeof(*w));
  if (!w) return -ENOMEM;
  b->waiters = w;
  w[b->nwaiters++] = (waiter_t){cb, ud};
  return 0;
}

static build_t *build_new(pyenvs_t *pe, const char *key) {
  build_t *b = calloc(1, sizeof(*b));
  if (!b) return NULL;
  b->pe = pe;
  snprintf(b->key, sizeof(b->key), "%s", key);
  if (asprintf(&b->dir, "%s/%s", pe->dir, key) < 0) b->dir = NULL;
  if (asprintf(&b->log_path, "%s/.%s.log", pe->dir, key) < 0) b->log_path = NULL;
  if (asprintf(&b->req_path, "%s/.%s.req", pe->dir, key) < 0) b->req_path = NULL;
  if (!b->dir || !b->log_path || !b->req_path) {
    build_free(b);
    return NULL;
  }
  return b;
}

int pyenvs_ensure(pyenvs_t *pe, const char *interp, const char *reqs, int rebuild, pyenvs_cb cb,
                  void *ud) {
  char key[PYENV_KEY_LEN + 1];
  pyenv_key(interp, reqs, key);
  build_t *b = find_build(pe, key);
  if (b) return add_waiter(b, cb, ud);
  if (!rebuild && pyenv_ready(pe->dir, key)) {
    cb(ud, 0, key, NULL);
    return 0;
  }
  if (pe->closing) return SPD_ESHUTDOWN;
  if (!(b = build_new(pe, key))) return -ENOMEM;
  int rc = add_waiter(b, cb, ud);
  if (rc) {
    build_free(b);
    return rc;
  }
  /* A rebuild: crawls running in the old one keep its files, which go
   * when the daemon next starts. */
  struct stat st;
  if (lstat(b->dir, &st) == 0) {
    char aside[PATH_MAX];
    snprintf(aside, sizeof(aside), "%s/.old-%s-%d-%u", pe->dir, key, (int)getpid(),
             pe->trash_seq++);
    if (rename(b->dir, aside)) trash(pe, b->dir);
  }
  rc = build_spawn(b, interp, reqs);
  if (rc) {
    log_warn("envs", "cannot start the build of environment %s with %s: %s", key, interp,
             rc < 0 && rc > -4096 ? uv_strerror(rc) : spd_strerror(rc));
    unlink(b->req_path);
    unlink(b->log_path);
    if (b->proc.type == UV_PROCESS) { /* uv_spawn initialised it: it must be closed */
      b->open = 1;
      b->cancelled = 1;
      uv_close((uv_handle_t *)&b->proc, build_closed);
    } else {
      build_free(b);
    }
    return rc;
  }
  b->spawned = 1;
  uv_timer_init(pe->loop, &b->timer);
  b->timer.data = b;
  b->open = 2;
  uv_timer_start(&b->timer, on_build_timeout, (uint64_t)(pe->cfg->env_build_timeout * 1000), 0);
  b->next = pe->builds;
  pe->builds = b;
  pe->nbuilt++;
  log_info("envs", "building environment %s with %s (pid %d)", key, interp, b->proc.pid);
  return 0;
}

void pyenvs_free(pyenvs_t *pe) {
  if (!pe) return;
  pe->closing = 1;
  if (!pe->builds) {
    free(pe->dir);
    free(pe->holds);
    free(pe);
    return;
  }
  for (build_t *b = pe->builds; b; b = b->next) {
    b->cancelled = 1;
    kill(-b->proc.pid, SIGKILL);
    unlink(b->req_path);
    unlink(b->log_path);
    /* Those waiting hear it now (the launcher's abandoned jobs free
     * themselves); the directory goes at the next start. */
    for (size_t i = 0; i < b->nwaiters; i++)
      b->waiters[i].cb(b->waiters[i].ud, SPD_ESHUTDOWN, b->key, "the daemon is stopping");
    b->nwaiters = 0;
  }
  /* Each build's exit callback closes its handles; the last frees pe. The
   * builds stay listed so that pe lives until then. */
}

/* ---- holds and collection ---- */

void pyenvs_hold(pyenvs_t *pe, const char *key) {
  for (size_t i = 0; i < pe->nholds; i++)
    if (!strcmp(pe->holds[i].key, key)) {
      pe->holds[i].n++;
      return;
    }
  hold_t *h = realloc(pe->holds, (pe->nholds + 1) * sizeof(*h));
  if (!h) return;
  pe->holds = h;
  snprintf(h[pe->nholds].key, sizeof(h->key), "%s", key);
  h[pe->nholds].spared = 0;
  h[pe->nholds++].n = 1;
}

void pyenvs_unhold(pyenvs_t *pe, const char *key) {
  for (size_t i = 0; i < pe->nholds; i++)
    if (!strcmp(pe->holds[i].key, key) && --pe->holds[i].n == 0) {
      int spared = pe->holds[i].spared;
      pe->holds[i] = pe->holds[--pe->nholds];
      /* A collection left it for this hold alone. */
      if (spared) pyenvs_collect(pe);
      return;
    }
}

static hold_t *held(pyenvs_t *pe, const char *key) {
  for (size_t i = 0; i < pe->nholds; i++)
    if (!strcmp(pe->holds[i].key, key)) return &pe->holds[i];
  return NULL;
}

int pyenvs_collect(pyenvs_t *pe) {
  char **keys = NULL;
  size_t nkeys = 0;
  int removed = 0;
  if (pyenv_keys_in_use(pe->cfg->eggs_dir, &keys, &nkeys)) return 0;
  DIR *d = opendir(pe->dir);
  struct dirent *de;
  while (d && (de = readdir(d))) {
    const char *k = de->d_name;
    if (k[0] == '.' || find_build(pe, k)) continue;
    int used = 0;
    for (size_t i = 0; i < nkeys && !used; i++) used = !strcmp(keys[i], k);
    if (used) continue;
    hold_t *h = held(pe, k);
    if (h) {
      h->spared = 1;
      continue;
    }
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof(path), "%s/%s", pe->dir, k) >= sizeof(path)) continue;
    log_info("envs", "removing environment %s: no version uses it", k);
    trash(pe, path);
    removed++;
  }
  if (d) closedir(d);
  strv_free(keys, nkeys);
  return removed;
}

/* ---- building ahead of the first claim ---- */

typedef struct prebuild {
  char *egg, *interp, *reqs;
} prebuild_t;

static void prebuilt(void *ud, int rc, const char *key, const char *why) {
  prebuild_t *p = ud;
  if (!rc && pyenv_sidecar_write(p->egg, key, p->interp, p->reqs))
    log_warn("envs", "cannot record the environment of %s", p->egg);
  else if (rc && rc != SPD_ESHUTDOWN)
    log_warn("envs", "environment %s of %s cannot be built on this node: %.300s", key, p->egg,
             why ? why : spd_strerror(rc));
  free(p->egg);
  free(p->interp);
  free(p->reqs);
  free(p);
}

/* One version: its environment built unless this node has it. */
static int prebuild_one(pyenvs_t *pe, const char *egg) {
  char key[PYENV_KEY_LEN + 1], err[256] = "", *py = NULL, *reqs = NULL, *want = NULL;
  prebuild_t *p = calloc(1, sizeof(*p));
  if (!p || !(p->egg = strdup(egg))) goto skip;
  int rc = pyenv_for_egg(pe->dir, egg, &py, key);
  free(py);
  if (rc == SPD_ENOFILE) {
    rc = pyenv_sidecar_read(egg, key, &p->interp, &p->reqs);
  } else if (!rc && !py) {
    rc = pyenv_from_file(egg, &reqs, &want);
    if (!rc) rc = pyenv_spec(pe->cfg->python, reqs, want, &p->interp, &p->reqs, key, err,
                             sizeof(err));
    free(reqs);
    free(want);
    if (!rc && p->interp && pyenv_ready(pe->dir, key)) {
      pyenv_sidecar_write(egg, key, p->interp, p->reqs);
      goto skip;
    }
  } else {
    goto skip; /* built, or unreadable */
  }
  if (rc || !p->interp || pyenvs_ensure(pe, p->interp, p->reqs, 0, prebuilt, p)) goto skip;
  return 1;
skip:
  if (p) {
    free(p->egg);
    free(p->interp);
    free(p->reqs);
    free(p);
  }
  return 0;
}

int pyenvs_prebuild(pyenvs_t *pe) {
  char **projects = NULL;
  size_t np = 0;
  int started = 0;
  if (pe->closing || eggs_projects(pe->cfg->eggs_dir, &projects, &np)) return 0;
  for (size_t i = 0; i < np; i++) {
    char **v = NULL;
    size_t nv = 0;
    if (eggs_versions(pe->cfg->eggs_dir, projects[i], &v, &nv)) continue;
    for (size_t k = 0; k < nv; k++) {
      char *egg = NULL;
      if (eggs_path(pe->cfg->eggs_dir, projects[i], v[k], &egg) == 0)
        started += prebuild_one(pe, egg);
      free(egg);
    }
    strv_free(v, nv);
  }
  strv_free(projects, np);
  return started;
}
