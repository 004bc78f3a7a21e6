/* See curl_lazy.h. */
#include "net/curl_lazy.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#define CURL_LAZY_DEF(fn) __typeof__(fn) *lazy_##fn;
CURL_LAZY_FUNCS(CURL_LAZY_DEF)

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static char curl_error[256];
static int curl_ok;

static void curl_open(void) {
  void *h = dlopen("libcurl.so.4", RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(curl_error, sizeof(curl_error), "cannot load libcurl: %s", dlerror());
    return;
  }
  int ok = 1;
  /* #fn is the plain name: # does not expand curl_lazy.h's macros. */
#define CURL_LAZY_SYM(fn) ok &= (*(void **)&lazy_##fn = dlsym(h, #fn)) != NULL;
  CURL_LAZY_FUNCS(CURL_LAZY_SYM)
  if (!ok) snprintf(curl_error, sizeof(curl_error), "libcurl lacks a function spiderd uses");
  curl_ok = ok;
}

int curl_lazy_load(char *err, size_t errlen) {
  pthread_once(&curl_once, curl_open);
  if (!curl_ok && err && errlen) snprintf(err, errlen, "%s", curl_error);
  return curl_ok ? 0 : -ENOENT;
}

static pthread_once_t crypto_once = PTHREAD_ONCE_INIT;
static __typeof__(HMAC) *lazy_hmac;
static __typeof__(EVP_sha256) *lazy_sha256;
static __typeof__(PKCS5_PBKDF2_HMAC) *lazy_pbkdf2;

static void crypto_open(void) {
  void *h = dlopen("libcrypto.so.3", RTLD_NOW | RTLD_LOCAL);
  if (!h) return;
  *(void **)&lazy_hmac = dlsym(h, "HMAC");
  *(void **)&lazy_sha256 = dlsym(h, "EVP_sha256");
  *(void **)&lazy_pbkdf2 = dlsym(h, "PKCS5_PBKDF2_HMAC");
}

int curl_lazy_pbkdf2_sha256(const char *pass, size_t passlen, const unsigned char *salt,
                            size_t saltlen, int iter, unsigned char *out, size_t outlen) {
  pthread_once(&crypto_once, crypto_open);
  if (!lazy_pbkdf2 || !lazy_sha256) return -ENOENT;
  if (!lazy_pbkdf2(pass, (int)passlen, salt, (int)saltlen, iter, lazy_sha256(), (int)outlen,
                   out))
    return -EINVAL;
  return 0;
}

int curl_lazy_hmac_sha256(const void *key, size_t keylen, const void *data, size_t len,
                          unsigned char md[32]) {
  pthread_once(&crypto_once, crypto_open);
  if (!lazy_hmac || !lazy_sha256) return -ENOENT;
  unsigned int n = 0;
  if (!lazy_hmac(lazy_sha256(), key, (int)keylen, data, len, md, &n) || n != 32) return -EINVAL;
  return 0;
}
