/* sdnotify against real datagram sockets: a bound path, an abstract name,
 * and no NOTIFY_SOCKET at all. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>

#include "sdnotify.h"

/* Binds a datagram socket at NAME ('@' = abstract) and returns its fd. */
static int bind_dgram(const char *name) {
  int fd = socket(AF_UNIX, SOCK_DGRAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_un sa;
  memset(&sa, 0, sizeof(sa));
  sa.sun_family = AF_UNIX;
  size_t n = strlen(name);
  memcpy(sa.sun_path, name, n);
  socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
  if (name[0] == '@') sa.sun_path[0] = '\0';
  else len++;
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, len), 0);
  return fd;
}

static void recv_is(int fd, const char *want) {
  char buf[1024];
  ssize_t n = recv(fd, buf, sizeof(buf) - 1, MSG_DONTWAIT);
  assert_true(n >= 0);
  buf[n] = '\0';
  assert_string_equal(buf, want);
}

static void test_path_socket(void **state) {
  (void)state;
  char path[] = "/tmp/sdnotify-test-XXXXXX";
  assert_non_null(mkdtemp(path));
  char sock[128];
  snprintf(sock, sizeof(sock), "%s/notify", path);
  int fd = bind_dgram(sock);
  setenv("NOTIFY_SOCKET", sock, 1);
  assert_int_equal(sdnotify("READY=1\nSTATUS=up"), 1);
  recv_is(fd, "READY=1\nSTATUS=up");
  assert_int_equal(sdnotify("STOPPING=1"), 1);
  recv_is(fd, "STOPPING=1");
  close(fd);
  unlink(sock);
  rmdir(path);
  /* nobody listens any more: an error, not a crash */
  assert_true(sdnotify("WATCHDOG=1") < 0);
  unsetenv("NOTIFY_SOCKET");
}

static void test_abstract_socket(void **state) {
  (void)state;
  char name[64];
  snprintf(name, sizeof(name), "@spiderd-sdnotify-test-%d", (int)getpid());
  int fd = bind_dgram(name);
  assert_int_equal(sdnotify_to(name, "WATCHDOG=1"), 1);
  recv_is(fd, "WATCHDOG=1");
  close(fd);
}

static void test_unset_does_nothing(void **state) {
  (void)state;
  unsetenv("NOTIFY_SOCKET");
  assert_int_equal(sdnotify("READY=1"), 0);
  setenv("NOTIFY_SOCKET", "", 1);
  assert_int_equal(sdnotify("READY=1"), 0);
  setenv("NOTIFY_SOCKET", "vsock:2:1234", 1);
  assert_int_equal(sdnotify("READY=1"), -EAFNOSUPPORT);
  unsetenv("NOTIFY_SOCKET");
}

static void test_watchdog_usec(void **state) {
  (void)state;
  unsetenv("WATCHDOG_USEC");
  unsetenv("WATCHDOG_PID");
  assert_int_equal(sdnotify_watchdog_usec(), 0);
  setenv("WATCHDOG_USEC", "30000000", 1);
  assert_int_equal(sdnotify_watchdog_usec(), 30000000);
  char pid[32];
  snprintf(pid, sizeof(pid), "%d", (int)getpid());
  setenv("WATCHDOG_PID", pid, 1);
  assert_int_equal(sdnotify_watchdog_usec(), 30000000);
  snprintf(pid, sizeof(pid), "%d", (int)getpid() + 1);
  setenv("WATCHDOG_PID", pid, 1); /* meant for another process */
  assert_int_equal(sdnotify_watchdog_usec(), 0);
  unsetenv("WATCHDOG_PID");
  setenv("WATCHDOG_USEC", "junk", 1);
  assert_int_equal(sdnotify_watchdog_usec(), 0);
  unsetenv("WATCHDOG_USEC");
}

/* Last: taking the environment is for the life of the process. */
static void test_take_env(void **state) {
  (void)state;
  char path[] = "/tmp/sdnotify-test-XXXXXX";
  assert_non_null(mkdtemp(path));
  char sock[128];
  snprintf(sock, sizeof(sock), "%s/notify", path);
  int fd = bind_dgram(sock);
  setenv("NOTIFY_SOCKET", sock, 1);
  setenv("WATCHDOG_USEC", "2000000", 1);
  char pid[32];
  snprintf(pid, sizeof(pid), "%d", (int)getpid());
  setenv("WATCHDOG_PID", pid, 1);
  sdnotify_take_env();
  /* gone from what children would inherit */
  assert_null(getenv("NOTIFY_SOCKET"));
  assert_null(getenv("WATCHDOG_USEC"));
  assert_null(getenv("WATCHDOG_PID"));
  /* still used by the daemon itself */
  assert_int_equal(sdnotify_watchdog_usec(), 2000000);
  assert_int_equal(sdnotify("READY=1"), 1);
  recv_is(fd, "READY=1");
  close(fd);
  unlink(sock);
  rmdir(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_path_socket),
      cmocka_unit_test(test_abstract_socket),
      cmocka_unit_test(test_unset_does_nothing),
      cmocka_unit_test(test_watchdog_usec),
      cmocka_unit_test(test_take_env),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
