/* See objstore.h. One thread owns every job's upload state; the loop only
 * appends notes (started, ended, forget) to a queue under the mutex. */
#include "run/objstore.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "clock.h"
#include "flow/jobs.h"
#include "fsutil.h"
#include "log.h"

#define PART_SIZE (16LL << 20) /* multipart above this, in parts of it */
#define BACKOFF_MIN_MS 1000
#define BACKOFF_MAX_MS 60000
#define STOP_BUDGET_MS 5000
#define UPLOADER_NICE 10

enum note_kind { NOTE_START, NOTE_END, NOTE_FORGET };

typedef struct note {
  enum note_kind kind;
  char *project, *spider, *jobid;
  struct note *next;
} note_t;

/* One file of a job: how far it is up as parts. */
typedef struct stream {
  char *path; /* local; NULL: none (items_dir empty or a URL) */
  char *key;  /* logs/P/S/J.log or items/P/S/J.jl */
  int64_t done;
  int nparts;
  int64_t size;       /* last seen */
  int64_t pending_ms; /* since when bytes wait; 0: none */
} stream_t;

typedef struct ojob {
  char *project, *spider, *jobid;
  stream_t s[2];
  int ended;
  int64_t retry_ms; /* not before (backoff) */
  int backoff_ms;
  struct ojob *next;
} ojob_t;

struct objstore {
  s3_t *s3;
  const config_t *cfg;
  char *spool_dir;
  pthread_t thread;
  pthread_mutex_t mu; /* notes, stop */
  pthread_cond_t cond;
  note_t *notes, **notes_tail;
  int stop;
  ojob_t *jobs; /* the thread's alone */
  note_t *forgets;
  int64_t forget_retry_ms;
};

/* ---- notes from the loop ---- */

static void note_free(note_t *n) {
  free(n->project);
  free(n->spider);
  free(n->jobid);
  free(n);
}

static void note_push(objstore_t *o, enum note_kind kind, const char *project,
                      const char *spider, const char *jobid) {
  if (!o) return;
  note_t *n = calloc(1, sizeof(*n));
  if (!n || !(n->project = strdup(project)) || !(n->spider = strdup(spider ? spider : "")) ||
      !(n->jobid = strdup(jobid))) {
    if (n) note_free(n);
    log_error("objstore", "out of memory: job %s is not uploaded", jobid);
    return;
  }
  n->kind = kind;
  if (kind == NOTE_END) {
    /* Counted as waiting at once: a preStop hook that sees no crawl
     * running must not see an empty backlog before the thread wakes. */
    pthread_mutex_lock(&o->s3->status.mu);
    o->s3->status.backlog_objects++;
    pthread_mutex_unlock(&o->s3->status.mu);
  }
  pthread_mutex_lock(&o->mu);
  *o->notes_tail = n;
  o->notes_tail = &n->next;
  if (kind != NOTE_START) pthread_cond_signal(&o->cond);
  pthread_mutex_unlock(&o->mu);
}

void objstore_job_started(objstore_t *o, const job_t *j) {
  note_push(o, NOTE_START, j->project, j->spider, j->jobid);
}

void objstore_job_ended(objstore_t *o, const job_t *j) {
  note_push(o, NOTE_END, j->project, j->spider, j->jobid);
}

void objstore_forget(objstore_t *o, const char *project, const char *spider, const char *jobid) {
  note_push(o, NOTE_FORGET, project, spider, jobid);
}

/* ---- the spool: one marker per job ---- */

static char *marker_path(const objstore_t *o, const ojob_t *j) {
  char *p = NULL;
  if (asprintf(&p, "%s/%s.%s.spool", o->spool_dir, j->project, j->jobid) < 0) return NULL;
  return p;
}

/* Written whole and renamed, so a kill -9 leaves the old one or the new. */
static void marker_save(const objstore_t *o, const ojob_t *j) {
  char *path = marker_path(o, j), *tmp = NULL;
  if (!path || asprintf(&tmp, "%s.tmp", path) < 0) {
    free(path);
    return;
  }
  FILE *f = fopen(tmp, "we");
  if (f) {
    fprintf(f, "%s\n%s\n%s\n%d %lld %d %lld %d\n", j->project, j->spider, j->jobid, j->ended,
            (long long)j->s[0].done, j->s[0].nparts, (long long)j->s[1].done, j->s[1].nparts);
    if (fclose(f) == 0 && rename(tmp, path) == 0) tmp[0] = '\0';
  }
  if (tmp[0]) unlink(tmp);
  free(tmp);
  free(path);
}

static void marker_drop(const objstore_t *o, const ojob_t *j) {
  char *path = marker_path(o, j);
  if (path) unlink(path);
  free(path);
}

/* ---- jobs ---- */

static void job_free(ojob_t *j) {
  for (int i = 0; i < 2; i++) {
    free(j->s[i].path);
    free(j->s[i].key);
  }
  free(j->project);
  free(j->spider);
  free(j->jobid);
  free(j);
}

static ojob_t *job_find(objstore_t *o, const char *jobid, const char *project) {
  for (ojob_t *j = o->jobs; j; j = j->next)
    if (!strcmp(j->jobid, jobid) && !strcmp(j->project, project)) return j;
  return NULL;
}

static ojob_t *job_add(objstore_t *o, const char *project, const char *spider,
                       const char *jobid) {
  ojob_t *j = calloc(1, sizeof(*j));
  if (!j) return NULL;
  j->project = strdup(project);
  j->spider = strdup(spider);
  j->jobid = strdup(jobid);
  j->s[0].path = jobs_log_path(o->cfg, project, spider, jobid);
  j->s[1].path = jobs_items_path(o->cfg, project, spider, jobid);
  if (!j->project || !j->spider || !j->jobid ||
      asprintf(&j->s[0].key, "logs/%s/%s/%s.log", project, spider, jobid) < 0 ||
      asprintf(&j->s[1].key, "items/%s/%s/%s.jl", project, spider, jobid) < 0) {
    job_free(j);
    return NULL;
  }
  j->next = o->jobs;
  o->jobs = j;
  return j;
}

static void job_unlink(objstore_t *o, ojob_t *dead) {
  for (ojob_t **p = &o->jobs; *p; p = &(*p)->next)
    if (*p == dead) {
      *p = dead->next;
      job_free(dead);
      return;
    }
}

/* Markers a previous run left: their jobs' files go up whole (a crawl
 * still running after an adoption is noted again and goes on in parts). */
static void spool_load(objstore_t *o) {
  DIR *d = opendir(o->spool_dir);
  struct dirent *e;
  while (d && (e = readdir(d))) {
    size_t n = strlen(e->d_name);
    if (n < 7 || strcmp(e->d_name + n - 6, ".spool")) continue;
    char path[4096], p[256], s[256], id[256];
    snprintf(path, sizeof(path), "%s/%s", o->spool_dir, e->d_name);
    FILE *f = fopen(path, "re");
    int ended = 0, n0 = 0, n1 = 0;
    long long d0 = 0, d1 = 0;
    int ok = f && fscanf(f, "%255[^\n]\n%255[^\n]\n%255[^\n]\n%d %lld %d %lld %d", p, s, id,
                         &ended, &d0, &n0, &d1, &n1) == 8;
    if (f) fclose(f);
    ojob_t *j = ok && !job_find(o, id, p) ? job_add(o, p, s, id) : NULL;
    if (!j) continue;
    j->ended = 1;
    j->s[0].done = d0;
    j->s[0].nparts = n0;
    j->s[1].done = d1;
    j->s[1].nparts = n1;
    log_info("objstore", "job %s: uploading what the last run left", id);
  }
  if (d) closedir(d);
}

static void apply_note(objstore_t *o, note_t *n) {
  if (n->kind == NOTE_FORGET) {
    n->next = o->forgets;
    o->forgets = n;
    return;
  }
  ojob_t *j = job_find(o, n->jobid, n->project);
  if (!j && !(j = job_add(o, n->project, n->spider, n->jobid))) {
    log_error("objstore", "out of memory: job %s is not uploaded", n->jobid);
  } else if (n->kind == NOTE_START) {
    j->ended = 0;
    for (int i = 0; i < 2; i++) /* whole already (a restart's finish): parts again */
      if (j->s[i].done < 0) j->s[i].done = j->s[i].nparts = 0;
    marker_save(o, j);
  } else {
    j->ended = 1;
    j->retry_ms = 0; /* at once: the last seconds of a log matter most */
    marker_save(o, j);
  }
  note_free(n);
}

/* ---- the uploads (on the thread) ---- */

static void status_fail(objstore_t *o, const s3_res_t *r) {
  pthread_mutex_lock(&o->s3->status.mu);
  o->s3->status.failures++;
  int changed = strcmp(o->s3->status.problem, r->err) != 0;
  snprintf(o->s3->status.problem, sizeof(o->s3->status.problem), "%s", r->err);
  pthread_mutex_unlock(&o->s3->status.mu);
  if (changed) log_warn("objstore", "%s (retrying; logs and items wait on local disk)", r->err);
}

static void status_ok(objstore_t *o) {
  pthread_mutex_lock(&o->s3->status.mu);
  int was = o->s3->status.problem[0] != '\0';
  o->s3->status.problem[0] = '\0';
  pthread_mutex_unlock(&o->s3->status.mu);
  if (was) log_info("objstore", "the object store answers again");
}

/* A running job's file: what it grew by goes up as the next part. */
static int push_part(objstore_t *o, stream_t *st, int fd, s3_res_t *r) {
  if (st->size <= st->done) return 0;
  char key[1024];
  snprintf(key, sizeof(key), "%s.part-%06d", st->key, st->nparts + 1);
  int rc = s3_put_big(o->s3, key, fd, st->done, st->size - st->done, PART_SIZE, r);
  if (rc) return rc;
  st->done = st->size;
  st->nparts++;
  st->pending_ms = 0;
  return 0;
}

/* An ended job's file: whole, then its parts go. */
static int push_whole(objstore_t *o, stream_t *st, int fd, s3_res_t *r) {
  int rc = s3_put_big(o->s3, st->key, fd, 0, st->size, PART_SIZE, r);
  for (; !rc && st->nparts > 0; st->nparts--) {
    char key[1024];
    snprintf(key, sizeof(key), "%s.part-%06d", st->key, st->nparts);
    rc = s3_delete(o->s3, key, r);
  }
  if (!rc) st->done = -1; /* whole */
  return rc;
}

static int push_stream(objstore_t *o, ojob_t *j, stream_t *st, s3_res_t *r) {
  if (!st->path || st->done < 0) return 0;
  int fd = open(st->path, O_RDONLY | O_CLOEXEC);
  struct stat sb;
  if (fd < 0 || fstat(fd, &sb)) {
    if (fd >= 0) close(fd);
    /* No file: nothing was written (or it is gone), nothing to send. */
    if (j->ended) st->done = -1;
    st->pending_ms = 0;
    return 0;
  }
  st->size = sb.st_size;
  if (st->size > st->done && !st->pending_ms) st->pending_ms = clock_wall_ms();
  int rc = j->ended ? push_whole(o, st, fd, r) : push_part(o, st, fd, r);
  close(fd);
  return rc;
}

static int cmp_mtime_desc(const void *a, const void *b) {
  return strcmp(((const s3_obj_t *)b)->mtime, ((const s3_obj_t *)a)->mtime);
}

/* Scrapyd's jobs_to_keep on the store's project/spider "directory": the
 * newest whole objects stay. */
static void keep_newest(objstore_t *o, const char *top, const ojob_t *j) {
  int keep = o->cfg->jobs_to_keep;
  if (keep <= 0) return;
  char pre[1024];
  snprintf(pre, sizeof(pre), "%s/%s/%s/", top, j->project, j->spider);
  s3_list_t l = {0};
  s3_res_t r;
  if (s3_list(o->s3, pre, &l, &r)) {
    s3_list_release(&l);
    return;
  }
  size_t n = 0;
  for (size_t i = 0; i < l.n; i++) /* parts belong to running jobs */
    if (!strstr(l.v[i].key, ".part-")) l.v[n++] = l.v[i];
    else free(l.v[i].key);
  l.n = n;
  if (l.n) qsort(l.v, l.n, sizeof(*l.v), cmp_mtime_desc);
  for (size_t i = (size_t)keep; i < l.n; i++) s3_delete(o->s3, l.v[i].key, &r);
  s3_list_release(&l);
}

/* One job's turn: 1 when it is done with (whole and marker gone). */
static int job_turn(objstore_t *o, ojob_t *j, int64_t now) {
  if (j->retry_ms > now) return 0;
  s3_res_t r;
  int rc = 0, was_ended = j->ended;
  int64_t before[2] = {j->s[0].done, j->s[1].done};
  for (int i = 0; i < 2 && !rc; i++) rc = push_stream(o, j, &j->s[i], &r);
  if (rc) {
    status_fail(o, &r);
    j->backoff_ms = j->backoff_ms ? j->backoff_ms * 2 : BACKOFF_MIN_MS;
    if (j->backoff_ms > BACKOFF_MAX_MS) j->backoff_ms = BACKOFF_MAX_MS;
    j->retry_ms = now + j->backoff_ms;
  } else {
    status_ok(o);
    j->backoff_ms = 0;
    j->retry_ms = 0;
  }
  if (was_ended && j->s[0].done < 0 && j->s[1].done < 0) {
    marker_drop(o, j);
    keep_newest(o, "logs", j);
    keep_newest(o, "items", j);
    return 1;
  }
  if (before[0] != j->s[0].done || before[1] != j->s[1].done) marker_save(o, j);
  return 0;
}

static void forget_turn(objstore_t *o, int64_t now) {
  if (o->forget_retry_ms > now) return;
  while (o->forgets) {
    note_t *n = o->forgets;
    char key[1024];
    s3_res_t r;
    int rc = 0;
    snprintf(key, sizeof(key), "logs/%s/%s/%s.log", n->project, n->spider, n->jobid);
    rc = s3_delete_joined(o->s3, key, &r);
    snprintf(key, sizeof(key), "items/%s/%s/%s.jl", n->project, n->spider, n->jobid);
    if (!rc) rc = s3_delete_joined(o->s3, key, &r);
    if (rc) {
      status_fail(o, &r);
      o->forget_retry_ms = now + BACKOFF_MAX_MS / 4;
      return;
    }
    o->forgets = n->next;
    note_free(n);
  }
}

/* What waits, for /metrics. */
static void backlog_publish(objstore_t *o) {
  int64_t bytes = 0, objects = 0, oldest = 0;
  for (ojob_t *j = o->jobs; j; j = j->next)
    for (int i = 0; i < 2; i++) {
      stream_t *st = &j->s[i];
      if (!st->path || st->done < 0) continue;
      int64_t wait = j->ended ? st->size : st->size - st->done;
      if (wait <= 0 && !j->ended) continue;
      bytes += wait > 0 ? wait : 0;
      objects++;
      if (st->pending_ms && (!oldest || st->pending_ms < oldest)) oldest = st->pending_ms;
    }
  pthread_mutex_lock(&o->s3->status.mu);
  o->s3->status.backlog_bytes = bytes;
  o->s3->status.backlog_objects = objects;
  o->s3->status.oldest_ms = oldest;
  pthread_mutex_unlock(&o->s3->status.mu);
}

static void round_run(objstore_t *o) {
  int64_t now = clock_wall_ms();
  backlog_publish(o); /* ended jobs count from their note on */
  for (ojob_t *j = o->jobs, *next; j; j = next) {
    next = j->next;
    if (job_turn(o, j, now)) job_unlink(o, j);
  }
  forget_turn(o, now);
  backlog_publish(o);
}

/* Takes the queued notes; 1 when stopping. Waits up to wait_ms first. */
static int notes_take(objstore_t *o, int64_t wait_ms) {
  pthread_mutex_lock(&o->mu);
  if (!o->notes && !o->stop && wait_ms > 0) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += wait_ms / 1000;
    ts.tv_nsec += (wait_ms % 1000) * 1000000;
    if (ts.tv_nsec >= 1000000000) {
      ts.tv_sec++;
      ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&o->cond, &o->mu, &ts);
  }
  note_t *n = o->notes;
  o->notes = NULL;
  o->notes_tail = &o->notes;
  int stop = o->stop;
  pthread_mutex_unlock(&o->mu);
  while (n) {
    note_t *next = n->next;
    apply_note(o, n);
    n = next;
  }
  return stop;
}

/* Last round at a stop: ended jobs go up while the store answers and the
 * budget lasts; the rest waits in the spool for the next start. */
static void final_rounds(objstore_t *o) {
  int64_t deadline = clock_wall_ms() + STOP_BUDGET_MS;
  for (ojob_t *j = o->jobs; j; j = j->next) j->retry_ms = 0;
  while (o->jobs && clock_wall_ms() < deadline) {
    round_run(o);
    int waiting = 0;
    for (ojob_t *j = o->jobs; j; j = j->next) waiting |= j->retry_ms > 0;
    if (waiting) break;
    int any_ended = 0;
    for (ojob_t *j = o->jobs; j; j = j->next) any_ended |= j->ended;
    if (!any_ended) break;
  }
}

static void *thread_main(void *arg) {
  objstore_t *o = arg;
  /* Uploads yield the CPU to crawls (Linux nices threads one by one). */
  if (setpriority(PRIO_PROCESS, (id_t)gettid(), UPLOADER_NICE))
    log_debug("objstore", "cannot lower the uploader's priority: %s", strerror(errno));
  int64_t flush_ms = (int64_t)(o->cfg->object_store_flush * 1000.0);
  /* The first round waits a flush interval: crawls adopted at the start
   * are noted by then, and their spool goes on in parts. */
  int64_t next = clock_wall_ms() + flush_ms;
  for (;;) {
    int64_t now = clock_wall_ms();
    int stop = notes_take(o, next - now);
    if (stop) break;
    now = clock_wall_ms();
    if (now >= next) {
      round_run(o);
      next = now + flush_ms;
    } else {
      /* A job ended: its files go up now, not at the next flush. */
      int64_t keep = next;
      for (ojob_t *j = o->jobs; j; j = j->next)
        if (j->ended && j->retry_ms <= now) next = now;
      if (next == now) {
        round_run(o);
        next = keep;
      }
    }
  }
  final_rounds(o);
  return NULL;
}

/* ---- start and stop ---- */

static int spool_dir_of(const config_t *cfg, char **out) {
  const char *base = cfg->dbs_dir[0] && strcmp(cfg->dbs_dir, ":memory:") ? cfg->dbs_dir
                                                                          : cfg->logs_dir;
  if (asprintf(out, "%s/objstore-spool", base[0] ? base : ".") < 0) return -ENOMEM;
  return fs_mkdirs(*out, 0755);
}

static int check_bucket(s3_t *s3, char *err, size_t errlen) {
  s3_res_t r;
  int rc = s3_check_bucket(s3, &r);
  if (!rc) {
    log_info("objstore", "object store s3://%s/%s at %s: ready", s3->bucket, s3->prefix,
             s3->endpoint);
    return 0;
  }
  if (rc == -EIO || rc == -EAGAIN || !strcmp(r.code, "RequestTimeTooSkewed")) {
    /* It may come back: crawls run and spool meanwhile. */
    log_warn("objstore", "%s: logs and items wait on local disk until it answers", r.err);
    pthread_mutex_lock(&s3->status.mu);
    snprintf(s3->status.problem, sizeof(s3->status.problem), "%s", r.err);
    pthread_mutex_unlock(&s3->status.mu);
    return 0;
  }
  snprintf(err, errlen, "object_store: %s", r.err);
  return rc;
}

int objstore_start(objstore_t **out, s3_t *s3, const config_t *cfg, char *err, size_t errlen) {
  *out = NULL;
  int rc = check_bucket(s3, err, errlen);
  if (rc) return rc;
  objstore_t *o = calloc(1, sizeof(*o));
  if (!o) return -ENOMEM;
  o->s3 = s3;
  o->cfg = cfg;
  o->notes_tail = &o->notes;
  if ((rc = spool_dir_of(cfg, &o->spool_dir))) {
    snprintf(err, errlen, "cannot create the object store's spool directory: %s",
             strerror(-rc));
    free(o->spool_dir);
    free(o);
    return rc;
  }
  pthread_mutex_init(&o->mu, NULL);
  pthread_cond_init(&o->cond, NULL);
  spool_load(o);
  if ((rc = -pthread_create(&o->thread, NULL, thread_main, o))) {
    snprintf(err, errlen, "cannot start the object store's uploader: %s", strerror(-rc));
    o->thread = 0;
    objstore_stop(o);
    return rc;
  }
  *out = o;
  return 0;
}

void objstore_stop(objstore_t *o) {
  if (!o) return;
  if (o->thread) {
    pthread_mutex_lock(&o->mu);
    o->stop = 1;
    pthread_cond_signal(&o->cond);
    pthread_mutex_unlock(&o->mu);
    pthread_join(o->thread, NULL);
  }
  for (note_t *n = o->notes, *next; n; n = next) {
    next = n->next;
    note_free(n);
  }
  for (note_t *n = o->forgets, *next; n; n = next) {
    next = n->next;
    note_free(n);
  }
  while (o->jobs) job_unlink(o, o->jobs);
  pthread_mutex_destroy(&o->mu);
  pthread_cond_destroy(&o->cond);
  free(o->spool_dir);
  free(o);
}
