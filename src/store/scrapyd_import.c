#include "store/scrapyd_import.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "error.h"
#include "log.h"

/* Scrapyd's messages: {"name": spider, "_job": id, "_version": v,
 * "settings": {...}, <spider args>...}. */
static int import_message(store_t *s, const char *project, double priority, const char *msg) {
  json_error_t jerr;
  json_t *m = json_loads(msg, 0, &jerr);
  if (!json_is_object(m)) {
    json_decref(m);
    return -EINVAL;
  }
  const char *spider = json_string_value(json_object_get(m, "name"));
  const char *jobid = json_string_value(json_object_get(m, "_job"));
  if (!spider || !jobid) {
    json_decref(m);
    return -EINVAL;
  }
  job_t j;
  job_init(&j);
  j.project = strdup(project);
  j.spider = strdup(spider);
  j.jobid = strdup(jobid);
  const char *version = json_string_value(json_object_get(m, "_version"));
  j.version = version ? strdup(version) : NULL;
  json_t *settings = json_object_get(m, "settings");
  j.settings = json_is_object(settings) ? json_incref(settings) : json_object();
  j.args = json_object();
  const char *key;
  json_t *val;
  json_object_foreach(m, key, val) {
    if (!strcmp(key, "name") || !strcmp(key, "_job") || !strcmp(key, "_version") ||
        !strcmp(key, "settings") || !json_is_string(val))
      continue;
    json_object_set(j.args, key, val);
  }
  j.priority = priority;
  j.state = JOB_PENDING;
  int rc = (j.project && j.spider && j.jobid && (!version || j.version)) ? store_job_insert(s, &j)
                                                                        : -ENOMEM;
  job_release(&j);
  json_decref(m);
  return rc;
}

/* Python's str(datetime) in local time -> ms since the epoch (0 if unreadable). */
static int64_t parse_py_time(const char *t) {
  struct tm tm;
  memset(&tm, 0, sizeof(tm));
  const char *rest = t ? strptime(t, "%Y-%m-%d %H:%M:%S", &tm) : NULL;
  if (!rest) return 0;
  tm.tm_isdst = -1;
  int64_t ms = (int64_t)mktime(&tm) * 1000;
  if (*rest == '.') ms += strtol(rest + 1, NULL, 10) / 1000;
  return ms;
}

static int has_table(sqlite3 *db, const char *name) {
  sqlite3_stmt *st = NULL;
  int found = 0;
  if (sqlite3_prepare_v2(db, "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", -1, &st,
                         NULL) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    found = sqlite3_step(st) == SQLITE_ROW;
  }
  sqlite3_finalize(st);
  return found;
}

static int import_queue(store_t *s, sqlite3 *db, const char *project, int *count) {
  sqlite3_stmt *st = NULL;
  int rc = 0;
  /* Scrapyd pops the highest priority first, then the lowest id. */
  if (sqlite3_prepare_v2(db, "SELECT priority, message FROM spider_queue ORDER BY priority DESC, id",
                         -1, &st, NULL) != SQLITE_OK)
    return SPD_ESTORE;
  while (sqlite3_step(st) == SQLITE_ROW) {
    const char *msg = (const char *)sqlite3_column_text(st, 1);
    int r = msg ? import_message(s, project, sqlite3_column_double(st, 0), msg) : -EINVAL;
    if (r == -EINVAL) {
      log_warn("store", "scrapyd queue of '%s': skipped a message that is not Scrapyd's JSON",
               project);
      continue;
    }
    if (r) {
      rc = r;
      break;
    }
    (*count)++;
  }
  sqlite3_finalize(st);
  return rc;
}

static int import_finished(store_t *s, sqlite3 *db, int *count) {
  sqlite3_stmt *st = NULL;
  int rc = 0;
  if (sqlite3_prepare_v2(db,
                         "SELECT project, spider, job, start_time, end_time FROM finished_jobs "
                         "ORDER BY end_time",
                         -1, &st, NULL) != SQLITE_OK)
    return SPD_ESTORE;
  while (sqlite3_step(st) == SQLITE_ROW) {
    const char *project = (const char *)sqlite3_column_text(st, 0);
    const char *spider = (const char *)sqlite3_column_text(st, 1);
    const char *jobid = (const char *)sqlite3_column_text(st, 2);
    if (!project || !spider || !jobid) continue;
    job_t j;
    job_init(&j);
    j.project = strdup(project);
    j.spider = strdup(spider);
    j.jobid = strdup(jobid);
    j.state = JOB_FINISHED;
    j.start_ms = parse_py_time((const char *)sqlite3_column_text(st, 3));
    j.end_ms = parse_py_time((const char *)sqlite3_column_text(st, 4));
    if (!j.start_ms) j.start_ms = j.end_ms ? j.end_ms : 1;
    if (!j.end_ms) j.end_ms = j.start_ms;
    j.created_ms = j.start_ms;
    rc = (j.project && j.spider && j.jobid) ? store_job_insert(s, &j) : -ENOMEM;
    job_release(&j);
    if (rc) break;
    (*count)++;
  }
  sqlite3_finalize(st);
  return rc;
}

/* Imports one file in one store transaction; renames it when done. */
static int import_file(store_t *s, const char *dir, const char *name, int *pending,
                       int *finished) {
  char path[PATH_MAX], done[PATH_MAX + 32];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  sqlite3 *db = NULL;
  int rc = 0, np = 0, nf = 0;
  if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
    log_warn("store", "%s: not readable as SQLite: %s", path, db ? sqlite3_errmsg(db) : "?");
    sqlite3_close(db);
    return 0;
  }
  int queue = has_table(db, "spider_queue"), jobs = has_table(db, "finished_jobs");
  if (!queue && !jobs) {
    sqlite3_close(db);
    return 0;
  }
  char project[PATH_MAX];
  snprintf(project, sizeof(project), "%.*s", (int)(strlen(name) - 3), name);
  if ((rc = store_tx_begin(s))) goto out;
  if (queue) rc = import_queue(s, db, project, &np);
  if (!rc && jobs) rc = import_finished(s, db, &nf);
  if (rc) {
    store_tx_rollback(s);
    goto out;
  }
  if ((rc = store_tx_commit(s))) goto out;
  sqlite3_close(db);
  db = NULL;
  snprintf(done, sizeof(done), "%s.imported-by-spiderd", path);
  if (rename(path, done) != 0)
    log_warn("store", "%s imported but not renamed (%s): it will be imported again", path,
             strerror(errno));
  log_info("store", "imported Scrapyd's %s: %d pending, %d finished job(s)", path, np, nf);
  *pending += np;
  *finished += nf;
out:
  sqlite3_close(db);
  return rc;
}

int scrapyd_import(store_t *s, const char *dbs_dir, const char *skip_path, int *pending,
                   int *finished, char *err, size_t errlen) {
  *pending = *finished = 0;
  DIR *d = opendir(dbs_dir);
  if (!d) return 0;
  struct stat skip;
  int have_skip = skip_path && stat(skip_path, &skip) == 0;
  int rc = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    size_t len = strlen(e->d_name);
    if (len < 4 || strcmp(e->d_name + len - 3, ".db") != 0 || e->d_name[0] == '.') continue;
    struct stat st;
    if (fstatat(dirfd(d), e->d_name, &st, 0) != 0 || !S_ISREG(st.st_mode)) continue;
    if (have_skip && st.st_ino == skip.st_ino && st.st_dev == skip.st_dev) continue;
    rc = import_file(s, dbs_dir, e->d_name, pending, finished);
    if (rc) {
      snprintf(err, errlen, "%s/%s: importing Scrapyd's jobs failed: %s", dbs_dir, e->d_name,
               spd_strerror(rc));
      break;
    }
  }
  closedir(d);
  return rc;
}
