/* The pure half of net/s3.h: Signature Version 4, URI encoding, the few
 * XML answers S3 gives, and the AWS credentials file. No I/O but the
 * credentials file; libcrypto for the hashes. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/curl_lazy.h"
#include "net/s3.h"
#include "strbuf.h"

static void hex(const unsigned char *md, size_t n, char *out) {
  for (size_t i = 0; i < n; i++) sprintf(out + 2 * i, "%02x", md[i]);
}

char *s3_uri_encode(const char *s, int keep_slash) {
  size_t n = strlen(s);
  char *out = malloc(3 * n + 1), *o = out;
  if (!out) return NULL;
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' ||
        (keep_slash && *p == '/'))
      *o++ = (char)*p;
    else
      o += sprintf(o, "%%%02X", *p);
  }
  *o = '\0';
  return out;
}

static int hmac(const void *key, size_t klen, const char *data, unsigned char out[32]) {
  return curl_lazy_hmac_sha256(key, klen, data, strlen(data), out);
}

int s3_sign(const char *key_id, const char *secret, const char *region, const char *method,
            const char *path, const char *query, const char *const *headers, size_t n,
            const char *payload_hash, const char *amzdate, char *out, size_t outlen) {
  strbuf_t creq = {0}, names = {0}, sts = {0};
  int rc = -ENOMEM;
  unsigned char md[32], k[32];
  char crh[65], sig[65], day[9], *kdate = NULL;
  snprintf(day, sizeof(day), "%.8s", amzdate);
  strbuf_addf(&creq, "%s\n%s\n%s\n", method, path, query);
  for (size_t i = 0; i < n; i++) {
    const char *colon = strchr(headers[i], ':');
    if (!colon) goto out;
    strbuf_addf(&creq, "%s\n", headers[i]);
    strbuf_addf(&names, "%s%.*s", i ? ";" : "", (int)(colon - headers[i]), headers[i]);
  }
  strbuf_addf(&creq, "\n%s\n%s", names.p ? names.p : "", payload_hash);
  if (!creq.p || !names.p || creq.failed || names.failed) goto out;
  rc = -ENOENT;
  if (curl_lazy_sha256(creq.p, creq.len, md)) goto out;
  hex(md, 32, crh);
  strbuf_addf(&sts, "AWS4-HMAC-SHA256\n%s\n%s/%s/s3/aws4_request\n%s", amzdate, day, region, crh);
  if (!sts.p || sts.failed || asprintf(&kdate, "AWS4%s", secret) < 0) {
    kdate = NULL;
    rc = -ENOMEM;
    goto out;
  }
  if (hmac(kdate, strlen(kdate), day, k) || hmac(k, 32, region, k) || hmac(k, 32, "s3", k) ||
      hmac(k, 32, "aws4_request", k) || hmac(k, 32, sts.p, md))
    goto out;
  hex(md, 32, sig);
  snprintf(out, outlen,
           "AWS4-HMAC-SHA256 Credential=%s/%s/%s/s3/aws4_request,SignedHeaders=%s,Signature=%s",
           key_id, day, region, names.p, sig);
  rc = 0;
out:
  if (kdate) explicit_bzero(kdate, strlen(kdate));
  free(kdate);
  explicit_bzero(k, sizeof(k));
  strbuf_release(&creq);
  strbuf_release(&names);
  strbuf_release(&sts);
  return rc;
}

/* ---- XML ---- */

static char *xml_decode(const char *s, size_t n) {
  char *out = malloc(n + 1), *o = out;
  if (!out) return NULL;
  static const struct {
    const char *ent;
    char c;
  } ents[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
  for (size_t i = 0; i < n;) {
    size_t j, el = 0;
    if (s[i] != '&') {
      *o++ = s[i++];
      continue;
    }
    for (j = 0; j < sizeof(ents) / sizeof(ents[0]); j++) {
      el = strlen(ents[j].ent);
      if (i + el <= n && !strncmp(s + i, ents[j].ent, el)) break;
    }
    if (j < sizeof(ents) / sizeof(ents[0])) {
      *o++ = ents[j].c;
      i += el;
    } else if (i + 2 < n && s[i + 1] == '#') {
      char *end;
      long v = s[i + 2] == 'x' ? strtol(s + i + 3, &end, 16) : strtol(s + i + 2, &end, 10);
      if (*end != ';' || v <= 0 || v > 0x7f) { /* keys of ours are ASCII */
        *o++ = s[i++];
        continue;
      }
      *o++ = (char)v;
      i = (size_t)(end - s) + 1;
    } else {
      *o++ = s[i++];
    }
  }
  *o = '\0';
  return out;
}

char *s3_xml_tag(const char *xml, const char *tag, const char **pos) {
  char open[80], close[80];
  snprintf(open, sizeof(open), "<%s>", tag);
  snprintf(close, sizeof(close), "</%s>", tag);
  const char *a = strstr(pos && *pos ? *pos : xml, open);
  if (!a) return NULL;
  a += strlen(open);
  const char *b = strstr(a, close);
  if (!b) return NULL;
  if (pos) *pos = b + strlen(close);
  return xml_decode(a, (size_t)(b - a));
}

int s3_parse_list(const char *xml, size_t strip, s3_list_t *out, int *truncated, char **next) {
  *truncated = 0;
  *next = NULL;
  if (!strstr(xml, "<ListBucketResult")) return -EINVAL;
  const char *p = xml;
  for (;;) {
    const char *c = strstr(p, "<Contents>");
    if (!c) break;
    const char *end = strstr(c, "</Contents>");
    if (!end) return -EINVAL;
    size_t len = (size_t)(end - c);
    char *one = strndup(c, len);
    if (!one) return -ENOMEM;
    char *key = s3_xml_tag(one, "Key", NULL), *size = s3_xml_tag(one, "Size", NULL);
    char *mt = s3_xml_tag(one, "LastModified", NULL);
    free(one);
    s3_obj_t *v = key ? realloc(out->v, (out->n + 1) * sizeof(*v)) : NULL;
    if (!v || strlen(key) < strip) {
      free(mt);
      free(key);
      free(size);
      return v ? -EINVAL : key ? -ENOMEM : -EINVAL;
    }
    out->v = v;
    memmove(key, key + strip, strlen(key) - strip + 1);
    v[out->n].key = key;
    v[out->n].size = size ? strtoll(size, NULL, 10) : 0;
    snprintf(v[out->n].mtime, sizeof(v[out->n].mtime), "%s", mt ? mt : "");
    free(mt);
    out->n++;
    free(size);
    p = end + 11;
  }
  char *t = s3_xml_tag(xml, "IsTruncated", NULL);
  *truncated = t && !strcmp(t, "true");
  free(t);
  if (*truncated) *next = s3_xml_tag(xml, "NextContinuationToken", NULL);
  return 0;
}

/* ---- credentials file ---- */

static char *trim(char *s) {
  while (isspace((unsigned char)*s)) s++;
  size_t n = strlen(s);
  while (n && isspace((unsigned char)s[n - 1])) s[--n] = '\0';
  return s;
}

int s3_read_credentials(const char *path, const char *profile, char **key_id, char **secret,
                        char **token, char *err, size_t errlen) {
  FILE *f = fopen(path, "re");
  if (!f) {
    snprintf(err, errlen, "object_store_credentials '%.300s': %s", path, strerror(errno));
    return -EINVAL;
  }
  char line[2048];
  int in = 0, rc = 0;
  while (!rc && fgets(line, sizeof(line), f)) {
    char *l = trim(line);
    if (*l == '#' || *l == ';' || !*l) continue;
    if (*l == '[') {
      char *e = strchr(l, ']');
      if (e) *e = '\0';
      char *name = trim(l + 1);
      if (!strncmp(name, "profile ", 8)) name = trim(name + 8);
      in = !strcmp(name, profile);
      continue;
    }
    char *eq = strchr(l, '=');
    if (!in || !eq) continue;
    *eq = '\0';
    char *k = trim(l), *v = trim(eq + 1), **dst = NULL;
    if (!strcmp(k, "aws_access_key_id")) dst = key_id;
    else if (!strcmp(k, "aws_secret_access_key")) dst = secret;
    else if (!strcmp(k, "aws_session_token")) dst = token;
    if (dst) {
      free(*dst);
      if (!(*dst = strdup(v))) rc = -ENOMEM;
    }
  }
  explicit_bzero(line, sizeof(line));
  fclose(f);
  if (!rc && (!*key_id || !*secret)) {
    snprintf(err, errlen,
             "object_store_credentials '%.300s' has no aws_access_key_id and "
             "aws_secret_access_key in profile [%.100s]",
             path, profile);
    rc = -EINVAL;
  }
  return rc;
}
