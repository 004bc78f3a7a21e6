/* The client sub-commands' pure pieces: option parsing, the requests
 * built from options, URLs, times and tables. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/cli_int.h"
#include "cli/client.h"
#include "cli/format.h"

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* Parses a command line given as one string split at spaces. */
static int parse(const char *cmd, const char *line, cli_args_t *a, char *err, size_t n) {
  static char buf[1024];
  static char *argv[64];
  int argc = 0;
  snprintf(buf, sizeof(buf), "%s", line);
  for (char *t = strtok(buf, " "); t && argc < 64; t = strtok(NULL, " ")) argv[argc++] = t;
  const cli_cmd_t *c = cli_find(cmd);
  assert_non_null(c);
  return cli_args_parse(c->opts, argc, argv, a, err, n);
}

static char *dump(json_t *j) {
  return json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
}

/* ---- args ---- */

static void test_args_forms(void **state) {
  (void)state;
  cli_args_t a;
  char err[256];
  assert_int_equal(parse("logs", "-f 12 --tail=500 --url http://x:1/ -- -odd", &a, err, sizeof(err)), 0);
  assert_int_equal(a.npos, 2);
  assert_string_equal(a.pos[0], "12");
  assert_string_equal(a.pos[1], "-odd");
  assert_string_equal(cli_args_get(&a, O_FOLLOW), "");
  assert_string_equal(cli_args_get(&a, O_TAIL), "500");
  assert_string_equal(cli_args_get(&a, O_URL), "http://x:1/");
  assert_null(cli_args_get(&a, O_JSON));
  cli_args_release(&a);

  assert_int_equal(parse("run", "p s -ak=v -a k2=v2 --arg=k3=v=3", &a, err, sizeof(err)), 0);
  assert_int_equal(a.nopts, 3);
  assert_string_equal(a.opts[0].value, "k=v");
  assert_string_equal(a.opts[2].value, "k3=v=3");
  cli_args_release(&a);
}

static void test_args_errors(void **state) {
  (void)state;
  const struct {
    const char *cmd, *line, *msg;
  } cases[] = {
      {"jobs", "--bogus", "unknown option '--bogus'"},
      {"jobs", "-x", "unknown option '-x'"},
      {"jobs", "--limit", "option '--limit' needs a value"},
      {"jobs", "--json=1", "option '--json' takes no value"},
      {"logs", "-fx", "option '-f' takes no value"},
      {"schedule add", "n --project", "option '--project' needs a value"},
  };
  for (size_t i = 0; i < N_ELEMS(cases); i++) {
    cli_args_t a;
    char err[256] = "";
    assert_int_equal(parse(cases[i].cmd, cases[i].line, &a, err, sizeof(err)), -EINVAL);
    assert_string_equal(err, cases[i].msg);
    assert_null(a.opts);
  }
}

static void test_numbers(void **state) {
  (void)state;
  double d;
  long long n;
  assert_int_equal(cli_parse_double("2.5", &d), 0);
  assert_true(d == 2.5);
  assert_int_equal(cli_parse_double("1e3", &d), 0);
  assert_int_equal(cli_parse_double("", &d), -EINVAL);
  assert_int_equal(cli_parse_double(" 1", &d), -EINVAL);
  assert_int_equal(cli_parse_double("1x", &d), -EINVAL);
  assert_int_equal(cli_parse_double("nan", &d), -EINVAL);
  assert_int_equal(cli_parse_double("inf", &d), -EINVAL);
  assert_int_equal(cli_parse_long("100", 0, 100, &n), 0);
  assert_int_equal(n, 100);
  assert_int_equal(cli_parse_long("101", 0, 100, &n), -EINVAL);
  assert_int_equal(cli_parse_long("-1", 0, 100, &n), -EINVAL);
  assert_int_equal(cli_parse_long("1.5", 0, 100, &n), -EINVAL);
  assert_int_equal(cli_parse_long("99999999999999999999", 0, INT64_MAX, &n), -EINVAL);
}

/* ---- requests from options ---- */

static void test_schedule_body_add(void **state) {
  (void)state;
  cli_args_t a;
  char err[256];
  json_t *b;
  assert_int_equal(parse("schedule add",
                         "nightly --project p --spider s --cron @daily --tz Europe/Berlin "
                         "--arg a=1 --arg b=x=y --set LOG_LEVEL=INFO --overlap skip --missed once "
                         "--priority 2.5 --timeout 60 --retries 3 --jitter 5 --start "
                         "2030-01-01T00:00:00 --end 2031-01-01T00:00:00Z --paused --catchup-max 4 "
                         "--retry-backoff 10 --webhook http://h/1 --webhook http://h/2 --version v1",
                         &a, err, sizeof(err)),
                   0);
  assert_int_equal(cli_schedule_body(&a, 0, &b, err, sizeof(err)), 0);
  char *s = dump(b);
  assert_string_equal(s,
                      "{\"args\":{\"a\":\"1\",\"b\":\"x=y\"},\"catchup_max\":4,\"cron\":\"@daily\","
                      "\"end\":\"2031-01-01T00:00:00Z\",\"jitter\":5.0,\"missed\":\"once\","
                      "\"name\":\"nightly\",\"overlap\":\"skip\",\"paused\":true,\"priority\":2.5,"
                      "\"project\":\"p\",\"retries\":3,\"retry_backoff\":10.0,"
                      "\"settings\":{\"LOG_LEVEL\":\"INFO\"},\"spider\":\"s\","
                      "\"start\":\"2030-01-01T00:00:00\",\"timeout\":60.0,\"tz\":\"Europe/Berlin\","
                      "\"version\":\"v1\",\"webhooks\":[\"http://h/1\",\"http://h/2\"]}");
  free(s);
  json_decref(b);
  cli_args_release(&a);

  assert_int_equal(parse("schedule add", "n -p p -s s --every 90", &a, err, sizeof(err)), 0);
  assert_int_equal(cli_schedule_body(&a, 0, &b, err, sizeof(err)), 0);
  s = dump(b);
  assert_string_equal(s, "{\"interval\":90.0,\"name\":\"n\",\"project\":\"p\",\"spider\":\"s\"}");
  free(s);
  json_decref(b);
  cli_args_release(&a);
}

static void test_schedule_body_edit_only_given(void **state) {
  (void)state;
  cli_args_t a;
  char err[256];
  json_t *b;
  assert_int_equal(parse("schedule edit", "7 --at 2030-05-01T10:00:00 --name renamed", &a, err,
                         sizeof(err)),
                   0);
  assert_int_equal(cli_schedule_body(&a, 1, &b, err, sizeof(err)), 0);
  char *s = dump(b);
  assert_string_equal(s, "{\"at\":\"2030-05-01T10:00:00\",\"name\":\"renamed\"}");
  free(s);
  json_decref(b);
  cli_args_release(&a);
}

static void test_schedule_body_errors(void **state) {
  (void)state;
  const struct {
    const char *cmd, *line, *msg;
    int edit;
  } cases[] = {
      {"schedule add", "n -p p -s s", "when to run: --cron EXPR, --every SECONDS or --at TIME", 0},
      {"schedule add", "n -p p --cron @daily", "--project and --spider are required", 0},
      {"schedule add", "n -p p -s s --cron @daily --every 5", "give one of --cron, --every and --at", 0},
      {"schedule add", "n -p p -s s --every soon", "--every 'soon': expected a number", 0},
      {"schedule add", "n -p p -s s --every 5 --retries 101",
       "--retries '101': expected a whole number from 0 to 100", 0},
      {"schedule add", "n -p p -s s --every 5 --arg novalue", "--arg 'novalue': expected NAME=VALUE", 0},
      {"schedule add", "n -p p -s s --every 5 --set =v", "--set '=v': expected NAME=VALUE", 0},
      {"schedule edit", "n", "nothing to change", 1},
  };
  for (size_t i = 0; i < N_ELEMS(cases); i++) {
    cli_args_t a;
    char err[256] = "";
    json_t *b = (json_t *)1;
    assert_int_equal(parse(cases[i].cmd, cases[i].line, &a, err, sizeof(err)), 0);
    assert_int_equal(cli_schedule_body(&a, cases[i].edit, &b, err, sizeof(err)), -EINVAL);
    assert_null(b);
    assert_string_equal(err, cases[i].msg);
    cli_args_release(&a);
  }
}

static void test_job_body_and_query(void **state) {
  (void)state;
  cli_args_t a;
  char err[256];
  json_t *b;
  assert_int_equal(parse("run", "proj spi -a n=1 -s K=V --priority 3 --jobid j1", &a, err, sizeof(err)), 0);
  assert_int_equal(cli_job_body(&a, &b, err, sizeof(err)), 0);
  char *s = dump(b);
  assert_string_equal(s, "{\"args\":{\"n\":\"1\"},\"jobid\":\"j1\",\"priority\":3.0,"
                         "\"project\":\"proj\",\"settings\":{\"K\":\"V\"},\"spider\":\"spi\"}");
  free(s);
  json_decref(b);
  cli_args_release(&a);

  const char *q[17];
  char states[128];
  assert_int_equal(parse("jobs", "--state pending --state running,failed -p p --limit 5 --schedule 3",
                         &a, err, sizeof(err)),
                   0);
  assert_int_equal(cli_jobs_query(&a, q, states, sizeof(states), err, sizeof(err)), 0);
  const char *want[] = {"state", "pending,running,failed", "project", "p", "schedule", "3",
                        "limit", "5", NULL};
  for (size_t i = 0; i < N_ELEMS(want); i++) {
    if (!want[i]) assert_null(q[i]);
    else assert_string_equal(q[i], want[i]);
  }
  cli_args_release(&a);

  assert_int_equal(parse("jobs", "--limit 0", &a, err, sizeof(err)), 0);
  assert_int_equal(cli_jobs_query(&a, q, states, sizeof(states), err, sizeof(err)), -EINVAL);
  assert_string_equal(err, "--limit '0': expected a number from 1 to 1000");
  cli_args_release(&a);
}

/* ---- credentials and the auth commands ---- */

/* Writes text to a new temporary file; returns its path (free it). */
static char *temp_file(const char *text) {
  char *path = strdup("/tmp/test_cli_XXXXXX");
  int fd = mkstemp(path);
  assert_true(fd >= 0);
  FILE *f = fdopen(fd, "w");
  fputs(text, f);
  fclose(f);
  return path;
}

static void test_read_first_line(void **state) {
  (void)state;
  char err[256], *out = NULL;
  char *p = temp_file("sdt_abc_123  \t\r\nsecond line\n");
  assert_int_equal(cli_read_first_line(p, 1, &out, err, sizeof(err)), 0);
  assert_string_equal(out, "sdt_abc_123");
  free(out);
  /* A password keeps its blanks; only the line end goes. */
  assert_int_equal(cli_read_first_line(p, 0, &out, err, sizeof(err)), 0);
  assert_string_equal(out, "sdt_abc_123  \t");
  free(out);
  unlink(p);
  free(p);

  p = temp_file("no newline at all");
  assert_int_equal(cli_read_first_line(p, 1, &out, err, sizeof(err)), 0);
  assert_string_equal(out, "no newline at all");
  free(out);
  unlink(p);
  free(p);

  p = temp_file("   \nsecret on the second line\n");
  assert_int_equal(cli_read_first_line(p, 1, &out, err, sizeof(err)), -EINVAL);
  assert_null(out);
  assert_non_null(strstr(err, ": the first line is empty"));
  unlink(p);
  free(p);

  char *big = malloc(5000);
  memset(big, 'x', 4999);
  big[4999] = '\0';
  p = temp_file(big);
  free(big);
  assert_int_equal(cli_read_first_line(p, 1, &out, err, sizeof(err)), -EINVAL);
  assert_non_null(strstr(err, "longer than 4096 bytes"));
  unlink(p);
  free(p);

  assert_int_equal(cli_read_first_line("/nonexistent/token", 1, &out, err, sizeof(err)), -ENOENT);
  assert_string_equal(err, "/nonexistent/token: No such file or directory");
  assert_int_equal(cli_read_first_line("/tmp", 1, &out, err, sizeof(err)), -EISDIR);
  assert_null(out);
}

/* Runs cli_credentials on a `whoami` command line with the given
 * environment (NULL: unset). */
static int creds(const char *line, const char *env_token, const char *env_user,
                 const char *env_password, char **user, char **token, char *err, size_t n) {
  cli_args_t a;
  const char *names[] = {"SPIDERD_TOKEN", "SPIDERD_USER", "SPIDERD_PASSWORD"};
  const char *vals[] = {env_token, env_user, env_password};
  for (size_t i = 0; i < N_ELEMS(names); i++) {
    if (vals[i]) setenv(names[i], vals[i], 1);
    else unsetenv(names[i]);
  }
  assert_int_equal(parse("whoami", line, &a, err, n), 0);
  int rc = cli_credentials(&a, user, token, err, n);
  cli_args_release(&a);
  for (size_t i = 0; i < N_ELEMS(names); i++) unsetenv(names[i]);
  return rc;
}

static void test_credentials(void **state) {
  (void)state;
  char err[512], *u, *t;
  char *file = temp_file("sdt_fromfile_s3cret\n");
  char line[256];
  const struct {
    const char *line, *env_token, *env_user, *env_password, *user, *token;
  } ok[] = {
      {"", NULL, NULL, NULL, NULL, NULL},
      {"--token sdt_a_b", NULL, NULL, NULL, NULL, "sdt_a_b"},
      /* The option wins over the environment, whichever kind. */
      {"--token sdt_a_b", "sdt_env_x", "bob:pw", NULL, NULL, "sdt_a_b"},
      {"--user alice:pw", "sdt_env_x", NULL, NULL, "alice:pw", NULL},
      {"", "sdt_env_x", NULL, NULL, NULL, "sdt_env_x"},
      {"", "sdt_env_x", "bob:pw", NULL, NULL, "sdt_env_x"},
      {"", "", "bob", "pw", "bob:pw", NULL},
      {"", NULL, "bob:pw", NULL, "bob:pw", NULL},
      {"", NULL, "bob", NULL, "bob:", NULL},
      {"--token-file FILE", "sdt_env_x", NULL, NULL, NULL, "sdt_fromfile_s3cret"},
  };
  for (size_t i = 0; i < N_ELEMS(ok); i++) {
    const char *at = strstr(ok[i].line, "FILE");
    if (at)
      snprintf(line, sizeof(line), "%.*s%s", (int)(at - ok[i].line), ok[i].line, file);
    else
      snprintf(line, sizeof(line), "%s", ok[i].line);
    assert_int_equal(creds(line, ok[i].env_token, ok[i].env_user, ok[i].env_password, &u, &t,
                           err, sizeof(err)),
                     0);
    if (ok[i].user) assert_string_equal(u, ok[i].user);
    else assert_null(u);
    if (ok[i].token) assert_string_equal(t, ok[i].token);
    else assert_null(t);
    free(u);
    free(t);
  }

  const struct {
    const char *line, *env_token, *msg;
  } bad[] = {
      {"--user a:b --token sdt_a_b", NULL,
       "--user and --token exclude each other: give a password or a token"},
      {"--token sdt_a_b -u a:b", NULL,
       "--user and --token exclude each other: give a password or a token"},
      {"--user a:b --token-file /x", NULL,
       "--user and --token-file exclude each other: give a password or a token"},
      {"--token a --token-file /x", NULL, "--token and --token-file exclude each other"},
      {"--token=", NULL, "--token: the token is empty"},
      {"--token a\tb", NULL, "--token: a token holds no blanks or control characters"},
      {"", "sdt\r\nX-Evil:_1", "SPIDERD_TOKEN: a token holds no blanks or control characters"},
      {"--token-file /nonexistent/t", NULL,
       "--token-file /nonexistent/t: No such file or directory"},
  };
  for (size_t i = 0; i < N_ELEMS(bad); i++) {
    u = t = (char *)1;
    /* parse() splits at spaces only: a tab stays inside the value. */
    assert_int_equal(creds(bad[i].line, bad[i].env_token, NULL, NULL, &u, &t, err, sizeof(err)),
                     -EINVAL);
    assert_string_equal(err, bad[i].msg);
    assert_null(u);
    assert_null(t);
  }
  unlink(file);
  free(file);
}

static void test_duration_option(void **state) {
  (void)state;
  const struct {
    const char *s;
    long long secs;
  } ok[] = {{"3600", 3600}, {"45s", 45}, {"90m", 5400}, {"12h", 43200},
            {"30d", 2592000}, {"2w", 1209600}, {"1", 1}};
  for (size_t i = 0; i < N_ELEMS(ok); i++) {
    long long secs = 0;
    assert_int_equal(cli_parse_duration(ok[i].s, &secs), 0);
    assert_int_equal(secs, ok[i].secs);
  }
  const char *bad[] = {"", "0", "0d", "-5", "+5", " 5", "5 d", "5dd", "d", "1.5h", "5y", "5D",
                       "99999999999999999999", "9223372036854775807", "106751991167301d"};
  for (size_t i = 0; i < N_ELEMS(bad); i++) {
    long long secs = -1;
    assert_int_equal(cli_parse_duration(bad[i], &secs), -EINVAL);
    assert_int_equal(secs, -1);
  }
}

static void test_token_body(void **state) {
  (void)state;
  cli_args_t a;
  char err[256];
  json_t *b;
  assert_int_equal(parse("token create", "--role run -p news --project blog,shop --name ci "
                                          "--expires 30d",
                         &a, err, sizeof(err)),
                   0);
  assert_int_equal(cli_token_body(&a, &b, err, sizeof(err)), 0);
  char *s = dump(b);
  assert_string_equal(s, "{\"expires_in\":2592000,\"name\":\"ci\",\"projects\":[\"news\",\"blog\","
                         "\"shop\"],\"role\":\"run\"}");
  free(s);
  json_decref(b);
  cli_args_release(&a);

  /* Without --project the daemon decides (every project it lets us use). */
  assert_int_equal(parse("token create", "-r admin", &a, err, sizeof(err)), 0);
  assert_int_equal(cli_token_body(&a, &b, err, sizeof(err)), 0);
  s = dump(b);
  assert_string_equal(s, "{\"name\":\"cli\",\"role\":\"admin\"}");
  free(s);
  json_decref(b);
  cli_args_release(&a);

  const struct {
    const char *line, *msg;
  } bad[] = {
      {"", "--role is required: read, run, deploy or admin"},
      {"--role Admin", "--role 'Admin': expected read, run, deploy or admin"},
      {"--role none", "--role 'none': expected read, run, deploy or admin"},
      {"--role read --expires 1y",
       "--expires '1y': expected a duration: seconds, or a number and s, m, h, d or w "
       "(90m, 12h, 30d)"},
      {"--role read --project a,,b", "--project 'a,,b': expected project names, comma-separated"},
      {"--role read --project=", "--project '': expected project names, comma-separated"},
      {"--role read --name=", "--name: the label is empty"},
  };
  for (size_t i = 0; i < N_ELEMS(bad); i++) {
    b = (json_t *)1;
    assert_int_equal(parse("token create", bad[i].line, &a, err, sizeof(err)), 0);
    assert_int_equal(cli_token_body(&a, &b, err, sizeof(err)), -EINVAL);
    assert_null(b);
    assert_string_equal(err, bad[i].msg);
    cli_args_release(&a);
  }
}

static void test_user_body(void **state) {
  (void)state;
  cli_args_t a;
  char err[256];
  json_t *b;
  const struct {
    const char *cmd, *line, *password, *body;
    int edit;
  } ok[] = {
      {"user add", "alice --role admin", "pw",
       "{\"name\":\"alice\",\"password\":\"pw\",\"projects\":[],\"role\":\"admin\"}", 0},
      {"user add", "bob -r run -p news -p blog", NULL,
       "{\"name\":\"bob\",\"projects\":[\"news\",\"blog\"],\"role\":\"run\"}", 0},
      {"user set", "bob --role deploy", NULL, "{\"role\":\"deploy\"}", 1},
      {"user set", "bob -p a,b", NULL, "{\"projects\":[\"a\",\"b\"]}", 1},
      {"user set", "bob --all-projects --role read", NULL,
       "{\"projects\":[],\"role\":\"read\"}", 1},
      {"user passwd", "bob", "n3w pass ", "{\"password\":\"n3w pass \"}", 1},
  };
  for (size_t i = 0; i < N_ELEMS(ok); i++) {
    assert_int_equal(parse(ok[i].cmd, ok[i].line, &a, err, sizeof(err)), 0);
    assert_int_equal(cli_user_body(&a, ok[i].edit, ok[i].password, &b, err, sizeof(err)), 0);
    char *s = dump(b);
    assert_string_equal(s, ok[i].body);
    free(s);
    json_decref(b);
    cli_args_release(&a);
  }

  const struct {
    const char *cmd, *line, *msg;
    int edit;
  } bad[] = {
      {"user add", "alice", "--role is required: read, run, deploy or admin", 0},
      {"user add", "alice --role root", "--role 'root': expected read, run, deploy or admin", 0},
      {"user set", "alice", "nothing to change: give --role, --project or --all-projects", 1},
      {"user set", "alice --role x", "--role 'x': expected read, run, deploy or admin", 1},
      {"user set", "alice -p a --all-projects", "--project and --all-projects exclude each other", 1},
  };
  for (size_t i = 0; i < N_ELEMS(bad); i++) {
    b = (json_t *)1;
    assert_int_equal(parse(bad[i].cmd, bad[i].line, &a, err, sizeof(err)), 0);
    assert_int_equal(cli_user_body(&a, bad[i].edit, NULL, &b, err, sizeof(err)), -EINVAL);
    assert_null(b);
    assert_string_equal(err, bad[i].msg);
    cli_args_release(&a);
  }
}

/* Usage errors are found before any connection is made. */
static void test_cli_main_usage(void **state) {
  (void)state;
  char *bad_flag[] = {"schedule", "add", "n", "--bogus", NULL};
  char *missing[] = {"job", "show", NULL};
  char *extra[] = {"status", "x", NULL};
  char *verb[] = {"schedule", "frobnicate", NULL};
  char *tail[] = {"logs", "1", "--tail", "-5", NULL};
  char *both[] = {"whoami", "--user", "a:b", "--token", "sdt_a_b", NULL};
  char *role[] = {"token", "create", "--role", "root", NULL};
  char *passwd_arg[] = {"user", "passwd", "alice", "--password", "x", NULL};
  FILE *saved = stderr;
  stderr = fopen("/dev/null", "w");
  assert_int_equal(cli_main(4, bad_flag), 2);
  assert_int_equal(cli_main(2, missing), 2);
  assert_int_equal(cli_main(2, extra), 2);
  assert_int_equal(cli_main(2, verb), 2);
  assert_int_equal(cli_main(4, tail), 2);
  assert_int_equal(cli_main(5, both), 2);
  assert_int_equal(cli_main(4, role), 2);
  assert_int_equal(cli_main(5, passwd_arg), 2); /* a password is never an argument */
  fclose(stderr);
  stderr = saved;
  assert_true(cli_is_command("schedule"));
  assert_true(cli_is_command("logs"));
  assert_true(cli_is_command("token"));
  assert_true(cli_is_command("user"));
  assert_true(cli_is_command("whoami"));
  assert_false(cli_is_command("show"));
  assert_false(cli_is_command("serve"));
}

/* ---- URLs ---- */

static void test_client_url(void **state) {
  (void)state;
  const char *q[] = {"offset", "-10", "skip", NULL, "type", "job.queued", "x", "a b&c/é", NULL};
  char *u = client_url("http://h:1", (const char *[]){"jobs", "a/b c", "log"}, 3, q);
  assert_string_equal(u, "http://h:1/api/v1/jobs/a%2Fb%20c/log?offset=-10&type=job.queued"
                         "&x=a%20b%26c%2F%C3%A9");
  free(u);
  u = client_url("https://h/prefix/", (const char *[]){"status"}, 1, NULL);
  assert_string_equal(u, "https://h/prefix/api/v1/status");
  free(u);
  u = client_url("http://h/", NULL, 0, (const char *[]){"a", NULL, NULL});
  assert_string_equal(u, "http://h/api/v1");
  free(u);
}

static void test_target_url(void **state) {
  (void)state;
  const struct {
    const char *bind;
    int port;
    const char *url;
  } cases[] = {
      {"127.0.0.1", 6800, "http://127.0.0.1:6800/"},
      {"0.0.0.0", 6801, "http://127.0.0.1:6801/"},
      {"::", 80, "http://[::1]:80/"},
      {"::1", 80, "http://[::1]:80/"},
      {"[fe80::1]", 80, "http://[fe80::1]:80/"},
      {"example.org", 1, "http://example.org:1/"},
      {"", 6800, "http://127.0.0.1:6800/"},
  };
  for (size_t i = 0; i < N_ELEMS(cases); i++) {
    char *u = client_target_url(cases[i].bind, cases[i].port);
    assert_string_equal(u, cases[i].url);
    free(u);
  }
}

/* ---- times ---- */

static void test_iso_to_ms(void **state) {
  (void)state;
  const struct {
    const char *s;
    int64_t ms;
  } ok[] = {
      {"1970-01-01T00:00:00Z", 0},
      {"2026-11-22T15:39:55.922Z", 1795361995922},
      {"2026-11-22T16:40:00+01:00", 1795362000000},
      {"2026-11-22T10:10:00-05:30", 1795362000000},
      {"2026-11-22 15:40:00+0000", 1795362000000},
      {"2000-02-29T12:00:00.5Z", 951825600500},
      {"1969-12-31T23:59:59Z", -1000},
  };
  for (size_t i = 0; i < N_ELEMS(ok); i++) {
    int64_t ms = 0;
    assert_int_equal(fmt_iso_to_ms(ok[i].s, &ms), 0);
    assert_int_equal(ms, ok[i].ms);
  }
  const char *bad[] = {"", "2026-11-22", "2026-11-22T15:40:00", "2026-13-01T00:00:00Z",
                       "2026-11-22T15:40:00+1", "2026-11-22T15:40:00Zjunk", "x026-11-22T15:40:00Z",
                       "2026-11-22T15:40:00."};
  for (size_t i = 0; i < N_ELEMS(bad); i++) {
    int64_t ms;
    assert_int_equal(fmt_iso_to_ms(bad[i], &ms), -EINVAL);
  }
}

static void test_local_time_respects_tz(void **state) {
  (void)state;
  char buf[64];
  const char *old = getenv("TZ");
  char *saved = old ? strdup(old) : NULL;
  setenv("TZ", "UTC", 1);
  tzset();
  fmt_local_time(1795362000000, buf, sizeof(buf));
  assert_string_equal(buf, "2026-11-22 15:40:00");
  setenv("TZ", "Asia/Kolkata", 1);
  tzset();
  fmt_local_time(1795362000999, buf, sizeof(buf));
  assert_string_equal(buf, "2026-11-22 21:10:00");
  setenv("TZ", "America/New_York", 1);
  tzset();
  fmt_local_time(1783000000000, buf, sizeof(buf)); /* July: daylight time */
  assert_string_equal(buf, "2026-07-02 09:46:40");
  if (saved) setenv("TZ", saved, 1);
  else unsetenv("TZ");
  tzset();
  free(saved);
}

static void test_duration(void **state) {
  (void)state;
  char b[32];
  fmt_duration(5, b, sizeof(b));
  assert_string_equal(b, "5s");
  fmt_duration(250, b, sizeof(b));
  assert_string_equal(b, "4m 10s");
  fmt_duration(7500, b, sizeof(b));
  assert_string_equal(b, "2h 5m");
  fmt_duration(3 * 86400 + 4 * 3600 + 59, b, sizeof(b));
  assert_string_equal(b, "3d 4h");
}

/* ---- tables ---- */

static void test_table(void **state) {
  (void)state;
  char *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&out, &len);
  fmt_table_t t;
  assert_int_equal(fmt_table_init(&t, 3, (const char *[]){"ID", "NAME", "NEXT RUN"}), 0);
  assert_int_equal(fmt_table_add(&t, (const char *[]){"1", "ñandú", "2026-01-01 00:00:00"}), 0);
  assert_int_equal(fmt_table_add(&t, (const char *[]){"12345", NULL, ""}), 0);
  fmt_table_print(&t, f);
  fmt_table_release(&t);
  fclose(f);
  assert_string_equal(out,
                      "ID     NAME   NEXT RUN\n"
                      "1      ñandú  2026-01-01 00:00:00\n"
                      "12345  -      -\n");
  free(out);
}

static void test_fields(void **state) {
  (void)state;
  char b[128];
  json_t *o = json_pack("{s:s,s:i,s:f,s:f,s:b,s:n,s:{s:s,s:s},s:[i]}", "s", "x", "i", 7, "r", 2.5,
                        "whole", 3.0, "t", 1, "null", "pairs", "a", "1", "b", "2", "arr", 1);
  fmt_field(o, "s", b, sizeof(b));
  assert_string_equal(b, "x");
  fmt_field(o, "i", b, sizeof(b));
  assert_string_equal(b, "7");
  fmt_field(o, "r", b, sizeof(b));
  assert_string_equal(b, "2.5");
  fmt_field(o, "whole", b, sizeof(b));
  assert_string_equal(b, "3");
  fmt_field(o, "t", b, sizeof(b));
  assert_string_equal(b, "yes");
  fmt_field(o, "null", b, sizeof(b));
  assert_string_equal(b, "");
  fmt_field(o, "absent", b, sizeof(b));
  assert_string_equal(b, "");
  fmt_field(o, "arr", b, sizeof(b));
  assert_string_equal(b, "[1]");
  fmt_pairs_field(o, "pairs", b, sizeof(b));
  assert_string_equal(b, "a=1, b=2");
  json_decref(o);
}

/* "x!" for a cell of its own making */
static void shout(const json_t *o, const char *key, char *buf, size_t n) {
  snprintf(buf, n, "%s!", json_string_value(json_object_get(o, key)));
}

/* The one printer of a list: columns from their cells, from an offset,
 * indented, "-" for what is empty; and of an object, as labelled lines. */
static void test_json_table_and_fields(void **state) {
  (void)state;
  char *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&out, &len);
  json_t *rows = json_pack("[{s:s,s:i,s:I},{s:s,s:n},{s:s,s:i,s:{s:s}}]", "name", "skip", "n", 1,
                           "t_ms", (json_int_t)0, "name", "ñandú", "n", "name", "b", "n", 22,
                           "kv", "a", "1");
  static const fmt_col_t cols[] = {{"NAME", "name", shout}, {"N", "n", fmt_field},
                                   {"KV", "kv", fmt_auto_field}};
  assert_int_equal(fmt_json_table(f, rows, 1, cols, 3, "  "), 0);
  static const fmt_col_t many[FMT_NCOLS_MAX + 1] = {{"X", "x", NULL}};
  assert_int_equal(fmt_json_table(f, rows, 0, many, FMT_NCOLS_MAX + 1, NULL), -EINVAL);
  static const fmt_col_t rows2[] = {{"name:", "name", NULL}, {"none:", "none", NULL},
                                    {"kv:", "kv", NULL}};
  fmt_json_fields(f, json_array_get(rows, 2), rows2, 3, 6);
  fclose(f);
  assert_string_equal(out,
                      "  NAME    N   KV\n"
                      "  ñandú!  -   -\n"
                      "  b!      22  a=1\n"
                      "name:  b\n"
                      "none:  -\n"
                      "kv:    a=1\n");
  free(out);
  json_decref(rows);
}

static void test_backfill_and_calendar_bodies(void **state) {
  (void)state;
  cli_args_t a;
  char err[256];
  json_t *b;
  assert_int_equal(parse("schedule backfill", "nightly --from 2030-01-01 --to 2030-01-08 -m 3 "
                         "--redo-failed --newest-first -n --slot-arg day --slot-date",
                         &a, err, sizeof(err)), 0);
  assert_int_equal(cli_backfill_body(&a, &b, err, sizeof(err)), 0);
  char *s = dump(b);
  assert_string_equal(s, "{\"dry_run\":true,\"from\":\"2030-01-01\",\"max_running\":3,"
                         "\"order\":\"newest\",\"redo\":\"failed\",\"slot_arg\":\"day\","
                         "\"slot_format\":\"date\",\"to\":\"2030-01-08\"}");
  free(s);
  json_decref(b);
  cli_args_release(&a);
  assert_int_equal(parse("schedule backfill", "n --to 2030-01-08", &a, err, sizeof(err)), 0);
  assert_int_equal(cli_backfill_body(&a, &b, err, sizeof(err)), -EINVAL);
  assert_non_null(strstr(err, "--from"));
  cli_args_release(&a);
  assert_int_equal(parse("schedule backfill", "n --from 1 --to 2 -m 0", &a, err, sizeof(err)), 0);
  assert_int_equal(cli_backfill_body(&a, &b, err, sizeof(err)), -EINVAL);
  assert_non_null(strstr(err, "--max-running"));
  cli_args_release(&a);

  assert_int_equal(parse("calendar add", "hol -d 2030-12-25 --date 2030-12-26 -w sat "
                         "--hours 22:00-06:00 --tz Europe/Paris --note closed",
                         &a, err, sizeof(err)), 0);
  assert_int_equal(cli_calendar_body(&a, &b, err, sizeof(err)), 0);
  s = dump(b);
  assert_string_equal(s, "{\"dates\":[\"2030-12-25\",\"2030-12-26\"],\"hours\":[\"22:00-06:00\"],"
                         "\"name\":\"hol\",\"note\":\"closed\",\"tz\":\"Europe/Paris\","
                         "\"weekdays\":[\"sat\"]}");
  free(s);
  json_decref(b);
  cli_args_release(&a);
  assert_int_equal(parse("calendar add", "hol --tz UTC", &a, err, sizeof(err)), 0);
  assert_int_equal(cli_calendar_body(&a, &b, err, sizeof(err)), -EINVAL);
  cli_args_release(&a);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_json_table_and_fields),
      cmocka_unit_test(test_args_forms),
      cmocka_unit_test(test_args_errors),
      cmocka_unit_test(test_numbers),
      cmocka_unit_test(test_schedule_body_add),
      cmocka_unit_test(test_schedule_body_edit_only_given),
      cmocka_unit_test(test_schedule_body_errors),
      cmocka_unit_test(test_job_body_and_query),
      cmocka_unit_test(test_read_first_line),
      cmocka_unit_test(test_credentials),
      cmocka_unit_test(test_duration_option),
      cmocka_unit_test(test_token_body),
      cmocka_unit_test(test_user_body),
      cmocka_unit_test(test_cli_main_usage),
      cmocka_unit_test(test_client_url),
      cmocka_unit_test(test_target_url),
      cmocka_unit_test(test_iso_to_ms),
      cmocka_unit_test(test_local_time_respects_tz),
      cmocka_unit_test(test_duration),
      cmocka_unit_test(test_table),
      cmocka_unit_test(test_fields),
      cmocka_unit_test(test_backfill_and_calendar_bodies),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
