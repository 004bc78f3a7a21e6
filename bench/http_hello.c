/* The HTTP layer's ceiling: one route answering a daemonstatus-sized JSON
 * body, nothing else on the loop.
 *
 *   gcc -O2 -D_GNU_SOURCE -Isrc bench/http_hello.c src/http/server.c src/http/stream.c \
 *       src/http/static.c src/error.c src/log.c $(pkg-config --cflags --libs libmicrohttpd libuv) \
 *       -o /tmp/http_hello
 *   /tmp/http_hello 6899 &
 *   wrk -t1 -c50 -d5s http://127.0.0.1:6899/daemonstatus.json
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"

static const char body[] = "{\"node_name\": \"bench\", \"status\": \"ok\", \"pending\": 0, "
                           "\"running\": 0, \"finished\": 0}\n";

static void hello(http_req_t *r, void *ud) {
  http_reply_header(r, "Access-Control-Allow-Origin", "*");
  http_reply(r, 200, "application/json", body, sizeof(body) - 1);
}

static void on_signal(uv_signal_t *h, int signum) {
  http_server_stop(h->data);
  uv_close((uv_handle_t *)h, NULL);
}

int main(int argc, char **argv) {
  http_options_t o = {.bind_address = "127.0.0.1",
                      .port = argc > 1 ? atoi(argv[1]) : 6899,
                      .realm = "Scrapyd",
                      .max_body = 1 << 20};
  uv_loop_t *loop = uv_default_loop();
  http_server_t *s;
  char err[256];
  if (http_server_start(loop, &o, &s, err, sizeof(err))) {
    fprintf(stderr, "%s\n", err);
    return 1;
  }
  http_route(s, "/daemonstatus.json", hello, NULL);
  uv_signal_t sig;
  uv_signal_init(loop, &sig);
  sig.data = s;
  uv_signal_start(&sig, on_signal, SIGINT);
  uv_run(loop, UV_RUN_DEFAULT);
  return 0;
}
