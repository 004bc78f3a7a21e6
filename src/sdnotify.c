/* sd_notify(3) without libsystemd: see sdnotify.h. */
#include "sdnotify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int sdnotify_to(const char *addr, const char *state) {
  if (!addr || !*addr) return 0;
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  size_t n = strlen(addr);
  if (addr[0] != '/' && addr[0] != '@') return -EAFNOSUPPORT; /* e.g. vsock: not spoken */
  if (n > sizeof(sa.sun_path)) return -EINVAL;
  memcpy(sa.sun_path, addr, n);
  if (addr[0] == '@') sa.sun_path[0] = '\0'; /* abstract namespace */
  else if (n == sizeof(sa.sun_path)) return -EINVAL; /* no room for the NUL */
  socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + (addr[0] == '/'));

  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  ssize_t sent;
  do sent = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
  while (sent < 0 && errno == EINTR);
  int rc = sent < 0 ? -errno : 1;
  close(fd);
  return rc;
}

static int taken;
static char *taken_socket;
static uint64_t taken_watchdog;

static uint64_t watchdog_from_env(void);

void sdnotify_take_env(void) {
  const char *s = getenv("NOTIFY_SOCKET");
  free(taken_socket);
  taken_socket = s && *s ? strdup(s) : NULL;
  taken_watchdog = watchdog_from_env();
  taken = 1;
  unsetenv("NOTIFY_SOCKET");
  unsetenv("WATCHDOG_USEC");
  unsetenv("WATCHDOG_PID");
}

int sdnotify(const char *state) {
  return sdnotify_to(taken ? taken_socket : getenv("NOTIFY_SOCKET"), state);
}

uint64_t sdnotify_watchdog_usec(void) { return taken ? taken_watchdog : watchdog_from_env(); }

static uint64_t watchdog_from_env(void) {
  const char *pid = getenv("WATCHDOG_PID");
  if (pid && *pid && strtol(pid, NULL, 10) != (long)getpid()) return 0;
  const char *usec = getenv("WATCHDOG_USEC");
  if (!usec || !*usec) return 0;
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(usec, &end, 10);
  if (errno || *end || usec[0] == '-') return 0;
  return (uint64_t)v;
}
