/* HTTP requests through the whole server (http/: request line,
 * query string, headers, url-encoded and multipart bodies, credentials,
 * routing) into every face (Scrapyd's endpoints, REST and JSON-RPC under
 * /api/v1, the pages, /logs/ and /items/, the console's files, metrics)
 * and on to the real SQLite store, on an in-process daemon (daemon.h)
 * reached over its Unix socket.
 *
 * Input: up to 4 requests separated by a line "--next--". Each is
 *   METHOD TARGET
 *   Header: value     (any number)
 *   <empty line>
 *   body
 * The harness adds Host, Connection: close and Content-Length (the
 * input's own are dropped) and, unless the input sends an Authorization
 * header, the configured user's basic credentials ("fuzz:fuzz"). The store
 * keeps what earlier inputs put in it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "daemon.h"
#include "fuzz.h"

#define SEP "\n--next--\n"

static void one(app_t *app, const char *in, size_t len) {
  const char *end = in + len;
  const char *nl = memchr(in, '\n', len);
  const char *line_end = nl ? nl : end;
  const char *sp = memchr(in, ' ', (size_t)(line_end - in));
  if (!sp || sp == in) return;
  char *req = NULL;
  size_t cap = 0, n = 0;
  FILE *f = open_memstream(&req, &cap);
  if (!f) abort();
  fprintf(f, "%.*s %.*s HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n", (int)(sp - in),
          in, (int)(line_end - sp - 1), sp + 1);
  int auth = 0;
  const char *p = nl ? nl + 1 : end;
  while (p < end) {
    const char *e = memchr(p, '\n', (size_t)(end - p));
    const char *le = e ? e : end;
    if (le == p) { /* the empty line: the body follows */
      p = e ? e + 1 : end;
      break;
    }
    size_t hl = (size_t)(le - p);
    if (hl && p[hl - 1] == '\r') hl--;
#define IS(h) (hl >= sizeof(h) - 1 && !strncasecmp(p, h, sizeof(h) - 1))
    if (IS("authorization:")) auth = 1;
    if (!IS("host:") && !IS("connection:") && !IS("content-length:") &&
        !IS("transfer-encoding:"))
      fprintf(f, "%.*s\r\n", (int)hl, p);
#undef IS
    p = e ? e + 1 : end;
  }
  if (!auth) fputs("Authorization: Basic ZnV6ejpmdXp6\r\n", f);
  fprintf(f, "Content-Length: %zu\r\n\r\n", (size_t)(end - p));
  fwrite(p, 1, (size_t)(end - p), f);
  fclose(f);
  n = cap;
  fuzz_daemon_request(app, req, n, 200);
  free(req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size > 256 * 1024) return 0;
  app_t *app = fuzz_daemon(1);
  const char *p = (const char *)data, *end = p + size;
  for (int i = 0; i < 4 && p < end; i++) {
    const char *s = memmem(p, (size_t)(end - p), SEP, sizeof(SEP) - 1);
    const char *e = s ? s : end;
    one(app, p, (size_t)(e - p));
    p = s ? s + sizeof(SEP) - 1 : end;
  }
  return 0;
}
