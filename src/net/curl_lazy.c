/* See curl_lazy.h. */
#include "net/curl_lazy.h"

#include <errno.h>
#include <fcntl.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "dynlib.h"

CURL_LAZY_FUNCS(DYNLIB_PTR)
static const char *const curl_names[] = {CURL_LAZY_FUNCS(DYNLIB_NAME)};
static void **const curl_slots[] = {CURL_LAZY_FUNCS(DYNLIB_SLOT)};
static dynlib_t curl_lib = DYNLIB_INIT("libcurl.so.4", NULL, curl_names, curl_slots);

int curl_lazy_load(char *err, size_t errlen) { return dynlib_load(&curl_lib, err, errlen); }

static int sock_cloexec(void *ud, curl_socket_t fd, curlsocktype purpose) {
  (void)ud;
  (void)purpose;
  int fl = fcntl(fd, F_GETFD);
  return fl >= 0 && fcntl(fd, F_SETFD, fl | FD_CLOEXEC) == 0 ? CURL_SOCKOPT_OK
                                                              : CURL_SOCKOPT_ERROR;
}

CURL *curl_lazy_easy_init(void) {
  CURL *h = lazy_curl_easy_init();
  if (h) lazy_curl_easy_setopt(h, CURLOPT_SOCKOPTFUNCTION, sock_cloexec);
  return h;
}

#define CRYPTO_FUNCS(X) X(HMAC) X(EVP_sha256) X(PKCS5_PBKDF2_HMAC) X(EVP_Digest)
#define CRYPTO_PTR(fn) static __typeof__(fn) *lazy_##fn;
CRYPTO_FUNCS(CRYPTO_PTR)
static const char *const crypto_names[] = {CRYPTO_FUNCS(DYNLIB_NAME)};
static void **const crypto_slots[] = {CRYPTO_FUNCS(DYNLIB_SLOT)};
static dynlib_t crypto_lib = DYNLIB_INIT("libcrypto.so.3", NULL, crypto_names, crypto_slots);

int curl_lazy_pbkdf2_sha256(const char *pass, size_t passlen, const unsigned char *salt,
                            size_t saltlen, int iter, unsigned char *out, size_t outlen) {
  if (dynlib_load(&crypto_lib, NULL, 0)) return -ENOENT;
  if (!lazy_PKCS5_PBKDF2_HMAC(pass, (int)passlen, salt, (int)saltlen, iter, lazy_EVP_sha256(),
                              (int)outlen, out))
    return -EINVAL;
  return 0;
}

int curl_lazy_hmac_sha256(const void *key, size_t keylen, const void *data, size_t len,
                          unsigned char md[32]) {
  if (dynlib_load(&crypto_lib, NULL, 0)) return -ENOENT;
  unsigned int n = 0;
  if (!lazy_HMAC(lazy_EVP_sha256(), key, (int)keylen, data, len, md, &n) || n != 32)
    return -EINVAL;
  return 0;
}

int curl_lazy_sha256(const void *data, size_t len, unsigned char md[32]) {
  if (dynlib_load(&crypto_lib, NULL, 0)) return -ENOENT;
  unsigned int n = 0;
  if (!lazy_EVP_Digest(data, len, md, &n, lazy_EVP_sha256(), NULL) || n != 32) return -EINVAL;
  return 0;
}
