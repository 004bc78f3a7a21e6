/* An in-process daemon for the harnesses that need the API: the real
 * config, SQLite store (in fuzz_tmpdir()), spider lister, event streams,
 * authentication and every route, listening on a Unix socket in the
 * scratch directory. No launcher, scheduler, cluster or webhooks: app->flow
 * has no hooks, so queued jobs stay pending and nothing is spawned (the
 * spider lister's interpreter does not exist). Created once per process. */
#ifndef SPIDERD_FUZZ_DAEMON_H
#define SPIDERD_FUZZ_DAEMON_H

#include <stddef.h>

#include "app.h"

/* basic = 1: [scrapyd] username and password are "fuzz" / "fuzz". */
app_t *fuzz_daemon(int basic);

/* Runs the loop until done(ud) or ms milliseconds passed. Returns 1 when
 * done. */
int fuzz_daemon_run(app_t *app, int (*done)(void *ud), void *ud, int ms);

/* Sends one raw HTTP request to the daemon's socket and reads the answer
 * until the daemon closes the connection (the request should say
 * Connection: close) or ms milliseconds passed. Returns the bytes read. */
size_t fuzz_daemon_request(app_t *app, const char *req, size_t len, int ms);

#endif
