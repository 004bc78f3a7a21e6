/* The daemon's own log: one line per event,
 *   2026-11-21T23:09:02+0000 [spiderd.launcher#info] Process started: ...
 * (twistd's layout, so tools reading Scrapyd's log keep working).
 * Thread-safe; writes go to stderr or to the file set by log_open.
 */
#ifndef SPIDERD_LOG_H
#define SPIDERD_LOG_H

enum log_level { LOG_DEBUG = 0, LOG_INFO, LOG_WARNING, LOG_ERROR };

/* Opens path for appending ("" or NULL = stderr). Returns 0 or -errno. */
int log_open(const char *path);
/* Reopens the same file (SIGHUP, after rotation). */
int log_reopen(void);
/* "debug", "info", "warning", "error"; -EINVAL when unknown. */
int log_set_level(const char *name);
void log_close(void);

/* system: the component, e.g. "launcher", "http", "store". */
void log_msg(int level, const char *system, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_debug(sys, ...) log_msg(LOG_DEBUG, sys, __VA_ARGS__)
#define log_info(sys, ...) log_msg(LOG_INFO, sys, __VA_ARGS__)
#define log_warn(sys, ...) log_msg(LOG_WARNING, sys, __VA_ARGS__)
#define log_error(sys, ...) log_msg(LOG_ERROR, sys, __VA_ARGS__)

#endif
