/* Egg copies between a shared store and eggs_dir (eggsync.h). */
#include "flow/eggsync.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "clock.h"
#include "core/names.h"
#include "error.h"
#include "fsutil.h"
#include "log.h"
#include "net/s3.h"
#include "store/eggs.h"

#include <fcntl.h>
#include <unistd.h>

/* ---- versions an upload holds (eggsync_hold) ---- */

typedef struct held {
  struct held *next;
  char *project, *stem;
} held_t;

static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static held_t *held_list;
/* Counts holds and releases: a copy whose list of the store's eggs is
 * older than an upload's may not judge that upload's file. */
static uint64_t held_gen;

int eggsync_hold(const char *project, const char *version) {
  held_t *h = calloc(1, sizeof(*h));
  if (!h || !(h->project = strdup(project)) || !(h->stem = version_sanitize(version))) {
    if (h) free(h->project);
    free(h);
    return -ENOMEM;
  }
  pthread_mutex_lock(&held_lock);
  h->next = held_list;
  held_list = h;
  held_gen++;
  pthread_mutex_unlock(&held_lock);
  return 0;
}

void eggsync_unhold(const char *project, const char *version) {
  char *stem = version_sanitize(version);
  held_t *gone = NULL;
  pthread_mutex_lock(&held_lock);
  for (held_t **pp = &held_list; stem && *pp; pp = &(*pp)->next)
    if (!strcmp((*pp)->project, project) && !strcmp((*pp)->stem, stem)) {
      gone = *pp;
      *pp = gone->next;
      held_gen++;
      break;
    }
  pthread_mutex_unlock(&held_lock);
  if (gone) {
    free(gone->project);
    free(gone->stem);
    free(gone);
  }
  free(stem);
}

/* held_gen now; *busy = some upload holds a version. */
static uint64_t held_now(int *busy) {
  pthread_mutex_lock(&held_lock);
  uint64_t g = held_gen;
  *busy = held_list != NULL;
  pthread_mutex_unlock(&held_lock);
  return g;
}

static int is_held(const char *project, const char *stem) {
  int found = 0;
  pthread_mutex_lock(&held_lock);
  for (held_t *h = held_list; h && !found; h = h->next)
    found = !strcmp(h->project, project) && !strcmp(h->stem, stem);
  pthread_mutex_unlock(&held_lock);
  return found;
}

/* Set once at start-up, read by store threads. */
static const s3_t *g_s3;

void eggsync_set_objstore(const s3_t *s3) { __atomic_store_n(&g_s3, s3, __ATOMIC_RELEASE); }

static const s3_t *objstore(void) { return __atomic_load_n(&g_s3, __ATOMIC_ACQUIRE); }

/* A command project's tar.gz keeps its own extension in the bucket, so an
 * operator sees what each object is. */
static const char *const egg_exts[] = {".egg", ".tar.gz"};

static void egg_key(char *key, size_t n, const char *project, const char *stem,
                    const char *ext) {
  snprintf(key, n, "eggs/%s/%s%s", project, stem, ext);
}

/* Puts the file at path in the bucket; *size = its size. Any failure is
 * SPD_ESTORE (the reason is logged): the caller answers 503. */
static int s3_put_egg(const s3_t *s3, const char *project, const char *stem, const char *path,
                      int64_t *size) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  struct stat st;
  unsigned char magic[2] = {0};
  int rc = fstat(fd, &st) ? -errno : 0;
  if (!rc && pread(fd, magic, 2, 0) < 0) rc = -errno;
  if (rc) {
    close(fd);
    return rc;
  }
  char key[4096];
  egg_key(key, sizeof(key), project, stem, egg_exts[magic[0] == 0x1f && magic[1] == 0x8b]);
  s3_res_t r = {0};
  rc = s3_put_big(s3, key, fd, 0, (int64_t)st.st_size, 64 << 20, &r);
  close(fd);
  if (rc) {
    log_error("eggs", "cannot put egg %s/%s in the object store: %s", project, stem, r.err);
    return SPD_ESTORE;
  }
  *size = (int64_t)st.st_size;
  return 0;
}

/* Reads the object of project/stem (either extension) into memory. */
static int s3_get_egg(const s3_t *s3, const char *project, const char *stem, void **data,
                      size_t *len) {
  FILE *f = fs_tmpfile();
  if (!f) return -errno;
  int rc = -ENOENT;
  s3_res_t r = {0};
  for (size_t i = 0; i < sizeof(egg_exts) / sizeof(egg_exts[0]) && rc == -ENOENT; i++) {
    char key[4096];
    egg_key(key, sizeof(key), project, stem, egg_exts[i]);
    if (ftruncate(fileno(f), 0) || lseek(fileno(f), 0, SEEK_SET)) rc = -errno;
    else rc = s3_get_fd(s3, key, 0, -1, fileno(f), &r);
  }
  if (rc && rc != -ENOENT)
    log_error("eggs", "cannot read egg %s/%s from the object store: %s", project, stem, r.err);
  off_t n = rc ? 0 : lseek(fileno(f), 0, SEEK_END);
  if (!rc && n <= 0) rc = -EIO; /* an egg is never empty */
  if (!rc && !(*data = malloc((size_t)n))) rc = -ENOMEM;
  if (!rc && pread(fileno(f), *data, (size_t)n, 0) != n) rc = -EIO;
  if (!rc) *len = (size_t)n;
  if (rc) {
    free(*data);
    *data = NULL;
  }
  fclose(f);
  return rc;
}

void eggsync_objstore_delete(const char *project, const char *stem) {
  const s3_t *s3 = objstore();
  if (!s3) return;
  s3_list_t l = {0};
  s3_res_t r = {0};
  char key[4096];
  int rc = 0;
  if (stem) {
    for (size_t i = 0; i < sizeof(egg_exts) / sizeof(egg_exts[0]) && !rc; i++) {
      egg_key(key, sizeof(key), project, stem, egg_exts[i]);
      rc = s3_delete(s3, key, &r);
      if (rc == -ENOENT) rc = 0;
    }
  } else {
    snprintf(key, sizeof(key), "eggs/%s/", project);
    rc = s3_list(s3, key, &l, &r);
    for (size_t i = 0; i < l.n && !rc; i++) {
      rc = s3_delete(s3, l.v[i].key, &r);
      if (rc == -ENOENT) rc = 0;
    }
    s3_list_release(&l);
  }
  /* The store's row is gone, so no node fetches it again: what is left is
   * an orphan an operator can remove, not a version any node runs. */
  if (rc)
    log_error("eggs", "cannot delete egg %s/%s from the object store: %s", project,
              stem ? stem : "*", r.err);
}

static int read_file(const char *path, void **data, size_t *len) {
  *data = NULL;
  *len = 0;
  FILE *f = fopen(path, "rbe");
  if (!f) return -errno;
  struct stat st;
  int rc = 0;
  if (fstat(fileno(f), &st)) {
    rc = -errno;
  } else {
    *data = malloc(st.st_size ? (size_t)st.st_size : 1);
    if (!*data) rc = -ENOMEM;
    else if (fread(*data, 1, (size_t)st.st_size, f) != (size_t)st.st_size) rc = -EIO;
    else *len = (size_t)st.st_size;
  }
  fclose(f);
  if (rc) {
    free(*data);
    *data = NULL;
  }
  return rc;
}

int eggsync_put_file(store_t *s, const char *project, const char *version, const char *path,
                     int64_t now_ms) {
  char *stem = version_sanitize(version);
  void *data = NULL;
  size_t len = 0;
  const s3_t *s3 = objstore();
  int rc = stem ? 0 : -ENOMEM;
  if (!rc && s3) {
    int64_t size = 0;
    rc = s3_put_egg(s3, project, stem, path, &size);
    if (!rc) rc = store_egg_put(s, project, stem, NULL, (size_t)size, now_ms);
  } else if (!rc) {
    rc = read_file(path, &data, &len);
    if (!rc) rc = store_egg_put(s, project, stem, data, len, now_ms);
  }
  free(data);
  free(stem);
  return rc;
}

static int64_t local_size(const char *eggs_dir, const char *project, const char *stem) {
  char path[4096];
  struct stat st;
  snprintf(path, sizeof(path), "%s/%s/%s.egg", eggs_dir, project, stem);
  return stat(path, &st) ? -1 : (int64_t)st.st_size;
}

static int fetch(store_t *s, const char *eggs_dir, const egg_ref_t *e) {
  void *data = NULL;
  size_t len = 0;
  char *tmp = NULL, err[256];
  int rc = store_egg_get(s, e->project, e->version, &data, &len);
  /* No bytes but a size: the egg is in the object store. */
  if (!rc && len == 0 && e->size > 0) {
    const s3_t *s3 = objstore();
    free(data);
    data = NULL;
    rc = s3 ? s3_get_egg(s3, e->project, e->version, &data, &len) : SPD_ECONFIG;
  }
  if (rc == -ENOENT) return 0; /* deleted meanwhile */
  if (!rc) rc = eggs_stage(eggs_dir, data, len, &tmp, err, sizeof(err));
  if (!rc) {
    rc = eggs_commit(eggs_dir, e->project, e->version, tmp, NULL);
    if (rc) eggs_discard(tmp);
  }
  free(tmp);
  free(data);
  if (rc)
    log_error("eggs", "cannot copy egg %s/%s from the store: %s", e->project, e->version,
              spd_strerror(rc));
  else
    log_info("eggs", "copied egg %s/%s from the store (%zu bytes)", e->project, e->version, len);
  return rc;
}

static int in_store(const egg_list_t *l, const char *project, const char *stem) {
  for (size_t i = 0; i < l->n; i++)
    if (!strcmp(l->v[i].project, project) && (!stem || !strcmp(l->v[i].version, stem)))
      return 1;
  return 0;
}

/* Deletes the local versions of project the store does not list. */
static int prune_project(const char *eggs_dir, const egg_list_t *l, const char *project,
                         int *changed) {
  char **v = NULL;
  size_t n = 0;
  int rc = eggs_versions(eggs_dir, project, &v, &n);
  if (rc) return rc;
  for (size_t i = 0; i < n; i++) {
    if (in_store(l, project, v[i])) continue;
    if (eggs_delete_version(eggs_dir, project, v[i]) == 0) {
      (*changed)++;
      log_info("eggs", "removed egg %s/%s: the store no longer has it", project, v[i]);
    }
  }
  strv_free(v, n);
  return 0;
}

int eggsync_pull(store_t *s, const char *eggs_dir, const char *project, int *changed) {
  egg_list_t l = {0};
  int busy; /* read at the removals */
  uint64_t gen = held_now(&busy);
  int n = 0, rc = store_eggs_list(s, &l);
  if (changed) *changed = 0;
  if (rc) return rc;
  for (size_t i = 0; i < l.n && !rc; i++) {
    const egg_ref_t *e = &l.v[i];
    if (project && strcmp(e->project, project)) continue;
    if (local_size(eggs_dir, e->project, e->version) == e->size) continue;
    if (is_held(e->project, e->version)) continue; /* the upload writes it */
    rc = fetch(s, eggs_dir, e);
    if (!rc) n++;
  }
  /* Removals wait for a copy whose list no upload overtook: the next one. */
  if (!rc && held_now(&busy) == gen && !busy) {
    if (project) {
      rc = prune_project(eggs_dir, &l, project, &n);
    } else {
      char **p = NULL;
      size_t np = 0;
      rc = eggs_projects(eggs_dir, &p, &np);
      for (size_t i = 0; i < np && !rc; i++) rc = prune_project(eggs_dir, &l, p[i], &n);
      strv_free(p, np);
    }
  }
  egg_list_release(&l);
  if (changed) *changed = n;
  return rc;
}

int eggsync_push_missing(store_t *s, const char *eggs_dir, int *pushed) {
  egg_list_t l = {0};
  char **p = NULL;
  size_t np = 0;
  int n = 0, rc = store_eggs_list(s, &l);
  if (!rc) rc = eggs_projects(eggs_dir, &p, &np);
  for (size_t i = 0; i < np && !rc; i++) {
    char **v = NULL;
    size_t nv = 0;
    rc = eggs_versions(eggs_dir, p[i], &v, &nv);
    for (size_t k = 0; k < nv && !rc; k++) {
      if (in_store(&l, p[i], v[k])) continue;
      char path[4096];
      snprintf(path, sizeof(path), "%s/%s/%s.egg", eggs_dir, p[i], v[k]);
      rc = eggsync_put_file(s, p[i], v[k], path, clock_wall_ms());
      if (!rc) {
        n++;
        log_info("eggs", "stored local egg %s/%s in the shared store", p[i], v[k]);
      }
    }
    strv_free(v, nv);
  }
  strv_free(p, np);
  egg_list_release(&l);
  if (pushed) *pushed = n;
  return rc;
}
