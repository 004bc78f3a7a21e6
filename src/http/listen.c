/* The server's sockets and its place on the loop: binding the TCP address
 * and the Unix socket, the connection limit, HTTPS (PEM files checked with
 * GnuTLS's own reason before libmicrohttpd starts), one libmicrohttpd
 * daemon per listener in external-epoll mode driven by a uv_poll and a
 * uv_timer, and the stop that closes them (the server is freed in the last
 * handle's close callback). Loop thread only.
 */
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <gnutls/gnutls.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "http/server_int.h"
#include "log.h"

#define CONN_TIMEOUT_S 300    /* idle connections are closed (http_timeout) */
#define CONN_MAX 4096         /* connections per listener (http_connections) */
/* MHD 0.9.75 zeroes a connection's whole memory pool after every request, so
 * its size is paid per request: 16 KiB instead of the default 32 KiB costs
 * ~30% less CPU per small request, and still takes ~8 KiB of request headers
 * (nginx's and Apache's default; larger get 431). */
#define CONN_MEMORY (16 * 1024)
#define LISTEN_BACKLOG 1024

/* ---- the loop glue ---- */

static void on_timer(uv_timer_t *t);

/* A resumed connection is only processed by MHD_run: make the next loop
 * iteration run it instead of waiting for unrelated I/O. */
void http_kick(struct listener *l) {
  l->kick = true;
  if (!l->in_run && !l->srv->closing) uv_timer_start(&l->timer, on_timer, 0, 0);
}

static void listener_run(struct listener *l) {
  if (l->srv->closing) return;
  l->in_run = true;
  l->kick = false;
  MHD_run(l->mhd);
  l->in_run = false;
  if (l->srv->closing) return; /* a handler stopped the server */
  MHD_UNSIGNED_LONG_LONG to = 0;
  if (!l->kick && MHD_get_timeout(l->mhd, &to) != MHD_YES) {
    uv_timer_stop(&l->timer);
    return;
  }
  l->kick = false;
  uv_timer_start(&l->timer, on_timer, to, 0);
}

static void on_poll(uv_poll_t *h, int status, int events) { listener_run(h->data); }
static void on_timer(uv_timer_t *t) { listener_run(t->data); }

static void mhd_log(void *cls, const char *fmt, va_list ap) {
  struct listener *l = cls;
  char buf[512];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  size_t n = strlen(buf);
  while (n && buf[n - 1] == '\n') buf[--n] = '\0';
  if (!l->mhd)
    snprintf(l->start_log, sizeof(l->start_log), "%.*s", (int)sizeof(l->start_log) - 1, buf);
  log_debug("http", "%s: %s", l->name, buf);
}

/* ---- listeners ---- */

static int set_err(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int set_err(char *err, size_t errlen, int rc, const char *fmt, ...) {
  if (err && errlen) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return rc;
}

static int bind_tcp(const char *addr, int port, bool *v6any, int *out, char *err, size_t errlen,
                    char *name, size_t namelen) {
  char host[INET6_ADDRSTRLEN + 2];
  if (!addr || !*addr) addr = "127.0.0.1";
  size_t n = strlen(addr);
  if (addr[0] == '[' && n > 2 && addr[n - 1] == ']') { /* "[::1]" */
    if (n - 2 >= sizeof(host)) return set_err(err, errlen, -EINVAL, "%s: bad address", addr);
    memcpy(host, addr + 1, n - 2);
    host[n - 2] = '\0';
  } else {
    snprintf(host, sizeof(host), "%s", addr);
  }
  char portstr[16];
  snprintf(portstr, sizeof(portstr), "%d", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                           .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
  struct addrinfo *ai = NULL;
  int gai = getaddrinfo(host, portstr, &hints, &ai);
  bool is6 = strchr(host, ':') != NULL;
  snprintf(name, namelen, is6 ? "[%s]:%d" : "%s:%d", host, port);
  if (gai) return set_err(err, errlen, -EINVAL, "%s: %s", name, gai_strerror(gai));
  int rc = 0, one = 1;
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    rc = -errno;
    goto out;
  }
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (ai->ai_family == AF_INET6) {
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ai->ai_addr;
    *v6any = IN6_IS_ADDR_UNSPECIFIED(&a6->sin6_addr);
    int only = *v6any ? 0 : 1; /* "::" also takes IPv4, as Twisted's does */
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &only, sizeof(only));
  }
  if (bind(fd, ai->ai_addr, ai->ai_addrlen) || listen(fd, LISTEN_BACKLOG)) {
    rc = -errno;
    goto out;
  }
  *out = fd;
  fd = -1;
out:
  if (rc) set_err(err, errlen, rc, "%s: %s", name, strerror(-rc));
  if (fd >= 0) close(fd);
  freeaddrinfo(ai);
  return rc;
}

/* A socket file nobody listens on is left over from a crash: remove it. A
 * live one, or anything that is not a socket, is an error. */
static int bind_unix(const char *path, int *out, char *err, size_t errlen) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof(sa.sun_path))
    return set_err(err, errlen, -ENAMETOOLONG, "%s: socket path too long", path);
  strcpy(sa.sun_path, path);
  int rc = 0;
  int fd = -1;
  struct stat st;
  if (lstat(path, &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return set_err(err, errlen, -EEXIST, "%s: exists and is not a socket", path);
    int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (probe < 0) {
      rc = -errno;
      goto out;
    }
    int live = connect(probe, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(probe);
    if (live) return set_err(err, errlen, -EADDRINUSE, "%s: %s", path, strerror(EADDRINUSE));
    if (unlink(path) && errno != ENOENT) {
      rc = -errno;
      goto out;
    }
  }
  fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    rc = -errno;
    goto out;
  }
  if (bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
    rc = -errno;
    goto out;
  }
  if (chmod(path, 0660) || listen(fd, LISTEN_BACKLOG)) {
    rc = -errno;
    unlink(path);
    goto out;
  }
  *out = fd;
  fd = -1;
out:
  if (rc) set_err(err, errlen, rc, "%s: %s", path, strerror(-rc));
  if (fd >= 0) close(fd);
  return rc;
}

/* http_connections, but no more than the descriptors the process may open
 * (the daemon raised its soft limit to the hard one at start) less some for
 * logs, stores and crawls' pipes. */
static unsigned conn_limit(const http_server_t *s, const char *name) {
  struct rlimit rl;
  rlim_t n = 1024;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) n = rl.rlim_cur;
  n = n > 128 ? n - 64 : 64;
  if (n >= s->max_conns) return s->max_conns;
  log_warn("http", "%s: at most %u connections, not http_connections = %u: the open files "
           "limit is %llu (raise LimitNOFILE= or ulimit -n)", name, (unsigned)n, s->max_conns,
           (unsigned long long)n + 64);
  return (unsigned)n;
}

/* sendfile() may raise SIGPIPE, so MHD only uses it for fd replies when told
 * that the process ignores SIGPIPE (the daemon does; a test may not). */
static int sigpipe_ignored(void) {
  struct sigaction sa;
  return sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN;
}

/* A PEM file's whole text, NUL-terminated as MHD wants it. */
#define PEM_MAX (1 << 20)
static int read_pem(const char *key, const char *path, char **out, char *err, size_t errlen) {
  *out = NULL;
  FILE *f = fopen(path, "re");
  if (!f) return set_err(err, errlen, -errno, "%s '%s': %s", key, path, strerror(errno));
  char *buf = malloc(PEM_MAX + 1);
  size_t n = buf ? fread(buf, 1, PEM_MAX + 1, f) : 0;
  int rc = 0;
  if (!buf) rc = set_err(err, errlen, -ENOMEM, "out of memory");
  else if (ferror(f)) rc = set_err(err, errlen, -EIO, "%s '%s': %s", key, path, strerror(errno));
  else if (n > PEM_MAX) rc = set_err(err, errlen, -EFBIG, "%s '%s': larger than 1 MiB", key, path);
  else if (!memmem(buf, n, "-----BEGIN ", 11))
    rc = set_err(err, errlen, -EINVAL, "%s '%s': not a PEM file (no -----BEGIN line)", key, path);
  fclose(f);
  if (rc) {
    free(buf);
    return rc;
  }
  buf[n] = '\0';
  *out = buf;
  return 0;
}

static void free_secret(char *p) {
  if (!p) return;
  explicit_bzero(p, strlen(p));
  free(p);
}

/* MHD only says "Failed to initialize TLS support" when GnuTLS rejects the
 * key or certificate; loading them the same way first gives GnuTLS's reason
 * (a mismatched pair, a wrong passphrase, a damaged file). GnuTLS is already
 * in the process as MHD's own dependency, so it is looked up, not linked. */
static int tls_check(const http_options_t *o, const char *cert, const char *key, char *why,
                     size_t whylen) {
  void *lib = dlopen("libgnutls.so.30", RTLD_NOW | RTLD_NOLOAD);
  if (!lib) return 0; /* MHD's own check still runs */
  __typeof__(gnutls_certificate_allocate_credentials) *alloc =
      (__typeof__(alloc))dlsym(lib, "gnutls_certificate_allocate_credentials");
  __typeof__(gnutls_certificate_free_credentials) *release =
      (__typeof__(release))dlsym(lib, "gnutls_certificate_free_credentials");
  __typeof__(gnutls_certificate_set_x509_key_mem2) *load =
      (__typeof__(load))dlsym(lib, "gnutls_certificate_set_x509_key_mem2");
  __typeof__(gnutls_strerror) *strerr = (__typeof__(strerr))dlsym(lib, "gnutls_strerror");
  gnutls_certificate_credentials_t cred = NULL;
  int rc = 0;
  if (alloc && release && load && strerr && alloc(&cred) == GNUTLS_E_SUCCESS) {
    gnutls_datum_t c = {(unsigned char *)cert, (unsigned)strlen(cert)};
    gnutls_datum_t k = {(unsigned char *)key, (unsigned)strlen(key)};
    const char *pw = o->https_key_password && *o->https_key_password ? o->https_key_password : NULL;
    int g = load(cred, &c, &k, GNUTLS_X509_FMT_PEM, pw, 0);
    if (g < 0) {
      snprintf(why, whylen, "%s%s", strerr(g),
               g == GNUTLS_E_DECRYPTION_FAILED ? " (a wrong or missing https_key_password?)" : "");
      rc = -EINVAL;
    }
    release(cred);
  }
  dlclose(lib);
  return rc;
}

/* MHD's TLS is GnuTLS: it reads the PEM texts and checks that the key is
 * the certificate's when the daemon starts, and says why when not. */
static int tls_options(struct listener *l, const http_options_t *o, struct MHD_OptionItem *opt,
                       char *err, size_t errlen) {
  size_t n = 0;
  if (!MHD_is_feature_supported(MHD_FEATURE_TLS))
    return set_err(err, errlen, -ENOTSUP,
                   "https_cert: this libmicrohttpd was built without TLS (GnuTLS) support; "
                   "serve plain HTTP behind a TLS reverse proxy instead");
  int rc = read_pem("https_cert", o->https_cert, &l->tls_cert, err, errlen);
  if (!rc) rc = read_pem("https_key", o->https_key, &l->tls_key, err, errlen);
  if (rc) return rc;
  char why[256];
  if (tls_check(o, l->tls_cert, l->tls_key, why, sizeof(why)))
    return set_err(err, errlen, -EINVAL, "%s: cannot serve HTTPS with https_cert '%s' and "
                   "https_key '%s': %s", l->name, o->https_cert, o->https_key, why);
  opt[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_CERT, 0, l->tls_cert};
  opt[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_KEY, 0, l->tls_key};
  if (o->https_key_password && *o->https_key_password)
    opt[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_KEY_PASSWORD, 0,
                                       (void *)o->https_key_password};
  const char *prio = o->https_priorities && *o->https_priorities
                         ? o->https_priorities
                         : "NORMAL:-VERS-TLS1.0:-VERS-TLS1.1";
  opt[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, (void *)prio};
  opt[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
  return 0;
}

static int listener_start(http_server_t *s, int fd, unsigned extra_flags, const char *name,
                          const http_options_t *tls, char *err, size_t errlen) {
  struct listener *l = calloc(1, sizeof(*l));
  if (!l) {
    close(fd);
    return set_err(err, errlen, -ENOMEM, "%s: out of memory", name);
  }
  l->srv = s;
  snprintf(l->name, sizeof(l->name), "%s", name);
  s->lsn[s->nlsn++] = l;
  unsigned flags = MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO | MHD_USE_ERROR_LOG |
                   extra_flags;
  struct MHD_OptionItem tlsopt[6] = {{MHD_OPTION_END, 0, NULL}};
  if (tls) {
    int rc = tls_options(l, tls, tlsopt, err, errlen);
    if (rc) {
      close(fd);
      return rc;
    }
    flags |= MHD_USE_TLS;
  }
  l->conn_max = conn_limit(s, name);
  l->mhd = MHD_start_daemon(flags, 0, NULL, NULL, http_on_access, l,
                            MHD_OPTION_LISTEN_SOCKET, (MHD_socket)fd,
                            MHD_OPTION_NOTIFY_COMPLETED, http_on_completed, l,
                            MHD_OPTION_URI_LOG_CALLBACK, http_on_uri, l,
                            MHD_OPTION_NOTIFY_CONNECTION, http_conn_notify, l,
                            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->timeout_s,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY,
                            MHD_OPTION_CONNECTION_LIMIT, l->conn_max,
                            MHD_OPTION_EXTERNAL_LOGGER, mhd_log, l,
                            MHD_OPTION_SIGPIPE_HANDLED_BY_APP, sigpipe_ignored(),
                            MHD_OPTION_ARRAY, tlsopt,
                            MHD_OPTION_END);
  if (!l->mhd) {
    close(fd);
    if (tls)
      return set_err(err, errlen, -EINVAL, "%s: cannot serve HTTPS with https_cert '%s' and "
                     "https_key '%s': %s", name, tls->https_cert, tls->https_key,
                     l->start_log[0] ? l->start_log : "libmicrohttpd failed to start");
    return set_err(err, errlen, -EIO, "%s: libmicrohttpd failed to start%s%s", name,
                   l->start_log[0] ? ": " : "", l->start_log);
  }
  const union MHD_DaemonInfo *info = MHD_get_daemon_info(l->mhd, MHD_DAEMON_INFO_EPOLL_FD);
  if (!info) return set_err(err, errlen, -EIO, "%s: no epoll descriptor", name);
  int rc = uv_poll_init(s->loop, &l->poll, info->epoll_fd);
  if (rc) return set_err(err, errlen, rc, "%s: %s", name, uv_strerror(rc));
  uv_timer_init(s->loop, &l->timer);
  l->poll.data = l->timer.data = l;
  http_conn_init(l);
  l->handles_open = true;
  s->open_handles += 3;
  rc = uv_poll_start(&l->poll, UV_READABLE, on_poll);
  if (rc) return set_err(err, errlen, rc, "%s: %s", name, uv_strerror(rc));
  uv_timer_start(&l->timer, on_timer, 0, 0);
  return 0;
}

int http_server_start(uv_loop_t *loop, const http_options_t *o, http_server_t **out, char *err,
                      size_t errlen) {
  int rc = 0;
  *out = NULL;
  http_server_t *s = calloc(1, sizeof(*s));
  if (!s) return set_err(err, errlen, -ENOMEM, "out of memory");
  s->loop = loop;
  http_set_fallback(s, NULL, NULL);
  s->max_body = o->max_body > 0 ? o->max_body : -1;
  s->timeout_s = o->timeout > 0 ? o->timeout : CONN_TIMEOUT_S;
  s->max_conns = o->max_connections > 0 ? (unsigned)o->max_connections : CONN_MAX;
  const char *realm = o->realm && *o->realm ? o->realm : "Scrapyd";
  if (asprintf(&s->www_auth, "basic realm=\"%s\"", realm) < 0) {
    s->www_auth = NULL;
    rc = set_err(err, errlen, -ENOMEM, "out of memory");
    goto out;
  }
  char why[200];
  rc = http_trust_parse(o->trusted_proxies, &s->trust, why, sizeof(why));
  if (rc) {
    set_err(err, errlen, rc, "trusted_proxies: %s", why);
    goto out;
  }
  if (o->port <= 0 && !(o->unix_socket_path && *o->unix_socket_path)) {
    rc = set_err(err, errlen, -EINVAL, "no listener: set a port or a unix socket path");
    goto out;
  }
  if (o->port > 65535) {
    rc = set_err(err, errlen, -EINVAL, "port %d out of range", o->port);
    goto out;
  }
  /* Bind everything before opening any uv handle, so that the common
   * failures (address in use) clean up synchronously. */
  int tcp_fd = -1, unix_fd = -1;
  bool v6any = false;
  char tcp_name[128];
  if (o->port > 0) {
    rc = bind_tcp(o->bind_address, o->port, &v6any, &tcp_fd, err, errlen, tcp_name,
                  sizeof(tcp_name));
    if (rc) goto out;
  }
  if (o->unix_socket_path && *o->unix_socket_path) {
    rc = bind_unix(o->unix_socket_path, &unix_fd, err, errlen);
    if (rc) {
      if (tcp_fd >= 0) close(tcp_fd);
      goto out;
    }
    s->unix_path = strdup(o->unix_socket_path);
    if (!s->unix_path) {
      unlink(o->unix_socket_path);
      close(unix_fd);
      if (tcp_fd >= 0) close(tcp_fd);
      rc = set_err(err, errlen, -ENOMEM, "out of memory");
      goto out;
    }
  }
  if (tcp_fd >= 0) {
    bool https = o->https_cert && *o->https_cert && o->https_key && *o->https_key;
    rc = listener_start(s, tcp_fd, v6any ? MHD_USE_DUAL_STACK : 0, tcp_name, https ? o : NULL,
                        err, errlen);
    if (rc) {
      if (unix_fd >= 0) close(unix_fd);
      goto out;
    }
  }
  if (unix_fd >= 0) {
    rc = listener_start(s, unix_fd, 0, o->unix_socket_path, NULL, err, errlen);
    if (rc) goto out;
  }
  *out = s;
out:
  if (rc) http_server_stop(s);
  return rc;
}

/* ---- stopping ---- */

static void server_free(http_server_t *s) {
  for (int i = 0; i < s->nlsn; i++) {
    struct listener *l = s->lsn[i];
    if (!l->mhd) continue;
    /* MHD refuses to stop with suspended connections: resume them all; the
     * handlers' late replies find their requests detached. */
    for (http_req_t *r = s->suspended; r; r = r->next)
      if (r->lsn == l) {
        r->dropped = true;
        MHD_resume_connection(r->conn);
      }
    MHD_stop_daemon(l->mhd);
    l->mhd = NULL;
    http_conn_free_all(l);
  }
  for (int i = 0; i < s->nlsn; i++) {
    free(s->lsn[i]->tls_cert);
    free_secret(s->lsn[i]->tls_key);
    free(s->lsn[i]);
  }
  while (s->pool) {
    http_req_t *r = s->pool;
    s->pool = r->next;
    http_req_free(r);
  }
  if (s->unix_path) unlink(s->unix_path);
  http_routes_release(s);
  free(s->www_auth);
  free(s->unix_path);
  http_trust_release(&s->trust);
  free(s);
}

static void on_handle_closed(uv_handle_t *h) {
  struct listener *l = h->data;
  http_server_t *s = l->srv;
  if (--s->open_handles == 0) server_free(s);
}

void http_server_stop(http_server_t *s) {
  if (!s || s->closing) return;
  s->closing = true;
  /* MHD is stopped from the close callbacks: never from inside MHD_run,
   * where a handler may call this. */
  bool any = false;
  for (int i = 0; i < s->nlsn; i++) {
    struct listener *l = s->lsn[i];
    if (!l->handles_open) continue;
    any = true;
    uv_close((uv_handle_t *)&l->poll, on_handle_closed);
    uv_close((uv_handle_t *)&l->timer, on_handle_closed);
    uv_close((uv_handle_t *)&l->sweep, on_handle_closed);
  }
  if (!any) server_free(s);
}
