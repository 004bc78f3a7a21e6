/* The daemon's own log: one line per event, as text,
 *   2026-11-21T23:09:02+0000 [spiderd.launcher#info] Process started: ...
 * (twistd's layout, so tools reading Scrapyd's log keep working), or as one
 * JSON object per line for Loki, Elasticsearch and journald:
 *   {"time":"2026-11-21T23:09:02.123Z","level":"info","component":"launcher",
 *    "node":"n1","message":"Process started: ...","project":"p","spider":"s","job":"j"}
 * Thread-safe; writes go to stderr or to the file set by log_open.
 * Ownership: the log copies every string it is given.
 */
#ifndef SPIDERD_LOG_H
#define SPIDERD_LOG_H

#include "strbuf.h"

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARNING, LOG_ERROR };

/* What a line is about, when the caller knows: any field may be NULL. */
typedef struct log_ctx {
  const char *job;
  const char *project;
  const char *spider;
} log_ctx_t;

/* Opens path for appending ("" or NULL = stderr). Returns 0 or -errno. */
int log_open(const char *path);
/* Reopens the same file (SIGHUP, after rotation). */
int log_reopen(void);
/* "debug", "info", "warning", "error"; -EINVAL when unknown. */
int log_set_level(const char *name);
/* "text" (the default) or "json"; -EINVAL when unknown. */
int log_set_format(const char *name);
/* The node every JSON line names (config's node_name); set once at start,
 * NULL or "" leaves the field out. 0 or -ENOMEM. */
int log_set_node(const char *node);
void log_close(void);

/* system: the component, e.g. "launcher", "http", "store". */
void log_msg(int level, const char *system, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The same, about ctx's job (NULL: none); JSON lines carry its fields. */
void log_ctx_msg(int level, const char *system, const log_ctx_t *ctx, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#define log_debug(sys, ...) log_msg(LOG_DEBUG, sys, __VA_ARGS__)
#define log_info(sys, ...) log_msg(LOG_INFO, sys, __VA_ARGS__)
#define log_warn(sys, ...) log_msg(LOG_WARNING, sys, __VA_ARGS__)
#define log_error(sys, ...) log_msg(LOG_ERROR, sys, __VA_ARGS__)
/* About job j: anything with jobid, project and spider strings (a job_t). */
#define log_job(level, sys, j, ...)                                                        \
  log_ctx_msg(level, sys, &(const log_ctx_t){(j)->jobid, (j)->project, (j)->spider},    \
              __VA_ARGS__)

/* Appends s as the inside of a JSON string: '"', '\\' and control
 * characters escaped, each byte of invalid UTF-8 replaced by U+FFFD.
 * 0 or -ENOMEM. */
int log_json_escape(strbuf_t *out, const char *s);
/* Builds one JSON line (with its '\n') into out; t_ms: milliseconds since
 * the epoch, written as RFC 3339 UTC. 0 or -ENOMEM. */
int log_json_line(strbuf_t *out, long long t_ms, int level, const char *system,
                  const char *node, const log_ctx_t *ctx, const char *message);

#endif
