#include "log.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *log_fp;
static char *log_path;
/* Set once at start, before any other thread logs: read without the lock. */
static int log_level = LOG_INFO;
static int log_json; /* log_format = json */
static char *log_node;
static const char *const level_names[] = {"debug", "info", "warning", "error"};

int log_open(const char *path) {
  pthread_mutex_lock(&log_lock);
  free(log_path);
  log_path = (path && *path) ? strdup(path) : NULL;
  pthread_mutex_unlock(&log_lock);
  return log_reopen();
}

int log_reopen(void) {
  int rc = 0;
  pthread_mutex_lock(&log_lock);
  if (log_fp && log_fp != stderr) fclose(log_fp);
  log_fp = NULL;
  if (log_path) {
    log_fp = fopen(log_path, "ae");
    if (!log_fp) rc = -errno;
    else setvbuf(log_fp, NULL, _IOLBF, 0);
  }
  pthread_mutex_unlock(&log_lock);
  return rc;
}

int log_set_level(const char *name) {
  for (int i = 0; i < 4; i++)
    if (strcmp(name, level_names[i]) == 0) {
      log_level = i;
      return 0;
    }
  return -EINVAL;
}

int log_set_format(const char *name) {
  if (strcmp(name, "text") && strcmp(name, "json")) return -EINVAL;
  pthread_mutex_lock(&log_lock);
  log_json = !strcmp(name, "json");
  pthread_mutex_unlock(&log_lock);
  return 0;
}

int log_set_node(const char *node) {
  char *copy = node && *node ? strdup(node) : NULL;
  if (node && *node && !copy) return -ENOMEM;
  pthread_mutex_lock(&log_lock);
  free(log_node);
  log_node = copy;
  pthread_mutex_unlock(&log_lock);
  return 0;
}

void log_close(void) {
  pthread_mutex_lock(&log_lock);
  if (log_fp && log_fp != stderr) fclose(log_fp);
  log_fp = NULL;
  free(log_path);
  log_path = NULL;
  free(log_node);
  log_node = NULL;
  log_json = 0;
  pthread_mutex_unlock(&log_lock);
}

/* ---- JSON lines ---- */

/* The length of the valid UTF-8 sequence at s, or 0 (overlong forms,
 * surrogates and code points above U+10FFFF are invalid, as RFC 3629 says).
 * s is NUL-terminated, and NUL is no continuation byte, so reads stop. */
static size_t utf8_len(const unsigned char *s) {
  unsigned char c = s[0];
  unsigned char lo = 0x80, hi = 0xBF;
  size_t n;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) n = 3;
  else if (c >= 0xF0 && c <= 0xF4) n = 4;
  else return 0;
  if (c == 0xE0) lo = 0xA0;
  else if (c == 0xED) hi = 0x9F;
  else if (c == 0xF0) lo = 0x90;
  else if (c == 0xF4) hi = 0x8F;
  if (s[1] < lo || s[1] > hi) return 0;
  for (size_t i = 2; i < n; i++)
    if (s[i] < 0x80 || s[i] > 0xBF) return 0;
  return n;
}

int log_json_escape(strbuf_t *out, const char *s) {
  const unsigned char *p = (const unsigned char *)(s ? s : "");
  while (*p) {
    /* copy the longest run that needs no escape in one append */
    const unsigned char *run = p;
    size_t n;
    while (*p && *p != '"' && *p != '\\' && *p >= 0x20 && *p != 0x7F && (n = utf8_len(p)))
      p += n;
    if (p > run && strbuf_add(out, (const char *)run, (size_t)(p - run))) return -ENOMEM;
    if (!*p) break;
    char esc[8];
    const char *e = esc;
    switch (*p) {
    case '"': e = "\\\""; break;
    case '\\': e = "\\\\"; break;
    case '\n': e = "\\n"; break;
    case '\r': e = "\\r"; break;
    case '\t': e = "\\t"; break;
    case '\b': e = "\\b"; break;
    case '\f': e = "\\f"; break;
    default:
      if (*p < 0x20 || *p == 0x7F) snprintf(esc, sizeof(esc), "\\u%04x", *p);
      else e = "\\ufffd"; /* a byte that starts no valid sequence */
      break;
    }
    if (strbuf_adds(out, e)) return -ENOMEM;
    p++;
  }
  return 0;
}

static int json_field(strbuf_t *out, const char *name, const char *value) {
  if (!value) return 0;
  if (strbuf_addf(out, ",\"%s\":\"", name) || log_json_escape(out, value) ||
      strbuf_add(out, "\"", 1))
    return -ENOMEM;
  return 0;
}

int log_json_line(strbuf_t *out, long long t_ms, int level, const char *system,
                  const char *node, const log_ctx_t *ctx, const char *message) {
  time_t secs = (time_t)(t_ms / 1000);
  int ms = (int)(t_ms % 1000);
  if (ms < 0) secs--, ms += 1000;
  struct tm tm;
  char ts[40];
  gmtime_r(&secs, &tm);
  strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
  if (level < LOG_DEBUG || level > LOG_ERROR) level = LOG_ERROR;
  int rc = strbuf_addf(out, "{\"time\":\"%s.%03dZ\",\"level\":\"%s\"", ts, ms, level_names[level]);
  if (!rc) rc = json_field(out, "component", system);
  if (!rc) rc = json_field(out, "node", node);
  if (!rc) rc = json_field(out, "message", message ? message : "");
  if (!rc && ctx) rc = json_field(out, "project", ctx->project);
  if (!rc && ctx) rc = json_field(out, "spider", ctx->spider);
  if (!rc && ctx) rc = json_field(out, "job", ctx->job);
  if (!rc) rc = strbuf_add(out, "}\n", 2);
  return rc;
}

/* ---- writing ---- */

static void write_text(int level, const char *system, const char *fmt, va_list ap) {
  char ts[40];
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S%z", &tm);
  pthread_mutex_lock(&log_lock);
  FILE *fp = log_fp ? log_fp : stderr;
  fprintf(fp, "%s [spiderd.%s#%s] ", ts, system, level_names[level]);
  vfprintf(fp, fmt, ap);
  fputc('\n', fp);
  pthread_mutex_unlock(&log_lock);
}

static void write_json(int level, const char *system, const log_ctx_t *ctx, const char *fmt,
                       va_list ap) {
  char *message = NULL;
  strbuf_t line = {0};
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  if (vasprintf(&message, fmt, ap) < 0) message = NULL;
  pthread_mutex_lock(&log_lock);
  int rc = log_json_line(&line, (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000, level,
                         system, log_node, ctx, message ? message : fmt);
  FILE *fp = log_fp ? log_fp : stderr;
  /* out of memory: a line cut short would not parse, so none is written */
  if (!rc) fwrite(line.p, 1, line.len, fp);
  pthread_mutex_unlock(&log_lock);
  strbuf_release(&line);
  free(message);
}

static void log_vmsg(int level, const char *system, const log_ctx_t *ctx, const char *fmt,
                     va_list ap) {
  if (level < log_level || !fmt) return;
  if (level > LOG_ERROR) level = LOG_ERROR;
  if (log_json) write_json(level, system, ctx, fmt, ap);
  else write_text(level, system, fmt, ap);
}

void log_msg(int level, const char *system, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_vmsg(level, system, NULL, fmt, ap);
  va_end(ap);
}

void log_ctx_msg(int level, const char *system, const log_ctx_t *ctx, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  log_vmsg(level, system, ctx, fmt, ap);
  va_end(ap);
}
