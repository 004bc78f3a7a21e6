#include "run/warm.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "flow/env.h"
#include "log.h"

#define READY_TIMEOUT_MS 60000 /* a template not ready by then is given up */
#define SWEEP_MS 5000          /* idle, replaced and deleted versions are looked for */
#define DEATHS_MAX 3           /* deaths within warm_idle before a version starts cold */
#define MSG_MAX 65536          /* largest answer a template sends */
#define CMDLINE_ROOM 8192      /* bytes of argv a template keeps for its crawls' */

typedef struct call {
  struct call *next;
  warm_cb cb;
  void *ud;
} call_t;

typedef enum tstate {
  T_STARTING, /* spawned, importing */
  T_READY,    /* serves forks */
  T_COLD,     /* a record: this version starts cold until cold_until */
  T_DEAD,     /* a record: its template died; the next crawl starts one */
} tstate_t;

typedef struct tpl {
  struct tpl *next;
  warm_t *w;
  char *project, *version, *egg; /* the key (version, egg: NULL allowed) */
  struct stat egg_st;            /* the egg as it was when the template started */
  tstate_t state;
  int linked;  /* in w->tpls */
  int handles; /* open: the process and the socket's poll */
  int alive;   /* the process has not been reaped */
  int fd;      /* our end of the socket pair; -1 once closed */
  uv_process_t proc;
  uv_poll_t poll;
  call_t *calls, **tail; /* forks asked for, answered in order */
  int64_t started, last_used, cold_until; /* uv_now ms */
  int deaths;
  int64_t first_death;
} tpl_t;

struct warm {
  uv_loop_t *loop;
  const config_t *cfg;
  tpl_t *tpls;
  uv_timer_t sweep;
  int open; /* handles of w and its templates still to close */
  uint64_t *gauge; /* NULL = none */
  int closing;
};

static int64_t now_ms(const warm_t *w) { return (int64_t)uv_now(w->loop); }

static int same_str(const char *a, const char *b) {
  return a == b || (a && b && !strcmp(a, b));
}

static const char *shown(const char *version) { return version ? version : "(latest)"; }

static void tpl_maybe_free(tpl_t *t) {
  if (t->linked || t->handles) return;
  free(t->project);
  free(t->version);
  free(t->egg);
  free(t);
}

static void w_maybe_free(warm_t *w) {
  if (w->closing && w->open == 0) free(w);
}

static void handle_closed(uv_handle_t *h) {
  tpl_t *t = h->data;
  warm_t *w = t->w;
  t->handles--;
  w->open--;
  tpl_maybe_free(t);
  w_maybe_free(w);
}

static void unlink_tpl(tpl_t *t) {
  if (!t->linked) return;
  for (tpl_t **pp = &t->w->tpls; *pp; pp = &(*pp)->next)
    if (*pp == t) {
      *pp = t->next;
      break;
    }
  t->linked = 0;
  tpl_maybe_free(t);
}

/* Answers every call in flight with pid 0: start those crawls cold. */
static void fail_calls(tpl_t *t, const char *why) {
  call_t *c = t->calls;
  t->calls = NULL;
  t->tail = &t->calls;
  while (c) {
    call_t *next = c->next;
    c->cb(c->ud, 0, why);
    free(c);
    c = next;
  }
}

/* Closes the socket (a template reading EOF exits) and KILLs the process;
 * the exit callback reaps it. */
static void gauge_update(warm_t *w);

static void shut(tpl_t *t, const char *why) {
  if (t->fd >= 0) {
    uv_close((uv_handle_t *)&t->poll, handle_closed);
    close(t->fd);
    t->fd = -1;
  }
  if (t->alive) uv_process_kill(&t->proc, SIGKILL);
  fail_calls(t, why);
  gauge_update(t->w);
}

static void retire(tpl_t *t, const char *why) {
  shut(t, why);
  unlink_tpl(t);
}

/* This version cannot be served warm: said once, then cold until later. */
static void go_cold(tpl_t *t, const char *why) {
  warm_t *w = t->w;
  log_warn("warm", "project '%s' version %s starts its crawls cold: %s", t->project,
           shown(t->version), why);
  t->state = T_COLD;
  t->cold_until = now_ms(w) + (int64_t)(w->cfg->warm_idle * 1000);
  shut(t, why);
}

/* The template is gone (its socket closed, or it exited). */
static void gone(tpl_t *t, const char *why) {
  warm_t *w = t->w;
  if (t->state == T_STARTING) {
    go_cold(t, why);
    return;
  }
  if (t->state != T_READY) return;
  int64_t now = now_ms(w);
  if (!t->deaths || now - t->first_death > (int64_t)(w->cfg->warm_idle * 1000)) {
    t->deaths = 0;
    t->first_death = now;
  }
  t->deaths++;
  if (t->deaths >= DEATHS_MAX) {
    go_cold(t, "its template died three times");
    return;
  }
  log_warn("warm", "the template of project '%s' version %s %s; the next crawl starts another",
           t->project, shown(t->version), why);
  t->state = T_DEAD;
  shut(t, why);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig) {
  tpl_t *t = p->data;
  t->alive = 0;
  if (t->fd >= 0) {
    char why[96];
    snprintf(why, sizeof(why), "exited (status %lld, signal %d)", (long long)status, sig);
    gone(t, why);
  }
  uv_close((uv_handle_t *)p, handle_closed);
}

/* One answer of the template's. */
static void answer(tpl_t *t, const char *buf, size_t len) {
  json_error_t jerr;
  json_t *doc = json_loadb(buf, len, 0, &jerr);
  if (!json_is_object(doc)) {
    json_decref(doc);
    gone(t, "sent something that is not JSON");
    return;
  }
  if (t->state == T_STARTING) {
    if (json_is_true(json_object_get(doc, "ready"))) {
      t->state = T_READY;
      log_info("warm", "template ready: project '%s' version %s, pid %d, %lld ms, %lld modules",
               t->project, shown(t->version), t->proc.pid,
               (long long)json_integer_value(json_object_get(doc, "ms")),
               (long long)json_integer_value(json_object_get(doc, "modules")));
      size_t i;
      json_t *v;
      json_array_foreach(json_object_get(doc, "skipped"), i, v) {
        log_info("warm", "project '%s' version %s: %s is imported by each crawl, not the "
                 "template: it installs a Twisted reactor at import", t->project,
                 shown(t->version), json_string_value(v));
      }
    } else {
      const char *why = json_string_value(json_object_get(doc, "why"));
      go_cold(t, why ? why : "the template refused");
    }
    json_decref(doc);
    return;
  }
  call_t *c = t->calls;
  if (!c) {
    json_decref(doc);
    gone(t, "answered a fork nobody asked for");
    return;
  }
  t->calls = c->next;
  if (!t->calls) t->tail = &t->calls;
  int pid = (int)json_integer_value(json_object_get(doc, "pid"));
  const char *why = json_string_value(json_object_get(doc, "cold"));
  if (!why) why = json_string_value(json_object_get(doc, "error"));
  if (pid <= 0 && !why) why = "the template did not fork";
  if (pid <= 0 && !json_object_get(doc, "cold"))
    log_warn("warm", "template of project '%s' version %s could not fork: %s", t->project,
             shown(t->version), why);
  c->cb(c->ud, pid > 0 ? pid : 0, pid > 0 ? NULL : why);
  free(c);
  json_decref(doc);
}

static void on_readable(uv_poll_t *h, int status, int events) {
  tpl_t *t = h->data;
  (void)events;
  if (status < 0) {
    gone(t, "its socket failed");
    return;
  }
  char *buf = malloc(MSG_MAX);
  if (!buf) return;
  while (t->fd >= 0) {
    ssize_t n = recv(t->fd, buf, MSG_MAX, MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
    if (n <= 0) {
      gone(t, "closed its socket");
      break;
    }
    answer(t, buf, (size_t)n);
  }
  free(buf);
}

static tpl_t *spawn(warm_t *w, const warm_req_t *r, const struct stat *st) {
  tpl_t *t = calloc(1, sizeof(*t));
  if (!t) return NULL;
  t->w = w;
  t->fd = -1;
  t->tail = &t->calls;
  t->project = strdup(r->project);
  t->version = r->version ? strdup(r->version) : NULL;
  t->egg = r->egg ? strdup(r->egg) : NULL;
  if (st) t->egg_st = *st;
  int sv[2] = {-1, -1};
  char **env = NULL;
  if (!t->project || (r->version && !t->version) || (r->egg && !t->egg) ||
      socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) ||
      !(env = env_build(w->cfg, r->project, r->egg, r->version, NULL)))
    goto fail;
  fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
  /* The last argument is room: a crawl's argv is written over the
   * template's, so that ps shows it as a cold start's (template.py). */
  static char room[CMDLINE_ROOM + 1];
  if (!room[0]) memset(room, '.', CMDLINE_ROOM);
  char *python = r->python ? (char *)r->python : w->cfg->python; /* its environment's */
  char *args[] = {python, "-m", "spiderd_runner.template", room, NULL};
  uv_stdio_container_t stdio[4] = {{.flags = UV_IGNORE},
                                   {.flags = UV_INHERIT_FD, .data.fd = STDERR_FILENO},
                                   {.flags = UV_INHERIT_FD, .data.fd = STDERR_FILENO},
                                   {.flags = UV_INHERIT_FD, .data.fd = sv[1]}};
  uv_process_options_t opts = {.exit_cb = on_exit_cb, .file = args[0], .args = args,
                               .env = env, .flags = UV_PROCESS_DETACHED,
                               .stdio_count = 4, .stdio = stdio};
  t->proc.data = t;
  int rc = uv_spawn(w->loop, &t->proc, &opts);
  env_free(env);
  env = NULL;
  t->handles++;
  w->open++;
  close(sv[1]);
  sv[1] = -1;
  if (rc) {
    log_warn("warm", "cannot start a template (%s): %s", args[0], uv_strerror(rc));
    close(sv[0]);
    uv_close((uv_handle_t *)&t->proc, handle_closed);
    return NULL; /* freed once the handle is closed */
  }
  t->alive = 1;
  t->fd = sv[0];
  t->poll.data = t;
  uv_poll_init(w->loop, &t->poll, t->fd);
  uv_poll_start(&t->poll, UV_READABLE | UV_DISCONNECT, on_readable);
  t->handles++;
  w->open++;
  t->state = T_STARTING;
  t->started = t->last_used = now_ms(w);
  t->next = w->tpls;
  w->tpls = t;
  t->linked = 1;
  log_info("warm", "starting a template for project '%s' version %s (pid %d)", t->project,
           shown(t->version), t->proc.pid);
  gauge_update(w);
  return t;
fail:
  if (sv[0] >= 0) close(sv[0]);
  if (sv[1] >= 0) close(sv[1]);
  env_free(env);
  tpl_maybe_free(t);
  return NULL;
}

static unsigned live(const warm_t *w) {
  unsigned n = 0;
  for (const tpl_t *t = w->tpls; t; t = t->next) n += t->state == T_STARTING || t->state == T_READY;
  return n;
}

static void gauge_update(warm_t *w) {
  if (w->gauge) __atomic_store_n(w->gauge, (uint64_t)live(w), __ATOMIC_RELAXED);
}

void warm_set_gauge(warm_t *w, uint64_t *gauge) {
  if (!w) return;
  w->gauge = gauge;
  gauge_update(w);
}

/* Room for one more template: the least recently used idle one goes. */
static int make_room(warm_t *w) {
  if (live(w) < (unsigned)w->cfg->warm_templates) return 1;
  tpl_t *lru = NULL;
  for (tpl_t *t = w->tpls; t; t = t->next)
    if (t->state == T_READY && !t->calls && (!lru || t->last_used < lru->last_used)) lru = t;
  if (!lru) return 0;
  log_info("warm", "template of project '%s' version %s ends: room for another", lru->project,
           shown(lru->version));
  retire(lru, "ended");
  return 1;
}

static int egg_changed(const tpl_t *t, const struct stat *st) {
  return t->egg_st.st_dev != st->st_dev || t->egg_st.st_ino != st->st_ino ||
         t->egg_st.st_size != st->st_size ||
         t->egg_st.st_mtim.tv_sec != st->st_mtim.tv_sec ||
         t->egg_st.st_mtim.tv_nsec != st->st_mtim.tv_nsec;
}

/* The fork request: JSON with the log fd attached. 0 when sent. */
static int send_req(tpl_t *t, const warm_req_t *r) {
  json_t *argv = json_array(), *env = json_object(), *lim = json_array();
  json_t *doc = json_pack("{s:o,s:o,s:s,s:o}", "argv", argv, "env", env, "spider", r->spider,
                          "rlimits", lim);
  if (!doc) return -1;
  for (size_t i = 0; r->argv[i]; i++) json_array_append_new(argv, json_string(r->argv[i]));
  for (size_t i = 0; r->env[i]; i++) {
    const char *eq = strchr(r->env[i], '=');
    if (!eq) continue;
    char *name = strndup(r->env[i], (size_t)(eq - r->env[i]));
    if (name) json_object_set_new(env, name, json_string(eq + 1));
    free(name);
  }
  for (size_t i = 0; i < r->nrlimits; i++)
    json_array_append_new(lim, json_pack("[i,I,I]", r->rlimits[i].resource,
                                         (json_int_t)r->rlimits[i].soft,
                                         (json_int_t)r->rlimits[i].hard));
  char *text = json_dumps(doc, JSON_COMPACT);
  json_decref(doc);
  if (!text) return -1;
  int fd = r->log_fd >= 0 ? r->log_fd : STDERR_FILENO;
  char cbuf[CMSG_SPACE(sizeof(int))];
  memset(cbuf, 0, sizeof(cbuf));
  struct iovec iov = {.iov_base = text, .iov_len = strlen(text)};
  struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                       .msg_controllen = sizeof(cbuf)};
  struct cmsghdr *cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(cm), &fd, sizeof(int));
  ssize_t n = sendmsg(t->fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL);
  int err = errno;
  free(text);
  if (n >= 0) return 0;
  /* Too big for one datagram, or the template is busy: cold this time. A
   * broken socket means the template is gone. */
  if (err == EPIPE || err == ECONNRESET || err == ENOTCONN) gone(t, "closed its socket");
  return -1;
}

int warm_fork(warm_t *w, const warm_req_t *r, warm_cb cb, void *ud) {
  if (!w || w->closing) return -1;
  struct stat st;
  if (r->egg && stat(r->egg, &st)) return -1;
  tpl_t *t = w->tpls;
  for (; t; t = t->next)
    if (!strcmp(t->project, r->project) && same_str(t->version, r->version) &&
        same_str(t->egg, r->egg))
      break;
  int64_t now = now_ms(w);
  int deaths = 0;
  int64_t first_death = 0;
  if (t && r->egg && egg_changed(t, &st)) { /* the version was replaced */
    retire(t, "its version was replaced");
    t = NULL;
  }
  if (t) {
    switch (t->state) {
    case T_READY: {
      call_t *c = calloc(1, sizeof(*c));
      if (!c || send_req(t, r)) {
        free(c);
        return -1;
      }
      c->cb = cb;
      c->ud = ud;
      *t->tail = c;
      t->tail = &c->next;
      t->last_used = now;
      return 0;
    }
    case T_STARTING:
      return -1;
    case T_COLD:
      if (now < t->cold_until) return -1;
      break;
    case T_DEAD:
      deaths = t->deaths;
      first_death = t->first_death;
      break;
    }
    retire(t, "restarted");
  }
  if (make_room(w)) {
    tpl_t *n = spawn(w, r, r->egg ? &st : NULL);
    if (n) {
      n->deaths = deaths;
      n->first_death = first_death;
    }
  }
  return -1;
}

static void sweep(uv_timer_t *h) {
  warm_t *w = h->data;
  int64_t now = now_ms(w), idle = (int64_t)(w->cfg->warm_idle * 1000);
  tpl_t *next;
  for (tpl_t *t = w->tpls; t; t = next) {
    next = t->next;
    struct stat st;
    if (t->state == T_STARTING && now - t->started > READY_TIMEOUT_MS) {
      go_cold(t, "not ready within 60 s");
    } else if (t->state == T_READY && t->egg && (stat(t->egg, &st) || egg_changed(t, &st))) {
      log_info("warm", "template of project '%s' version %s ends: its version was deleted or "
               "replaced", t->project, shown(t->version));
      retire(t, "its version was deleted or replaced");
    } else if (t->state == T_READY && !t->calls && now - t->last_used > idle) {
      log_info("warm", "template of project '%s' version %s ends: unused for %.0f s", t->project,
               shown(t->version), w->cfg->warm_idle);
      retire(t, "idle");
    } else if ((t->state == T_COLD && now >= t->cold_until) ||
               (t->state == T_DEAD && now - t->first_death > idle)) {
      retire(t, "expired");
    }
  }
}

static void timer_closed(uv_handle_t *h) {
  warm_t *w = h->data;
  w->open--;
  w_maybe_free(w);
}

int warm_init(warm_t **out, uv_loop_t *loop, const config_t *cfg) {
  *out = NULL;
  if (cfg->warm_templates <= 0) {
    log_info("warm", "warm starts: off (warm_templates = 0): crawls start cold");
    return 0;
  }
  int fd = (int)syscall(SYS_pidfd_open, getpid(), 0);
  if (fd < 0) {
    log_warn("warm", "warm starts: off: this kernel has no pidfd_open (%s): crawls start cold",
             strerror(errno));
    return 0;
  }
  close(fd);
  warm_t *w = calloc(1, sizeof(*w));
  if (!w) return -ENOMEM;
  w->loop = loop;
  w->cfg = cfg;
  uv_timer_init(loop, &w->sweep);
  w->sweep.data = w;
  w->open = 1;
  uv_timer_start(&w->sweep, sweep, SWEEP_MS, SWEEP_MS);
  uv_unref((uv_handle_t *)&w->sweep);
  log_info("warm", "warm starts: on, up to %d template(s), each kept %.0f s unused",
           cfg->warm_templates, cfg->warm_idle);
  *out = w;
  return 0;
}

void warm_close(warm_t *w) {
  if (!w) return;
  w->closing = 1;
  while (w->tpls) retire(w->tpls, "the daemon stops");
  uv_close((uv_handle_t *)&w->sweep, timer_closed);
}
