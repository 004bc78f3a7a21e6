#include "flow/jobtoken.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "net/curl_lazy.h"

static const char hex[] = "0123456789abcdef";

int jobtoken_secret_new(char out[JOBTOKEN_SECRET_HEX + 1]) {
  unsigned char b[JOBTOKEN_SECRET_HEX / 2];
  if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b)) return -EIO;
  for (size_t i = 0; i < sizeof(b); i++) {
    out[2 * i] = hex[b[i] >> 4];
    out[2 * i + 1] = hex[b[i] & 15];
  }
  out[JOBTOKEN_SECRET_HEX] = '\0';
  return 0;
}

int jobtoken_make(const char *secret, int64_t job_id, char out[JOBTOKEN_MAX]) {
  char id[24];
  int n = snprintf(id, sizeof(id), "%lld", (long long)job_id);
  unsigned char md[32];
  int rc = curl_lazy_hmac_sha256(secret, strlen(secret), id, (size_t)n, md);
  if (rc) return rc;
  memcpy(out, id, (size_t)n);
  out[n] = '.';
  for (int i = 0; i < 32; i++) {
    out[n + 1 + 2 * i] = hex[md[i] >> 4];
    out[n + 2 + 2 * i] = hex[md[i] & 15];
  }
  out[n + 65] = '\0';
  return 0;
}

int64_t jobtoken_check(const char *secret, const char *token) {
  if (!secret || !*secret || !token) return 0;
  size_t n = strspn(token, "0123456789");
  if (n == 0 || n > 18 || token[0] == '0' || token[n] != '.' || strlen(token + n + 1) != 64)
    return 0;
  int64_t id = strtoll(token, NULL, 10);
  char want[JOBTOKEN_MAX];
  if (jobtoken_make(secret, id, want)) return 0;
  unsigned char diff = 0; /* no early exit: timing must not leak the match */
  for (size_t i = 0; i < n + 65; i++) diff |= (unsigned char)(want[i] ^ token[i]);
  return diff ? 0 : id;
}
