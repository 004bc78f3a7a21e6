/* The S3 client's pure half (net/s3.h): Signature Version 4 against the
 * examples AWS publishes for S3 (an S3 server for tests accepts any
 * signature, so these values are what proves ours), URI encoding, the XML
 * answers, the credentials file and the object_store URL. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "net/s3.h"

#define KEY_ID "AKIAIOSFODNN7EXAMPLE"
#define SECRET "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define DATE "20130524T000000Z"

static void expect_sig(const char *method, const char *path, const char *query,
                       const char *const *h, size_t n, const char *hash, const char *want) {
  char out[1024];
  assert_int_equal(s3_sign(KEY_ID, SECRET, "us-east-1", method, path, query, h, n, hash, DATE,
                           out, sizeof(out)),
                   0);
  const char *sig = strstr(out, "Signature=");
  assert_non_null(sig);
  assert_string_equal(sig + 10, want);
  assert_non_null(strstr(out, "Credential=" KEY_ID "/20130524/us-east-1/s3/aws4_request,"));
}

/* AWS's "Example: GET Object" (a Range header signed too). */
static void test_sign_get_object(void **state) {
  (void)state;
  const char *h[] = {"host:examplebucket.s3.amazonaws.com", "range:bytes=0-9",
                     "x-amz-content-sha256:" EMPTY, "x-amz-date:" DATE};
  expect_sig("GET", "/test.txt", "", h, 4, EMPTY,
             "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
  char out[1024];
  s3_sign(KEY_ID, SECRET, "us-east-1", "GET", "/test.txt", "", h, 4, EMPTY, DATE, out,
          sizeof(out));
  assert_non_null(strstr(out, "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"));
}

/* AWS's "Example: PUT Object": a key that needs encoding, a body hash. */
static void test_sign_put_object(void **state) {
  (void)state;
  const char *body = "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072";
  char hc[128];
  snprintf(hc, sizeof(hc), "x-amz-content-sha256:%s", body);
  const char *h[] = {"date:Fri, 24 May 2013 00:00:00 GMT", "host:examplebucket.s3.amazonaws.com",
                     hc, "x-amz-date:" DATE, "x-amz-storage-class:REDUCED_REDUNDANCY"};
  char *path = s3_uri_encode("/test$file.text", 1);
  assert_string_equal(path, "/test%24file.text");
  expect_sig("PUT", path, "", h, 5, body,
             "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
  free(path);
}

/* AWS's "Example: GET Bucket (List Objects)": a canonical query. */
static void test_sign_list(void **state) {
  (void)state;
  const char *h[] = {"host:examplebucket.s3.amazonaws.com", "x-amz-content-sha256:" EMPTY,
                     "x-amz-date:" DATE};
  expect_sig("GET", "/", "max-keys=2&prefix=J", h, 3, EMPTY,
             "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
}

static void test_uri_encode(void **state) {
  (void)state;
  char *a = s3_uri_encode("logs/p q/s+t/j~1.log", 1), *b = s3_uri_encode("a/b=c&d", 0);
  assert_string_equal(a, "logs/p%20q/s%2Bt/j~1.log");
  assert_string_equal(b, "a%2Fb%3Dc%26d");
  free(a);
  free(b);
}

static void test_xml(void **state) {
  (void)state;
  const char *err = "<?xml version=\"1.0\"?><Error><Code>NoSuchBucket</Code>"
                    "<Message>The &lt;bucket&gt; &amp; &#34;it&#x27;s&#34; gone</Message></Error>";
  char *code = s3_xml_tag(err, "Code", NULL), *msg = s3_xml_tag(err, "Message", NULL);
  assert_string_equal(code, "NoSuchBucket");
  assert_string_equal(msg, "The <bucket> & \"it's\" gone");
  assert_null(s3_xml_tag(err, "UploadId", NULL));
  free(code);
  free(msg);
  const char *list =
      "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Name>b</Name>"
      "<IsTruncated>true</IsTruncated><NextContinuationToken>t/1=</NextContinuationToken>"
      "<Contents><Key>pre/logs/p/s/j.log.part-000001</Key><Size>10</Size><ETag>&quot;x&quot;"
      "</ETag></Contents><Contents><Key>pre/logs/p/s/j.log.part-000002</Key>"
      "<LastModified>2026-01-01T00:00:00.000Z</LastModified><Size>7</Size></Contents>"
      "</ListBucketResult>";
  s3_list_t l = {0};
  int truncated = 0;
  char *next = NULL;
  assert_int_equal(s3_parse_list(list, 4, &l, &truncated, &next), 0);
  assert_int_equal(l.n, 2);
  assert_string_equal(l.v[0].key, "logs/p/s/j.log.part-000001");
  assert_int_equal(l.v[0].size, 10);
  assert_string_equal(l.v[1].key, "logs/p/s/j.log.part-000002");
  assert_string_equal(l.v[1].mtime, "2026-01-01T00:00:00.000Z");
  assert_string_equal(l.v[0].mtime, "");
  assert_int_equal(l.v[1].size, 7);
  assert_true(truncated);
  assert_string_equal(next, "t/1=");
  free(next);
  s3_list_release(&l);
  assert_int_equal(s3_parse_list(err, 0, &l, &truncated, &next), -EINVAL);
  const char *empty = "<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>";
  assert_int_equal(s3_parse_list(empty, 0, &l, &truncated, &next), 0);
  assert_int_equal(l.n, 0);
  assert_false(truncated);
  assert_null(next);
}

static void test_init(void **state) {
  (void)state;
  char path[] = "/tmp/spiderd-s3-credsXXXXXX", err[512] = "";
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  const char *text = "[other]\naws_access_key_id = NO\n\n[default]\naws_access_key_id = AK\n"
                     "aws_secret_access_key=SK/x\n# a comment\n";
  assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
  close(fd);
  unsetenv("AWS_ACCESS_KEY_ID");
  unsetenv("AWS_SECRET_ACCESS_KEY");
  unsetenv("AWS_PROFILE");
  s3_t s;
  assert_int_equal(s3_init(&s, "s3://bkt/a/b/", "http://127.0.0.1:9000", "", path, err,
                           sizeof(err)),
                   0);
  assert_string_equal(s.bucket, "bkt");
  assert_string_equal(s.prefix, "a/b/");
  assert_string_equal(s.host, "127.0.0.1:9000");
  assert_string_equal(s.region, "us-east-1");
  assert_string_equal(s.key_id, "AK");
  assert_string_equal(s.secret, "SK/x");
  assert_string_equal(s.token, "");
  assert_false(s.virtual_host);
  s3_release(&s);
  assert_int_equal(s3_init(&s, "s3://bkt", "", "eu-west-3", path, err, sizeof(err)), 0);
  assert_string_equal(s.prefix, "");
  assert_string_equal(s.endpoint, "https://bkt.s3.eu-west-3.amazonaws.com");
  s3_release(&s);
  /* A URL with credentials in it, no credentials, a bad endpoint. */
  assert_int_equal(s3_init(&s, "s3://AK:SK@bkt/x", "", "", path, err, sizeof(err)), -EINVAL);
  assert_non_null(strstr(err, "no credentials"));
  assert_null(strstr(err, "SK"));
  assert_int_equal(s3_init(&s, "s3://bkt/x", "", "", "", err, sizeof(err)), -EINVAL);
  assert_non_null(strstr(err, "AWS_ACCESS_KEY_ID"));
  assert_int_equal(s3_init(&s, "http://bkt/x", "", "", path, err, sizeof(err)), -EINVAL);
  assert_non_null(strstr(err, "s3://BUCKET/PREFIX"));
  assert_int_equal(s3_init(&s, "s3://bkt/x", "ftp://h", "", path, err, sizeof(err)), -EINVAL);
  assert_non_null(strstr(err, "object_store_endpoint"));
  setenv("AWS_PROFILE", "missing", 1);
  assert_int_equal(s3_init(&s, "s3://bkt/x", "", "", path, err, sizeof(err)), -EINVAL);
  assert_non_null(strstr(err, "[missing]"));
  unsetenv("AWS_PROFILE");
  unlink(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sign_get_object), cmocka_unit_test(test_sign_put_object),
      cmocka_unit_test(test_sign_list),       cmocka_unit_test(test_uri_encode),
      cmocka_unit_test(test_xml),             cmocka_unit_test(test_init),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
