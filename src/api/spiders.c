#include "api/spiders.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/names.h"
#include "error.h"
#include "log.h"
#include "flow/env.h"
#include "store/marchive.h"
#include "store/pyenv.h"

#ifndef SPIDERD_DEFAULT_PYTHON
#define SPIDERD_DEFAULT_PYTHON "python3"
#endif

#define OUTPUT_LIMIT (1024 * 1024)
#define READ_CHUNK (64 * 1024)
/* How long output may still arrive after the runner exits: something that
 * escaped its process group could hold the pipes open for ever. */
#define DRAIN_MS 2000

/* Shared by the cache and the callbacks in progress, so spiders_forget inside
 * a callback cannot free the names that callback is reading. */
typedef struct namelist {
  int refs;
  size_t n;
  char **names;
} namelist_t;

/* What a listing's result depends on. An egg rewritten in place gets a new
 * inode (eggs_commit renames), size or mtime, so it never hits a stale entry. */
typedef struct key {
  char *project;
  char *egg_path; /* NULL: a [settings] project, keyed by name alone */
  dev_t dev;
  ino_t ino;
  off_t size;
  struct timespec mtime;
} egg_key_t;

typedef struct entry {
  struct entry *next;
  egg_key_t key;
  namelist_t *list;
} entry_t;

typedef struct waiter {
  spiders_cb cb;
  void *ud;
} waiter_t;

typedef struct capture {
  char *data;
  size_t len;
  size_t dropped;
  char chunk[READ_CHUNK];
} capture_t;

typedef struct listing {
  struct listing *next;
  spiders_t *sp;
  egg_key_t key;
  waiter_t *waiters;
  size_t nwaiters;
  uv_process_t proc;
  uv_pipe_t out_pipe, err_pipe;
  uv_timer_t drain;
  int open; /* handles not yet closed; the listing is freed at 0 */
  int spawned;
  int exited;
  int64_t exit_status;
  int term_signal;
  int pid;
  int cancelled; /* spiders_free: no callbacks */
  int no_cache;  /* spiders_forget ran meanwhile: the result may be stale */
  capture_t out, err;
} listing_t;

struct spiders {
  uv_loop_t *loop;
  const config_t *cfg;
  entry_t *cache;
  listing_t *listings;
  char *envs_dir; /* store/pyenv.h */
  spiders_env_fn build_env; /* builds a missing environment; NULL: none */
  void *build_ctx;
  int depth;   /* callbacks running: spiders_free must not free under them */
  int closing; /* spiders_free was called */
};

/* ---- keys, name lists, cache ---------------------------------------------- */

static void key_release(egg_key_t *k) {
  free(k->project);
  free(k->egg_path);
  memset(k, 0, sizeof(*k));
}

static int key_make(egg_key_t *k, const char *project, const char *egg_path) {
  struct stat st;
  memset(k, 0, sizeof(*k));
  if (egg_path) {
    if (stat(egg_path, &st)) return -errno;
    k->dev = st.st_dev;
    k->ino = st.st_ino;
    k->size = st.st_size;
    k->mtime = st.st_mtim;
    k->egg_path = strdup(egg_path);
    if (!k->egg_path) return -ENOMEM;
  }
  k->project = strdup(project);
  if (!k->project) {
    key_release(k);
    return -ENOMEM;
  }
  return 0;
}

static int same_egg(const egg_key_t *a, const egg_key_t *b) {
  if (strcmp(a->project, b->project) != 0) return 0;
  if (!a->egg_path || !b->egg_path) return !a->egg_path && !b->egg_path;
  return strcmp(a->egg_path, b->egg_path) == 0;
}

static int key_equal(const egg_key_t *a, const egg_key_t *b) {
  if (!same_egg(a, b)) return 0;
  if (!a->egg_path) return 1;
  return a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
         a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

static void namelist_unref(namelist_t *nl) {
  if (!nl || --nl->refs > 0) return;
  for (size_t i = 0; i < nl->n; i++) free(nl->names[i]);
  free(nl->names);
  free(nl);
}

static void entry_free(entry_t *e) {
  key_release(&e->key);
  namelist_unref(e->list);
  free(e);
}

static entry_t *cache_find(spiders_t *sp, const egg_key_t *k) {
  for (entry_t *e = sp->cache; e; e = e->next)
    if (key_equal(&e->key, k)) return e;
  return NULL;
}

/* Takes the key; an older entry for the same egg path is dropped. */
static int cache_put(spiders_t *sp, egg_key_t *k, namelist_t *nl) {
  for (entry_t **pe = &sp->cache; *pe;) {
    entry_t *e = *pe;
    if (same_egg(&e->key, k)) {
      *pe = e->next;
      entry_free(e);
    } else {
      pe = &e->next;
    }
  }
  entry_t *e = calloc(1, sizeof(*e));
  if (!e) return -ENOMEM;
  e->key = *k;
  memset(k, 0, sizeof(*k));
  e->list = nl;
  nl->refs++;
  e->next = sp->cache;
  sp->cache = e;
  return 0;
}

/* ---- output ---------------------------------------------------------------- */


/* A NUL-terminated copy with every invalid byte replaced by U+FFFD, as
 * Python's errors="replace" would: the text ends up in JSON, which must be
 * UTF-8, and the 1 MiB cut can split a character. */
static char *utf8_scrub(const char *s, size_t len) {
  const unsigned char *u = (const unsigned char *)s;
  char *out = malloc(len * 3 + 1), *o = out;
  if (!out) return NULL;
  for (size_t i = 0; i < len;) {
    size_t l = utf8_sequence((const char *)u + i, len - i);
    if (l) {
      memcpy(o, u + i, l);
      o += l;
      i += l;
    } else {
      memcpy(o, "\xef\xbf\xbd", 3);
      o += 3;
      i++;
    }
  }
  *o = '\0';
  return out;
}

/* Non-empty lines of stdout; "\r\n" and lone "\r" end lines too, as
 * Python's splitlines() would split them. */
static namelist_t *names_parse(const capture_t *out) {
  namelist_t *nl = calloc(1, sizeof(*nl));
  char *text = utf8_scrub(out->data ? out->data : "", out->len);
  size_t cap = 0;
  if (!nl || !text) goto fail;
  nl->refs = 1;
  for (char *line = text, *end; *line; line = end) {
    end = line + strcspn(line, "\r\n");
    size_t len = (size_t)(end - line);
    if (*end) *end++ = '\0';
    if (!len) continue;
    if (nl->n == cap) {
      size_t ncap = cap ? cap * 2 : 16;
      char **nv = realloc(nl->names, ncap * sizeof(*nv));
      if (!nv) goto fail;
      nl->names = nv;
      cap = ncap;
    }
    if (!(nl->names[nl->n] = strdup(line))) goto fail;
    nl->n++;
  }
  free(text);
  return nl;
fail:
  free(text);
  if (nl) {
    nl->refs = 1;
    namelist_unref(nl);
  }
  return NULL;
}

/* Scrapyd's RunnerError(stderr or stdout); a word from us when both are
 * empty, so the message never reads "RunnerError: ". */
static char *error_text(const listing_t *l) {
  const capture_t *c = l->err.len ? &l->err : &l->out;
  char *text = NULL, *body;
  if (!c->len) {
    int r = l->term_signal
                ? asprintf(&text, "runner killed by signal %d", l->term_signal)
                : asprintf(&text, "runner exited with status %lld", (long long)l->exit_status);
    return r < 0 ? NULL : text;
  }
  body = utf8_scrub(c->data, c->len);
  if (!body || !c->dropped) return body;
  if (asprintf(&text, "%s\n[spiderd: %zu more bytes of output dropped]", body, c->dropped) < 0)
    text = NULL;
  free(body);
  return text;
}

/* ---- lifecycle ------------------------------------------------------------- */

static void maybe_destroy(spiders_t *sp) {
  if (!sp->closing || sp->depth || sp->listings) return;
  while (sp->cache) {
    entry_t *e = sp->cache;
    sp->cache = e->next;
    entry_free(e);
  }
  free(sp->envs_dir);
  free(sp);
}

static void listing_unlink(listing_t *l) {
  for (listing_t **pl = &l->sp->listings; *pl; pl = &(*pl)->next)
    if (*pl == l) {
      *pl = l->next;
      return;
    }
}

static void listing_free(listing_t *l) {
  key_release(&l->key);
  free(l->waiters);
  free(l->out.data);
  free(l->err.data);
  free(l);
}

static void deliver(listing_t *l) {
  spiders_t *sp = l->sp;
  int ok = l->exited && l->exit_status == 0 && l->term_signal == 0;
  namelist_t *nl = NULL;
  char *text = NULL;
  int rc = 0;

  if (ok) {
    nl = names_parse(&l->out);
    if (!nl) rc = -ENOMEM;
    /* A failed cache_put costs only a later re-listing. */
    if (nl && !l->no_cache) (void)cache_put(sp, &l->key, nl);
  } else {
    rc = SPD_ERUNNER;
    text = error_text(l);
    log_warn("spiders", "listing spiders of project '%s' failed (status %lld, signal %d)",
             l->key.project ? l->key.project : "", (long long)l->exit_status, l->term_signal);
  }
  sp->depth++;
  for (size_t i = 0; i < l->nwaiters && !sp->closing; i++) {
    if (nl)
      l->waiters[i].cb(l->waiters[i].ud, 0, nl->names, nl->n, NULL);
    else
      l->waiters[i].cb(l->waiters[i].ud, rc, NULL, 0, text ? text : "out of memory");
  }
  sp->depth--;
  namelist_unref(nl);
  free(text);
}

static void on_close(uv_handle_t *h) {
  listing_t *l = h->data;
  if (--l->open > 0) return;
  spiders_t *sp = l->sp;
  listing_unlink(l);
  if (!l->cancelled) deliver(l);
  listing_free(l);
  maybe_destroy(sp);
}

static void close_one(uv_handle_t *h) {
  if (!uv_is_closing(h)) uv_close(h, on_close);
}

static int pipes_closing(listing_t *l) {
  return uv_is_closing((uv_handle_t *)&l->out_pipe) && uv_is_closing((uv_handle_t *)&l->err_pipe);
}

/* The drain timer outlives the process only while output may still come. */
static void maybe_close_timer(listing_t *l) {
  if (l->exited && pipes_closing(l)) close_one((uv_handle_t *)&l->drain);
}

static void on_drain(uv_timer_t *t) {
  listing_t *l = t->data;
  close_one((uv_handle_t *)&l->out_pipe);
  close_one((uv_handle_t *)&l->err_pipe);
  close_one((uv_handle_t *)&l->drain);
}

static void on_child_exit(uv_process_t *p, int64_t status, int sig) {
  listing_t *l = p->data;
  l->exited = 1;
  l->exit_status = status;
  l->term_signal = sig;
  /* The runner leads its own group: whatever it left behind goes too, so the
   * pipes reach EOF now. */
  if (l->pid > 0) kill(-l->pid, SIGKILL);
  close_one((uv_handle_t *)&l->proc);
  if (pipes_closing(l))
    close_one((uv_handle_t *)&l->drain);
  else
    uv_timer_start(&l->drain, on_drain, DRAIN_MS, 0);
}

static capture_t *capture_of(listing_t *l, uv_stream_t *s) {
  return s == (uv_stream_t *)&l->out_pipe ? &l->out : &l->err;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  capture_t *c = capture_of(h->data, (uv_stream_t *)h);
  *buf = uv_buf_init(c->chunk, sizeof(c->chunk));
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  listing_t *l = s->data;
  capture_t *c = capture_of(l, s);
  if (nread > 0) {
    size_t n = (size_t)nread, room = OUTPUT_LIMIT - c->len, take = n < room ? n : room;
    char *grown = take ? realloc(c->data, c->len + take) : c->data;
    if (!grown) take = 0;
    c->data = grown;
    if (take) memcpy(c->data + c->len, buf->base, take);
    c->len += take;
    c->dropped += n - take;
    return;
  }
  if (nread < 0) {
    close_one((uv_handle_t *)s);
    maybe_close_timer(l);
  }
}

/* Stops a listing without callbacks. A running child is killed and its
 * process handle closes in on_child_exit, so it is always reaped. */
static void listing_abort(listing_t *l) {
  l->cancelled = 1;
  close_one((uv_handle_t *)&l->out_pipe);
  close_one((uv_handle_t *)&l->err_pipe);
  if (!l->spawned) {
    close_one((uv_handle_t *)&l->proc);
    close_one((uv_handle_t *)&l->drain);
    return;
  }
  if (!l->exited)
    kill(-l->pid, SIGKILL);
  else
    maybe_close_timer(l);
}

static int add_waiter(listing_t *l, spiders_cb cb, void *ud) {
  waiter_t *w = realloc(l->waiters, (l->nwaiters + 1) * sizeof(*w));
  if (!w) return -ENOMEM;
  l->waiters = w;
  w[l->nwaiters].cb = cb;
  w[l->nwaiters].ud = ud;
  l->nwaiters++;
  return 0;
}

/* Takes the key, whatever the outcome. */
static int listing_start(spiders_t *sp, egg_key_t *key, const char *version, const char *py,
                         spiders_cb cb, void *ud) {
  static const char *const extra[] = {"PYTHONIOENCODING=UTF-8", NULL};
  const char *python = py                                       ? py
                       : sp->cfg->python && *sp->cfg->python ? sp->cfg->python
                                                              : SPIDERD_DEFAULT_PYTHON;
  char *args[] = {(char *)python, "-m", "spiderd_runner", "list", "-s", "LOG_STDOUT=0", NULL};
  uv_stdio_container_t stdio[3];
  uv_process_options_t opts;
  char **env = NULL;
  listing_t *l;
  int rc;

  l = calloc(1, sizeof(*l));
  if (!l) return -ENOMEM;
  l->sp = sp;
  rc = add_waiter(l, cb, ud);
  if (rc) {
    free(l);
    return rc;
  }
  l->key = *key;
  memset(key, 0, sizeof(*key));
  /* pipe and timer init cannot fail on Unix; from here on the listing is
   * freed only by on_close. */
  uv_pipe_init(sp->loop, &l->out_pipe, 0);
  uv_pipe_init(sp->loop, &l->err_pipe, 0);
  uv_timer_init(sp->loop, &l->drain);
  l->out_pipe.data = l->err_pipe.data = l->drain.data = l->proc.data = l;
  l->open = 3;
  l->next = sp->listings;
  sp->listings = l;

  env = env_build(sp->cfg, l->key.project, l->key.egg_path, version, extra);
  if (!env) {
    rc = -ENOMEM;
    goto fail;
  }
  memset(&opts, 0, sizeof(opts));
  stdio[0].flags = UV_IGNORE;
  stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[1].data.stream = (uv_stream_t *)&l->out_pipe;
  stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[2].data.stream = (uv_stream_t *)&l->err_pipe;
  opts.file = python;
  opts.args = args;
  opts.env = env;
  opts.stdio = stdio;
  opts.stdio_count = 3;
  opts.exit_cb = on_child_exit;
  /* Its own process group, so a kill reaches whatever the runner started. */
  opts.flags = UV_PROCESS_DETACHED;
  /* uv_spawn initialises the handle even when it fails: it must be closed. */
  l->open++;
  rc = uv_spawn(sp->loop, &l->proc, &opts);
  env_free(env);
  if (rc) {
    log_warn("spiders", "cannot run %s: %s", python, uv_strerror(rc));
    goto fail;
  }
  l->spawned = 1;
  l->pid = l->proc.pid;
  rc = uv_read_start((uv_stream_t *)&l->out_pipe, on_alloc, on_read);
  if (rc) goto fail;
  rc = uv_read_start((uv_stream_t *)&l->err_pipe, on_alloc, on_read);
  if (rc) goto fail;
  return 0;

fail:
  if (l->open == 3) {
    /* env_build failed before the process handle existed. */
    l->cancelled = 1;
    close_one((uv_handle_t *)&l->out_pipe);
    close_one((uv_handle_t *)&l->err_pipe);
    close_one((uv_handle_t *)&l->drain);
  } else {
    listing_abort(l);
  }
  return rc;
}

/* A project of command spiders (store/marchive.h) lists its manifest: no
 * process runs. The archive was checked when it was added; a file changed
 * behind the daemon's back is reported, not listed. Takes the key. */
static int manifest_listed(spiders_t *sp, egg_key_t *key, const char *egg_path, spiders_cb cb,
                           void *ud) {
  manifest_t m;
  char err[512] = "";
  int rc = marchive_check_file(egg_path, &m, err, sizeof(err));
  namelist_t *nl = NULL;
  if (!rc) {
    nl = calloc(1, sizeof(*nl));
    if (nl) {
      nl->refs = 1;
      nl->names = calloc(m.n, sizeof(*nl->names));
    }
    for (size_t i = 0; nl && nl->names && i < m.n; i++) {
      nl->names[i] = m.spiders[i].name; /* taken from the manifest */
      m.spiders[i].name = NULL;
      nl->n++;
    }
    if (!nl || !nl->names) rc = -ENOMEM;
  }
  manifest_release(&m);
  if (rc == -ENOMEM) {
    if (nl) namelist_unref(nl);
    key_release(key);
    return rc;
  }
  if (nl) (void)cache_put(sp, key, nl);
  key_release(key);
  sp->depth++;
  if (nl)
    cb(ud, 0, nl->names, nl->n, NULL);
  else
    cb(ud, SPD_ERUNNER, NULL, 0, err);
  sp->depth--;
  namelist_unref(nl);
  maybe_destroy(sp);
  return 0;
}

/* ---- API ------------------------------------------------------------------- */

int spiders_init(spiders_t **out, uv_loop_t *loop, const config_t *cfg) {
  spiders_t *sp;
  *out = NULL;
  if (!loop || !cfg) return -EINVAL;
  sp = calloc(1, sizeof(*sp));
  if (!sp) return -ENOMEM;
  sp->loop = loop;
  sp->cfg = cfg;
  sp->envs_dir = pyenv_dir(cfg->dbs_dir ? cfg->dbs_dir : "dbs");
  if (!sp->envs_dir) {
    free(sp);
    return -ENOMEM;
  }
  *out = sp;
  return 0;
}

void spiders_free(spiders_t *sp) {
  if (!sp || sp->closing) return;
  sp->closing = 1;
  for (listing_t *l = sp->listings; l; l = l->next)
    if (!l->cancelled) listing_abort(l);
  maybe_destroy(sp);
}

static void list_failed(spiders_t *sp, spiders_cb cb, void *ud, const char *why) {
  sp->depth++;
  cb(ud, SPD_ERUNNER, NULL, 0, why);
  sp->depth--;
  maybe_destroy(sp);
}

/* A listing waiting for its version's environment to be built here. */
typedef struct env_wait {
  spiders_t *sp;
  char *project, *egg_path, *version, *interp, *reqs;
  spiders_cb cb;
  void *ud;
} env_wait_t;

static void env_wait_free(env_wait_t *w) {
  free(w->project);
  free(w->egg_path);
  free(w->version);
  free(w->interp);
  free(w->reqs);
  free(w);
}

static void env_waited(void *ud, int rc, const char *key, const char *why) {
  env_wait_t *w = ud;
  char text[512];
  if (!rc && pyenv_sidecar_write(w->egg_path, key, w->interp, w->reqs)) rc = -EIO;
  if (!rc) rc = spiders_list(w->sp, w->project, w->egg_path, w->version, w->cb, w->ud);
  if (rc) { /* never touches sp: it may be gone when the daemon stops */
    snprintf(text, sizeof(text), "the version's Python environment %s could not be built: %s",
             key, why ? why : spd_strerror(rc));
    w->cb(w->ud, SPD_ERUNNER, NULL, 0, text);
  }
  env_wait_free(w);
}

/* The environment the archive asks for is not built here (a version copied
 * from another node): it is built, then the listing runs. 0 when waiting. */
static int env_build_then_list(spiders_t *sp, const char *project, const char *egg_path,
                               const char *version, char *interp, char *reqs, spiders_cb cb,
                               void *ud) {
  env_wait_t *w = calloc(1, sizeof(*w));
  if (!w || !sp->build_env) {
    free(w);
    free(interp);
    free(reqs);
    return -1;
  }
  *w = (env_wait_t){.sp = sp, .project = strdup(project), .egg_path = strdup(egg_path),
                    .version = version ? strdup(version) : NULL, .interp = interp,
                    .reqs = reqs, .cb = cb, .ud = ud};
  if (!w->project || !w->egg_path || (version && !w->version) ||
      sp->build_env(sp->build_ctx, interp, reqs, env_waited, w)) {
    env_wait_free(w);
    return -1;
  }
  return 0;
}

/* A stored version's environment (store/pyenv.h): its python into *py
 * (NULL: the daemon's); 1 when the listing waits for its build or failed
 * (cb told why). A version copied from another node has no record here:
 * the archive says what it needs. */
static int egg_python(spiders_t *sp, const char *project, const char *egg_path,
                      const char *version, char **py, spiders_cb cb, void *ud) {
  char key[PYENV_KEY_LEN + 1], why[320] = "";
  char *interp = NULL, *norm = NULL, *reqs = NULL, *want = NULL;
  int rc = pyenv_for_egg(sp->envs_dir, egg_path, py, key);
  if (!rc && *py) return 0;
  if (rc == SPD_ENOFILE) {
    rc = pyenv_sidecar_read(egg_path, key, &interp, &norm);
  } else if (!rc) {
    rc = pyenv_from_file(egg_path, &reqs, &want);
    if (!rc)
      rc = pyenv_spec(sp->cfg->python, reqs, want, &interp, &norm, key, why, sizeof(why));
    free(reqs);
    free(want);
    if (!rc && !interp) return 0; /* the daemon's python */
    if (!rc && pyenv_ready(sp->envs_dir, key)) {
      rc = pyenv_sidecar_write(egg_path, key, interp, norm);
      free(interp);
      free(norm);
      if (!rc) *py = pyenv_python(sp->envs_dir, key);
      if (!rc && *py) return 0;
      interp = norm = NULL;
    }
  }
  if (!rc && interp &&
      env_build_then_list(sp, project, egg_path, version, interp, norm, cb, ud) == 0) {
    log_info("spiders", "listing the spiders of project '%s' waits for environment %s to be "
             "built here", project, key);
    return 1;
  }
  if (!why[0])
    snprintf(why, sizeof(why), "the version's Python environment %s is not built on this node%s",
             key, rc ? "" : " and cannot be built");
  list_failed(sp, cb, ud, why);
  return 1;
}

void spiders_set_env_builder(spiders_t *sp, spiders_env_fn fn, void *ctx) {
  sp->build_env = fn;
  sp->build_ctx = ctx;
}

int spiders_list(spiders_t *sp, const char *project, const char *egg_path, const char *version,
                 spiders_cb cb, void *ud) {
  return spiders_list_py(sp, project, egg_path, version, NULL, cb, ud);
}

int spiders_list_py(spiders_t *sp, const char *project, const char *egg_path,
                    const char *version, const char *python, spiders_cb cb, void *ud) {
  egg_key_t key;
  char *own_py = NULL;
  int rc;

  if (!sp || !project || !cb) return -EINVAL;
  if (sp->closing) return SPD_ESHUTDOWN;
  rc = key_make(&key, project, egg_path);
  if (rc) return rc;

  entry_t *e = cache_find(sp, &key);
  if (e) {
    namelist_t *nl = e->list;
    key_release(&key);
    nl->refs++;
    sp->depth++;
    cb(ud, 0, nl->names, nl->n, NULL);
    sp->depth--;
    namelist_unref(nl);
    maybe_destroy(sp);
    return 0;
  }
  if (egg_path && marchive_kind_file(egg_path) == MARCHIVE_MANIFEST)
    return manifest_listed(sp, &key, egg_path, cb, ud);
  if (!python && egg_path && egg_python(sp, project, egg_path, version, &own_py, cb, ud)) {
    key_release(&key);
    return 0;
  }
  /* Concurrent requests for one egg share one runner. */
  for (listing_t *l = sp->listings; l; l = l->next) {
    if (l->cancelled || l->no_cache || !key_equal(&l->key, &key)) continue;
    key_release(&key);
    return add_waiter(l, cb, ud);
  }
  rc = listing_start(sp, &key, version, python ? python : own_py, cb, ud);
  key_release(&key); /* a no-op unless listing_start could not take it */
  free(own_py);
  return rc;
}

void spiders_forget(spiders_t *sp, const char *project) {
  if (!sp || !project) return;
  for (entry_t **pe = &sp->cache; *pe;) {
    entry_t *e = *pe;
    if (strcmp(e->key.project, project) == 0) {
      *pe = e->next;
      entry_free(e);
    } else {
      pe = &e->next;
    }
  }
  for (listing_t *l = sp->listings; l; l = l->next)
    if (l->key.project && strcmp(l->key.project, project) == 0) l->no_cache = 1;
}

int spiders_prime(spiders_t *sp, const char *project, const char *egg_path,
                  char *const *names, size_t n) {
  egg_key_t key;
  int rc = key_make(&key, project, egg_path);
  if (rc) return rc;
  namelist_t *nl = calloc(1, sizeof(*nl));
  if (nl) {
    nl->refs = 1;
    nl->names = calloc(n ? n : 1, sizeof(char *));
  }
  for (size_t i = 0; nl && nl->names && i < n; i++, nl->n++)
    if (!(nl->names[i] = strdup(names[i]))) break;
  if (!nl || !nl->names || nl->n < n) {
    rc = -ENOMEM;
  } else {
    rc = cache_put(sp, &key, nl);
  }
  namelist_unref(nl); /* the cache holds its own reference */
  key_release(&key);
  return rc;
}
