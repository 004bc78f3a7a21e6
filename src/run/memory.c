/* The memory this node has for crawls (run/memory.h). */
#include "run/memory.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/limits.h"

#define CGROUP_ROOT "/sys/fs/cgroup"

static ssize_t read_text(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, cap - 1);
  close(fd);
  if (n < 0) return -1;
  buf[n] = '\0';
  return n;
}

int64_t memory_parse_meminfo(const char *text) {
  const char *p = text ? strstr(text, "MemAvailable:") : NULL;
  if (!p) return -1;
  char *end = NULL;
  long long kb = strtoll(p + strlen("MemAvailable:"), &end, 10);
  if (end == p + strlen("MemAvailable:") || kb < 0) return -1;
  return (int64_t)kb * 1024;
}

/* The least headroom (memory.max - memory.current) from the cgroup at
 * rel up to the root; -1 when no level has a limit. */
static int64_t cgroup_headroom(char *rel) {
  int64_t best = -1;
  char path[4200], buf[64];
  for (;;) {
    snprintf(path, sizeof(path), CGROUP_ROOT "%s/memory.max", rel);
    long long max = -1, cur = -1;
    if (read_text(path, buf, sizeof(buf)) > 0 && strncmp(buf, "max", 3)) max = atoll(buf);
    snprintf(path, sizeof(path), CGROUP_ROOT "%s/memory.current", rel);
    if (max >= 0 && read_text(path, buf, sizeof(buf)) > 0) cur = atoll(buf);
    if (max >= 0 && cur >= 0) {
      int64_t room = max > cur ? (int64_t)(max - cur) : 0;
      if (best < 0 || room < best) best = room;
    }
    char *slash = strrchr(rel, '/');
    if (!slash || slash == rel) break;
    *slash = '\0';
  }
  return best;
}

int memory_available(int64_t *out, const char **source) {
  char text[8192];
  *out = 0;
  *source = "meminfo";
  int64_t avail = read_text("/proc/meminfo", text, sizeof(text)) > 0
                      ? memory_parse_meminfo(text) : -1;
  char rel[4096];
  if (read_text("/proc/self/cgroup", text, sizeof(text)) > 0 &&
      limits_cgroup_path(text, rel, sizeof(rel)) == 0 && strcmp(rel, "/")) {
    int64_t room = cgroup_headroom(rel);
    if (room >= 0 && (avail < 0 || room < avail)) {
      avail = room;
      *source = "cgroup";
    }
  }
  if (avail < 0) return -ENOENT;
  *out = avail;
  return 0;
}
