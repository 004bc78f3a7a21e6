/* The service manager's notification protocol (sd_notify(3)), spoken
 * directly: one datagram to the Unix socket that NOTIFY_SOCKET names (an
 * abstract one when the name starts with '@'). Without NOTIFY_SOCKET every
 * call does nothing, so the daemon runs the same outside systemd. */
#ifndef SPIDERD_SDNOTIFY_H
#define SPIDERD_SDNOTIFY_H

#include <stdint.h>

/* Takes NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID out of the
 * environment, keeping their values for the calls below, so the processes
 * the daemon starts (crawls) neither inherit nor answer for them. */
void sdnotify_take_env(void);

/* Sends STATE ("READY=1\nSTATUS=...") to NOTIFY_SOCKET (as taken, if so). 1 when sent, 0 when
 * NOTIFY_SOCKET is unset or empty, a negative errno when it could not be. */
int sdnotify(const char *state);

/* The same to the socket named by ADDR (as NOTIFY_SOCKET would name it). */
int sdnotify_to(const char *addr, const char *state);

/* WATCHDOG_USEC in microseconds when the watchdog is on for this process
 * (WATCHDOG_PID unset or ours), else 0. */
uint64_t sdnotify_watchdog_usec(void);

#endif
