/* A paused crawl's state directory, packed and unpacked with tar(1)
 * (flow/pausestate.h). */
#include "flow/pausestate.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "error.h"
#include "fsutil.h"
#include "log.h"
#include "net/s3.h"

extern char **environ;

/* Set once at start-up, read by store threads. */
static const s3_t *g_s3;

void pausestate_set_objstore(const struct s3 *s3) {
  __atomic_store_n(&g_s3, s3, __ATOMIC_RELEASE);
}

static const s3_t *objstore(void) { return __atomic_load_n(&g_s3, __ATOMIC_ACQUIRE); }

static void state_key(char *key, size_t n, int64_t id) {
  snprintf(key, n, "jobstate/%lld.tar.gz", (long long)id);
}

/* The tar in the bucket; SPD_ESTORE (logged) when it cannot be put. */
static int s3_put_state(const s3_t *s3, int64_t id, const void *data, size_t len) {
  FILE *f = fs_tmpfile();
  if (!f) return -errno;
  int rc = fwrite(data, 1, len, f) == len && fflush(f) == 0 ? 0 : -EIO;
  char key[64];
  state_key(key, sizeof(key), id);
  s3_res_t r = {0};
  if (!rc && s3_put_big(s3, key, fileno(f), 0, (int64_t)len, 64 << 20, &r)) {
    log_error("launcher", "cannot put the state of job #%lld in the object store: %s",
              (long long)id, r.err);
    rc = SPD_ESTORE;
  }
  fclose(f);
  return rc;
}

/* The tar from the bucket, into memory. */
static int s3_get_state(const s3_t *s3, int64_t id, void **data, size_t *len) {
  FILE *f = fs_tmpfile();
  if (!f) return -errno;
  char key[64];
  state_key(key, sizeof(key), id);
  s3_res_t r = {0};
  int rc = s3_get_fd(s3, key, 0, -1, fileno(f), &r);
  off_t n = rc ? 0 : lseek(fileno(f), 0, SEEK_END);
  if (!rc && n <= 0) rc = -EIO;
  if (!rc && !(*data = malloc((size_t)n))) rc = -ENOMEM;
  if (!rc && pread(fileno(f), *data, (size_t)n, 0) != n) rc = -EIO;
  if (!rc) *len = (size_t)n;
  if (rc && *data) {
    free(*data);
    *data = NULL;
  }
  fclose(f);
  return rc;
}

char *pausestate_dir(const config_t *cfg, int64_t id) {
  char *out = NULL, *cwd = NULL;
  int rc;
  if (cfg->dbs_dir[0] == '/') {
    rc = asprintf(&out, "%s/jobstate/%lld", cfg->dbs_dir, (long long)id);
  } else {
    if (!(cwd = getcwd(NULL, 0))) return NULL;
    rc = asprintf(&out, "%s/%s/jobstate/%lld", cwd, cfg->dbs_dir, (long long)id);
    free(cwd);
  }
  return rc < 0 ? NULL : out;
}

int pausestate_ours(const config_t *cfg, const char *dir) {
  const char *p = strstr(dir, "/jobstate/");
  return p && strstr(dir, cfg->dbs_dir) != NULL;
}

/* Runs tar with argv, its stdin from in_fd and stdout to out_fd (-1 =
 * /dev/null); 0 when it exits 0. */
static int run_tar(char *const argv[], int in_fd, int out_fd) {
  posix_spawn_file_actions_t fa;
  pid_t pid;
  int rc = posix_spawn_file_actions_init(&fa);
  if (rc) return -rc;
  if (in_fd >= 0) posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
  else posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  if (out_fd >= 0) posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
  else posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  rc = posix_spawnp(&pid, "tar", &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc) return -rc;
  int ws = 0;
  while (waitpid(pid, &ws, 0) < 0)
    if (errno != EINTR) return -errno;
  return WIFEXITED(ws) && WEXITSTATUS(ws) == 0 ? 0 : -EIO;
}

/* A temporary file beside dir, unlinked at once: tar's output or input. */
static int temp_fd(void) {
  char path[] = "/tmp/spiderd-state-XXXXXX";
  int fd = mkostemp(path, O_CLOEXEC);
  if (fd >= 0) unlink(path);
  return fd < 0 ? -errno : fd;
}

int pausestate_pack(const char *dir, void **data, size_t *len) {
  *data = NULL;
  *len = 0;
  if (access(dir, F_OK) != 0) return -ENOENT;
  int fd = temp_fd();
  if (fd < 0) return fd;
  char *argv[] = {"tar", "-czf", "-", "-C", (char *)dir, ".", NULL};
  int rc = run_tar(argv, -1, fd);
  off_t size = rc ? 0 : lseek(fd, 0, SEEK_END);
  if (!rc && size < 0) rc = -errno;
  if (!rc && (size_t)size > PAUSESTATE_MAX) rc = -EFBIG;
  char *buf = rc ? NULL : malloc((size_t)size + 1);
  if (!rc && !buf) rc = -ENOMEM;
  if (!rc && pread(fd, buf, (size_t)size, 0) != size) rc = -EIO;
  close(fd);
  if (rc) {
    free(buf);
    return rc;
  }
  *data = buf;
  *len = (size_t)size;
  return 0;
}

int pausestate_unpack(const char *dir, const void *data, size_t len) {
  int fd = temp_fd();
  if (fd < 0) return fd;
  int rc = 0;
  const char *p = data;
  for (size_t off = 0; off < len && !rc;) {
    ssize_t n = write(fd, p + off, len - off);
    if (n < 0 && errno != EINTR) rc = -errno;
    if (n > 0) off += (size_t)n;
  }
  if (!rc && lseek(fd, 0, SEEK_SET) < 0) rc = -errno;
  if (!rc) {
    fs_rmtree(dir);
    rc = fs_mkdirs(dir, 0755);
  }
  char *argv[] = {"tar", "-xzf", "-", "-C", (char *)dir, NULL};
  if (!rc) rc = run_tar(argv, fd, -1);
  close(fd);
  return rc;
}

void pausestate_restore(store_t *s, const config_t *cfg, const job_t *j) {
  void *data = NULL;
  size_t len = 0;
  int rc = store_job_state_get(s, j->id, &data, &len);
  if (rc == -ENOENT || rc == -ENOTSUP) return;
  /* An empty row: the tar is in the object store. */
  if (!rc && len == 0 && objstore()) {
    free(data);
    data = NULL;
    rc = s3_get_state(objstore(), j->id, &data, &len);
  }
  char *dir = rc ? NULL : pausestate_dir(cfg, j->id);
  if (!rc && !dir) rc = -ENOMEM;
  if (!rc) rc = pausestate_unpack(dir, data, len);
  if (rc)
    log_warn("launcher", "job '%s': could not restore its paused state: %s", j->jobid,
             strerror(-rc));
  else
    log_info("launcher", "job '%s': restored its paused state (%zu bytes) into %s", j->jobid,
             len, dir);
  free(dir);
  free(data);
}

int pausestate_save(store_t *s, int64_t id, const char *dir, int64_t now_ms) {
  void *data = NULL;
  size_t len = 0;
  int rc = pausestate_pack(dir, &data, &len);
  if (rc) {
    log_warn("launcher", "job #%lld: its state in %s stays on this node: %s", (long long)id,
             dir, rc == -EFBIG ? "larger than the store takes" : strerror(-rc));
    return 0;
  }
  const s3_t *s3 = objstore();
  if (s3 && (rc = s3_put_state(s3, id, data, len))) {
    free(data);
    return rc;
  }
  rc = store_job_state_put(s, id, s3 ? "" : data, s3 ? 0 : len, now_ms);
  free(data);
  return rc == -ENOTSUP ? 0 : rc;
}

int pausestate_drop(store_t *s, int64_t id) {
  int rc = store_job_state_delete(s, id);
  const s3_t *s3 = objstore();
  if (s3 && rc != -ENOTSUP) {
    char key[64];
    state_key(key, sizeof(key), id);
    s3_res_t r = {0};
    if (s3_delete(s3, key, &r) && r.status != 404)
      log_warn("launcher", "cannot delete the state of job #%lld from the object store: %s",
               (long long)id, r.err);
  }
  return rc == -ENOTSUP ? 0 : rc;
}
