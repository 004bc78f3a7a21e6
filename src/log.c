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
static int log_level = LOG_INFO;
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
    log_fp = fopen(log_path, "a");
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

void log_close(void) {
  pthread_mutex_lock(&log_lock);
  if (log_fp && log_fp != stderr) fclose(log_fp);
  log_fp = NULL;
  free(log_path);
  log_path = NULL;
  pthread_mutex_unlock(&log_lock);
}

void log_msg(int level, const char *system, const char *fmt, ...) {
  if (level < log_level || !fmt) return;
  char ts[40];
  time_t now = time(NULL);
  struct tm tm;
  localtime_r(&now, &tm);
  strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S%z", &tm);
  va_list ap;
  va_start(ap, fmt);
  pthread_mutex_lock(&log_lock);
  FILE *fp = log_fp ? log_fp : stderr;
  fprintf(fp, "%s [spiderd.%s#%s] ", ts, system, level_names[level]);
  vfprintf(fp, fmt, ap);
  fputc('\n', fp);
  pthread_mutex_unlock(&log_lock);
  va_end(ap);
}
