/* libcurl (and, for webhook signatures, libcrypto's HMAC) opened on first
 * use instead of linked. Linked, libcurl and the libraries it pulls in
 * (OpenSSL, Kerberos, LDAP, SSH, ...) keep ~3.5 MB of every daemon resident,
 * also one that never sends a webhook.
 *
 * Include this instead of <curl/curl.h>: the curl_* names below then call
 * through pointers, so code reads as plain libcurl. Call curl_lazy_load()
 * (thread-safe, idempotent) before the first of them.
 */
#ifndef SPIDERD_HTTP_CURL_LAZY_H
#define SPIDERD_HTTP_CURL_LAZY_H

#include <stddef.h>

#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

#define CURL_LAZY_FUNCS(X)                                                                    \
  X(curl_global_init) X(curl_global_cleanup) X(curl_easy_init) X(curl_easy_cleanup)           \
  X(curl_easy_setopt) X(curl_easy_getinfo) X(curl_easy_perform) X(curl_easy_reset)            \
  X(curl_easy_strerror) X(curl_multi_init) X(curl_multi_cleanup) X(curl_multi_setopt)         \
  X(curl_multi_add_handle) X(curl_multi_remove_handle) X(curl_multi_assign)                   \
  X(curl_multi_info_read) X(curl_multi_socket_action) X(curl_slist_append)                    \
  X(curl_slist_free_all)

#define CURL_LAZY_DECL(fn) extern __typeof__(fn) *lazy_##fn;
CURL_LAZY_FUNCS(CURL_LAZY_DECL)
#undef CURL_LAZY_DECL

/* curl.h wraps these in argument-count macros; the pointers replace them. */
#undef curl_easy_setopt
#undef curl_easy_getinfo
#undef curl_multi_setopt
#define curl_global_init (*lazy_curl_global_init)
#define curl_global_cleanup (*lazy_curl_global_cleanup)
/* curl_easy_init whose handle opens its sockets close-on-exec: libcurl
 * does not ask for it, and every crawl the daemon starts meanwhile would
 * hold the connection. */
CURL *curl_lazy_easy_init(void);
#define curl_easy_init curl_lazy_easy_init
#define curl_easy_cleanup (*lazy_curl_easy_cleanup)
#define curl_easy_setopt (*lazy_curl_easy_setopt)
#define curl_easy_getinfo (*lazy_curl_easy_getinfo)
#define curl_easy_perform (*lazy_curl_easy_perform)
#define curl_easy_reset (*lazy_curl_easy_reset)
#define curl_easy_strerror (*lazy_curl_easy_strerror)
#define curl_multi_init (*lazy_curl_multi_init)
#define curl_multi_cleanup (*lazy_curl_multi_cleanup)
#define curl_multi_setopt (*lazy_curl_multi_setopt)
#define curl_multi_add_handle (*lazy_curl_multi_add_handle)
#define curl_multi_remove_handle (*lazy_curl_multi_remove_handle)
#define curl_multi_assign (*lazy_curl_multi_assign)
#define curl_multi_info_read (*lazy_curl_multi_info_read)
#define curl_multi_socket_action (*lazy_curl_multi_socket_action)
#define curl_slist_append (*lazy_curl_slist_append)
#define curl_slist_free_all (*lazy_curl_slist_free_all)

/* Opens libcurl.so.4 once. 0, or -ENOENT with a reason in err (may be NULL). */
int curl_lazy_load(char *err, size_t errlen);

/* HMAC-SHA256 of data with key into md (32 bytes), from libcrypto opened on
 * first use. 0, or -ENOENT when libcrypto cannot be loaded. Thread-safe. */
int curl_lazy_hmac_sha256(const void *key, size_t keylen, const void *data, size_t len,
                          unsigned char md[32]);
/* SHA-256 of data into md, from libcrypto opened on first use. 0, or
 * -ENOENT when libcrypto cannot be loaded. Thread-safe. */
int curl_lazy_sha256(const void *data, size_t len, unsigned char md[32]);
/* PBKDF2-HMAC-SHA256 of pass with salt, iter rounds, into out (outlen
 * bytes), from libcrypto opened on first use. 0, or -ENOENT when libcrypto
 * cannot be loaded. Thread-safe; slow on purpose (run it off the loop). */
int curl_lazy_pbkdf2_sha256(const char *pass, size_t passlen, const unsigned char *salt,
                            size_t saltlen, int iter, unsigned char *out, size_t outlen);

#endif
