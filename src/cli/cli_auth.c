/* Who the client is and who may use the daemon: the credentials every
 * command sends (--token, --token-file, --user and their variables) and
 * the commands whoami, token create|list|revoke and user
 * add|list|passwd|set|remove. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#include "cli/cli_int.h"
#include "cli/format.h"
#include "core/principal.h"

/* What a token made without --name is called in `token list`. */
#define DEFAULT_TOKEN_NAME "cli"
/* Longer than any password or token anyone types or pastes. */
#define SECRET_MAX 4096

#define ROLES_TEXT "read, run, deploy or admin"

/* ---- credentials ---- */

int cli_read_first_line(const char *path, int strip_blanks, char **out, char *err,
                        size_t errlen) {
  char buf[SECRET_MAX + 1];
  size_t len = 0;
  int ch, rc = 0;
  *out = NULL;
  FILE *f = fopen(path, "r");
  if (!f) {
    rc = -errno;
    snprintf(err, errlen, "%s: %s", path, strerror(-rc));
    return rc;
  }
  while ((ch = getc(f)) != EOF && ch != '\n') {
    if (len == SECRET_MAX) {
      snprintf(err, errlen, "%s: the first line is longer than %d bytes", path, SECRET_MAX);
      rc = -EINVAL;
      break;
    }
    buf[len++] = (char)ch;
  }
  if (!rc && ferror(f)) { /* a directory opens, then fails to read */
    rc = errno ? -errno : -EIO;
    snprintf(err, errlen, "%s: %s", path, strerror(-rc));
  }
  fclose(f);
  if (len && buf[len - 1] == '\r') len--;
  while (strip_blanks && len && isspace((unsigned char)buf[len - 1])) len--;
  if (!rc && !len) {
    snprintf(err, errlen, "%s: the first line is empty", path);
    rc = -EINVAL;
  }
  if (!rc && !(*out = strndup(buf, len))) {
    snprintf(err, errlen, "out of memory");
    rc = -ENOMEM;
  }
  explicit_bzero(buf, sizeof(buf));
  return rc;
}

/* A token goes into a header: a blank or a line break there would be a
 * different header, or a truncated token. */
static int token_ok(const char *t) {
  for (; *t; t++)
    if ((unsigned char)*t <= ' ' || *t == 0x7f) return 0;
  return 1;
}

int cli_credentials(const cli_args_t *a, char **userpwd, char **token, char *err, size_t errlen) {
  const char *user = cli_args_get(a, O_USER), *tok = cli_args_get(a, O_TOKEN);
  const char *file = cli_args_get(a, O_TOKEN_FILE), *from = "--token";
  char *t = NULL, *u = NULL;
  int rc = 0;
  *userpwd = *token = NULL;
  if (user && !*user) user = NULL; /* --user "$UNSET": as if not given, as before */
  if (tok && file) {
    snprintf(err, errlen, "--token and --token-file exclude each other");
    return -EINVAL;
  }
  if (user && (tok || file)) {
    snprintf(err, errlen, "--user and %s exclude each other: give a password or a token",
             tok ? "--token" : "--token-file");
    return -EINVAL;
  }
  if (file) {
    char why[512];
    rc = cli_read_first_line(file, 1, &t, why, sizeof(why));
    if (rc == -ENOMEM) return rc;
    if (rc) {
      snprintf(err, errlen, "--token-file %s", why);
      return -EINVAL;
    }
    from = "--token-file";
  } else if (tok) {
    if (!*tok) {
      snprintf(err, errlen, "--token: the token is empty");
      return -EINVAL;
    }
    t = strdup(tok);
    rc = t ? 0 : -ENOMEM;
  } else if (user) {
    u = strdup(user);
    rc = u ? 0 : -ENOMEM;
  } else {
    const char *et = getenv("SPIDERD_TOKEN"), *eu = getenv("SPIDERD_USER");
    const char *ep = getenv("SPIDERD_PASSWORD");
    if (et && *et) {
      t = strdup(et);
      rc = t ? 0 : -ENOMEM;
      from = "SPIDERD_TOKEN";
    } else if (eu && *eu && !strchr(eu, ':')) {
      if (asprintf(&u, "%s:%s", eu, ep ? ep : "") < 0) u = NULL;
      rc = u ? 0 : -ENOMEM;
    } else if (eu && *eu) {
      u = strdup(eu);
      rc = u ? 0 : -ENOMEM;
    }
  }
  if (!rc && t && !token_ok(t)) {
    snprintf(err, errlen, "%s: a token holds no blanks or control characters", from);
    rc = -EINVAL;
  }
  if (rc == -ENOMEM) snprintf(err, errlen, "out of memory");
  if (rc) {
    free(t);
    free(u);
    return rc;
  }
  *userpwd = u;
  *token = t;
  return 0;
}

/* ---- request builders ---- */

int cli_parse_duration(const char *s, long long *secs) {
  if (!s || !isdigit((unsigned char)*s)) return -EINVAL;
  char *end;
  errno = 0;
  long long n = strtoll(s, &end, 10), unit = 1;
  if (errno) return -EINVAL;
  if (*end) {
    if (end[1]) return -EINVAL;
    switch (*end) {
    case 's': unit = 1; break;
    case 'm': unit = 60; break;
    case 'h': unit = 3600; break;
    case 'd': unit = 86400; break;
    case 'w': unit = 7 * 86400; break;
    default: return -EINVAL;
    }
  }
  /* The daemon adds it to a time in milliseconds. */
  if (n <= 0 || n > LLONG_MAX / 1000 / unit) return -EINVAL;
  *secs = n * unit;
  return 0;
}

static int role_check(const char *role, char *err, size_t errlen) {
  if (!role) {
    snprintf(err, errlen, "--role is required: " ROLES_TEXT);
    return -EINVAL;
  }
  if (role_parse(role) == ROLE_NONE) {
    snprintf(err, errlen, "--role '%s': expected " ROLES_TEXT, role);
    return -EINVAL;
  }
  return 0;
}

/* obj.projects from every --project (each may be "a,b"); always: [] when
 * none was given. */
static int projects_option(const cli_args_t *a, json_t *obj, int always, char *err,
                           size_t errlen) {
  json_t *list = json_array();
  int rc = list ? 0 : -ENOMEM;
  for (size_t i = 0; i < a->nopts && !rc; i++) {
    if (a->opts[i].id != O_PROJECT) continue;
    const char *p = a->opts[i].value;
    for (;;) {
      size_t n = strcspn(p, ",");
      if (n == 0) {
        snprintf(err, errlen, "--project '%s': expected project names, comma-separated",
                 a->opts[i].value);
        rc = -EINVAL;
        break;
      }
      if (json_array_append_new(list, json_stringn(p, n))) {
        rc = -ENOMEM;
        break;
      }
      if (!p[n]) break;
      p += n + 1;
    }
  }
  if (!rc && (always || json_array_size(list)))
    rc = json_object_set(obj, "projects", list) ? -ENOMEM : 0;
  json_decref(list);
  return rc;
}

int cli_token_body(const cli_args_t *a, json_t **body, char *err, size_t errlen) {
  const char *role = cli_args_get(a, O_ROLE), *name = cli_args_get(a, O_NAME);
  const char *exp = cli_args_get(a, O_EXPIRES);
  long long secs = 0;
  json_t *b = NULL;
  int rc = role_check(role, err, errlen);
  if (!rc && exp && cli_parse_duration(exp, &secs)) {
    snprintf(err, errlen,
             "--expires '%s': expected a duration: seconds, or a number and s, m, h, d or w "
             "(90m, 12h, 30d)",
             exp);
    rc = -EINVAL;
  }
  if (!rc && name && !*name) {
    snprintf(err, errlen, "--name: the label is empty");
    rc = -EINVAL;
  }
  /* The daemon's contract has every token named; a script rarely cares. */
  if (!rc && !(b = json_pack("{s:s,s:s}", "name", name ? name : DEFAULT_TOKEN_NAME, "role", role)))
    rc = -ENOMEM;
  if (!rc) rc = projects_option(a, b, 0, err, errlen);
  if (!rc && exp && json_object_set_new(b, "expires_in", json_integer(secs))) rc = -ENOMEM;
  return cli_body_done(b, rc, body, err, errlen);
}

int cli_user_body(const cli_args_t *a, int edit, const char *password, json_t **body, char *err,
                  size_t errlen) {
  const char *role = cli_args_get(a, O_ROLE);
  int all = cli_args_get(a, O_ALL_PROJECTS) != NULL;
  json_t *b = NULL;
  int rc = role || !edit ? role_check(role, err, errlen) : 0;
  if (!rc && all && cli_args_get(a, O_PROJECT)) {
    snprintf(err, errlen, "--project and --all-projects exclude each other");
    rc = -EINVAL;
  }
  if (!rc && !(b = edit ? json_object() : json_pack("{s:s}", "name", a->pos[0]))) rc = -ENOMEM;
  if (!rc && password && json_object_set_new(b, "password", json_string(password))) rc = -ENOMEM;
  if (!rc && role && json_object_set_new(b, "role", json_string(role))) rc = -ENOMEM;
  /* A new user without --project may use every project: say so ([]). */
  if (!rc) rc = projects_option(a, b, !edit || all, err, errlen);
  if (!rc && edit && json_object_size(b) == 0) {
    snprintf(err, errlen, "nothing to change: give --role, --project or --all-projects");
    rc = -EINVAL;
  }
  return cli_body_done(b, rc, body, err, errlen);
}

/* ---- reading a password ---- */

/* Does nothing: installed without SA_RESTART, it makes the read() at the
 * prompt return EINTR, so the terminal's echo is turned back on before the
 * process ends. */
static void on_prompt_signal(int sig) { (void)sig; }

/* One line from fd, byte by byte (nothing past it is consumed), without
 * its line end. 0, 1 at end of input with nothing read, or -errno. */
static int read_line(int fd, char *buf, size_t n) {
  size_t len = 0;
  int got = 0;
  for (;;) {
    char ch;
    ssize_t r = read(fd, &ch, 1);
    if (r < 0) return -errno;
    if (r == 0) break;
    got = 1;
    if (ch == '\n') break;
    if (len + 1 >= n) return -E2BIG;
    buf[len++] = ch;
  }
  if (len && buf[len - 1] == '\r') len--;
  buf[len] = '\0';
  return got ? 0 : 1;
}

/* Prompts on stderr and reads a line from the terminal on stdin with echo
 * off; the terminal and the signal handlers are as before afterwards. */
static int read_hidden(const char *prompt, char *buf, size_t n) {
  struct termios old, quiet;
  struct sigaction sa, old_int, old_term, old_quit;
  if (tcgetattr(STDIN_FILENO, &old)) return -errno;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_prompt_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  sigaction(SIGQUIT, &sa, &old_quit);
  quiet = old;
  quiet.c_lflag &= ~(tcflag_t)(ECHO | ECHOE | ECHOK | ECHONL);
  fputs(prompt, stderr);
  fflush(stderr);
  int rc = tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet) ? -errno : 0;
  if (!rc) rc = read_line(STDIN_FILENO, buf, n);
  tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
  fputc('\n', stderr); /* the Enter that was not echoed */
  sigaction(SIGINT, &old_int, NULL);
  sigaction(SIGTERM, &old_term, NULL);
  sigaction(SIGQUIT, &old_quit, NULL);
  return rc;
}

/* The password for user `name`: --password-file's first line, else typed
 * twice at the terminal, else one line of stdin. Never an argument: the
 * command line is visible to every user of the machine. Prints the reason
 * and returns CLI_EAPI when there is none. */
static int get_password(const cli_args_t *a, const char *name, char *pw, size_t n) {
  const char *file = cli_args_get(a, O_PASSWORD_FILE);
  char err[512], again[SECRET_MAX + 1];
  int rc = 0;
  pw[0] = '\0';
  if (file) {
    char *p = NULL;
    rc = cli_read_first_line(file, 0, &p, err, sizeof(err));
    if (rc) {
      fprintf(stderr, "spiderd: --password-file %s\n", err);
      return CLI_EAPI;
    }
    snprintf(pw, n, "%s", p);
    explicit_bzero(p, strlen(p));
    free(p);
    return CLI_OK;
  }
  if (isatty(STDIN_FILENO)) {
    char prompt[128];
    snprintf(prompt, sizeof(prompt), "Password for %s: ", name);
    rc = read_hidden(prompt, pw, n);
    if (!rc && pw[0]) rc = read_hidden("Again: ", again, sizeof(again));
    if (!rc && pw[0] && strcmp(pw, again)) {
      fprintf(stderr, "spiderd: the passwords differ; nothing was changed\n");
      rc = -EINVAL;
    }
    explicit_bzero(again, sizeof(again));
  } else {
    rc = read_line(STDIN_FILENO, pw, n);
  }
  if (rc == -EINTR)
    fprintf(stderr, "spiderd: interrupted\n");
  else if (rc == -E2BIG)
    fprintf(stderr, "spiderd: the password is longer than %zu bytes\n", n - 1);
  else if (rc == 1)
    fprintf(stderr, "spiderd: no password on stdin (give --password-file FILE, or run at a "
                    "terminal)\n");
  else if (rc < 0 && rc != -EINVAL)
    fprintf(stderr, "spiderd: cannot read the password: %s\n", strerror(-rc));
  else if (!rc && !pw[0]) {
    fprintf(stderr, "spiderd: the password is empty\n");
    rc = -EINVAL;
  }
  if (rc) {
    explicit_bzero(pw, n);
    return CLI_EAPI;
  }
  return CLI_OK;
}

/* ---- output ---- */

/* A principal's projects: "a,b", or "*" for every project ([]). */
static void projects_field(const json_t *o, const char *key, char *buf, size_t n) {
  const json_t *list = json_object_get(o, key);
  size_t i, len = 0;
  const json_t *p;
  buf[0] = '\0';
  if (!json_is_array(list)) return;
  if (!json_array_size(list)) {
    snprintf(buf, n, "*");
    return;
  }
  json_array_foreach(list, i, p) {
    int w = snprintf(buf + len, n - len, "%s%s", i ? "," : "", json_string_value(p));
    if (w < 0 || (size_t)w >= n - len) break;
    len += (size_t)w;
  }
}

/* ---- whoami ---- */

/* projects_field, with "*" spelt out. */
static void whoami_projects(const json_t *o, const char *key, char *buf, size_t n) {
  projects_field(o, key, buf, n);
  if (!strcmp(buf, "*")) snprintf(buf, n, "* (every project)");
}

static void print_whoami(const json_t *r) {
  static const fmt_col_t rows[] = {{"actor:", "actor", fmt_field},
                                   {"kind:", "kind", fmt_field},
                                   {"role:", "role", fmt_field},
                                   {"projects:", "projects", whoami_projects}};
  fmt_json_fields(stdout, r, rows, sizeof(rows) / sizeof(rows[0]), 10);
}

static int cmd_whoami(cli_ctx_t *ctx, const cli_args_t *a) {
  (void)a;
  return cli_show(ctx, (const char *[]){"auth", "whoami"}, 2, NULL, print_whoami);
}

/* ---- tokens ---- */

static int cmd_token_create(cli_ctx_t *ctx, const cli_args_t *a) {
  json_t *body = NULL, *r = NULL;
  char err[512];
  if (cli_token_body(a, &body, err, sizeof(err))) return cli_usage_error(ctx, "%s", err);
  int rc = cli_call(ctx, "POST", (const char *[]){"tokens"}, 1, NULL, body, &r);
  json_decref(body);
  if (rc) return rc;
  const char *token = json_string_value(json_object_get(r, "token"));
  if (!token && !ctx->json) {
    fprintf(stderr, "spiderd: the daemon's answer holds no token\n");
    json_decref(r);
    return CLI_EAPI;
  }
  if (ctx->json) {
    cli_print_json(r);
  } else {
    /* Alone on stdout, so TOKEN=$(spiderd token create ...) works. */
    printf("%s\n", token);
  }
  fflush(stdout);
  char id[64], role[32];
  fmt_field(r, "id", id, sizeof(id));
  fmt_field(r, "role", role, sizeof(role));
  fprintf(stderr, "spiderd: token %s (role %s) is shown only this once: keep it now\n",
          id[0] ? id : "-", role[0] ? role : "-");
  json_decref(r);
  return CLI_OK;
}

/* An ISO time, or "never" for null. */
static void expires_field(const json_t *o, const char *key, char *buf, size_t n) {
  fmt_iso_field(o, key, buf, n);
  if (json_is_null(json_object_get(o, key))) snprintf(buf, n, "never");
}

static void print_tokens(const json_t *r) {
  static const fmt_col_t cols[] = {
      {"ID", "id", fmt_field},          {"NAME", "name", fmt_field},
      {"ROLE", "role", fmt_field},      {"PROJECTS", "projects", projects_field},
      {"OWNER", "owner", fmt_field},    {"CREATED", "created", fmt_iso_field},
      {"EXPIRES", "expires", expires_field}};
  fmt_json_table(stdout, json_object_get(r, "tokens"), 0, cols, sizeof(cols) / sizeof(cols[0]),
                 NULL);
}

static int cmd_token_list(cli_ctx_t *ctx, const cli_args_t *a) {
  (void)a;
  return cli_show(ctx, (const char *[]){"tokens"}, 1, NULL, print_tokens);
}

static int cmd_token_revoke(cli_ctx_t *ctx, const cli_args_t *a) {
  char done[512];
  snprintf(done, sizeof(done), "revoked token %s", a->pos[0]);
  return cli_delete(ctx, (const char *[]){"tokens", a->pos[0]}, 2, done);
}

/* ---- users ---- */

static void print_users(const json_t *r) {
  static const fmt_col_t cols[] = {{"NAME", "name", fmt_field},
                                   {"ROLE", "role", fmt_field},
                                   {"PROJECTS", "projects", projects_field},
                                   {"CREATED", "created", fmt_iso_field}};
  fmt_json_table(stdout, json_object_get(r, "users"), 0, cols, sizeof(cols) / sizeof(cols[0]),
                 NULL);
}

static int cmd_user_list(cli_ctx_t *ctx, const cli_args_t *a) {
  (void)a;
  return cli_show(ctx, (const char *[]){"users"}, 1, NULL, print_users);
}

/* "created|updated user NAME (role R, projects P)" */
static void print_user_line(const char *verb, const json_t *u) {
  char name[256], role[32], projects[1024];
  fmt_field(u, "name", name, sizeof(name));
  fmt_field(u, "role", role, sizeof(role));
  projects_field(u, "projects", projects, sizeof(projects));
  printf("%s user %s (role %s, projects %s)\n", verb, name, role[0] ? role : "-",
         projects[0] ? projects : "-");
}

static void print_created(const json_t *u) { print_user_line("created", u); }
static void print_updated(const json_t *u) { print_user_line("updated", u); }

static int cmd_user_add(cli_ctx_t *ctx, const cli_args_t *a) {
  json_t *body = NULL, *r = NULL;
  char err[512], pw[SECRET_MAX + 1];
  /* Wrong options are told before anyone types a password. */
  if (cli_user_body(a, 0, NULL, &body, err, sizeof(err))) return cli_usage_error(ctx, "%s", err);
  int rc = get_password(a, a->pos[0], pw, sizeof(pw));
  if (!rc && json_object_set_new(body, "password", json_string(pw))) {
    fprintf(stderr, "spiderd: out of memory\n");
    rc = CLI_EAPI;
  }
  explicit_bzero(pw, sizeof(pw));
  if (!rc) rc = cli_call(ctx, "POST", (const char *[]){"users"}, 1, NULL, body, &r);
  json_decref(body);
  return rc ? rc : cli_answer(ctx, r, print_created);
}

static int cmd_user_passwd(cli_ctx_t *ctx, const cli_args_t *a) {
  json_t *body = NULL, *r = NULL;
  char pw[SECRET_MAX + 1];
  int rc = get_password(a, a->pos[0], pw, sizeof(pw));
  if (!rc && !(body = json_pack("{s:s}", "password", pw))) {
    fprintf(stderr, "spiderd: out of memory\n");
    rc = CLI_EAPI;
  }
  explicit_bzero(pw, sizeof(pw));
  if (!rc) rc = cli_call(ctx, "PATCH", (const char *[]){"users", a->pos[0]}, 2, NULL, body, &r);
  json_decref(body);
  if (rc) return rc;
  if (ctx->json)
    cli_print_json(r);
  else
    printf("changed the password of user %s\n", a->pos[0]);
  json_decref(r);
  return CLI_OK;
}

static int cmd_user_set(cli_ctx_t *ctx, const cli_args_t *a) {
  json_t *body = NULL, *r = NULL;
  char err[512];
  if (cli_user_body(a, 1, NULL, &body, err, sizeof(err))) return cli_usage_error(ctx, "%s", err);
  int rc = cli_call(ctx, "PATCH", (const char *[]){"users", a->pos[0]}, 2, NULL, body, &r);
  json_decref(body);
  return rc ? rc : cli_answer(ctx, r, print_updated);
}

static int cmd_user_remove(cli_ctx_t *ctx, const cli_args_t *a) {
  char done[512];
  snprintf(done, sizeof(done), "removed user %s", a->pos[0]);
  return cli_delete(ctx, (const char *[]){"users", a->pos[0]}, 2, done);
}

/* ---- the command table ---- */

static const cli_opt_t common_opts[] = {CLI_COMMON_OPTS};
static const cli_opt_t token_create_opts[] = {{"role", 'r', 1, O_ROLE}, {"project", 'p', 1, O_PROJECT},
                                              {"name", 0, 1, O_NAME}, {"expires", 0, 1, O_EXPIRES},
                                              CLI_COMMON_OPTS};
static const cli_opt_t user_add_opts[] = {{"role", 'r', 1, O_ROLE}, {"project", 'p', 1, O_PROJECT},
                                          {"password-file", 0, 1, O_PASSWORD_FILE}, CLI_COMMON_OPTS};
static const cli_opt_t user_passwd_opts[] = {{"password-file", 0, 1, O_PASSWORD_FILE},
                                             CLI_COMMON_OPTS};
static const cli_opt_t user_set_opts[] = {{"role", 'r', 1, O_ROLE}, {"project", 'p', 1, O_PROJECT},
                                          {"all-projects", 0, 0, O_ALL_PROJECTS}, CLI_COMMON_OPTS};

#define ROLES_HELP                                                                   \
  "  -r, --role ROLE    read (every GET), run (+ jobs, schedules, queue elements),\n" \
  "                     deploy (+ eggs and projects) or admin (+ users, tokens,\n"    \
  "                     settings)\n"
#define PASSWORD_HELP                                                                \
  "  --password-file F  the password is the first line of F; without it, typed\n"    \
  "                     twice at the terminal (not echoed), or one line of stdin\n"

const cli_cmd_t cli_auth_cmds[] = {
    {"whoami", cmd_whoami, common_opts, 0, 0, "whoami",
     "Who the daemon takes this client for: the user or token (actor), its kind\n"
     "(user, token, scrapyd, job or anonymous), its role and its projects\n"
     "(* for every project).\n"},
    {"token create", cmd_token_create, token_create_opts, 0, 0,
     "token create --role ROLE [--project P]... [--name LABEL] [--expires DURATION]",
     "Creates an API token and prints it alone on stdout, so that\n"
     "TOKEN=$(spiderd token create ...) works; the daemon shows it only this once\n"
     "(a reminder goes to stderr). --json prints the whole answer.\n" ROLES_HELP
     "  -p, --project P    limit the token to project P (repeatable, or a,b);\n"
     "                     default: the daemon's (every project it may use)\n"
     "  --name LABEL       what it is for, shown by `token list` (default \"" DEFAULT_TOKEN_NAME
     "\")\n"
     "  --expires D        valid for D: seconds, or 90m, 12h, 30d, 2w (default: never\n"
     "                     expires)\n"},
    {"token list", cmd_token_list, common_opts, 0, 0, "token list",
     "Lists API tokens (never their secrets): ID, NAME, ROLE, PROJECTS (* for every\n"
     "project), OWNER, CREATED, EXPIRES.\n"},
    {"token revoke", cmd_token_revoke, common_opts, 1, 1, "token revoke ID",
     "Revokes a token at once; ID is the 16 hex digits `token list` shows.\n"},
    {"user add", cmd_user_add, user_add_opts, 1, 1,
     "user add NAME --role ROLE [--project P]... [--password-file FILE]",
     "Creates a user who signs in with NAME and a password (basic auth, --user).\n" ROLES_HELP
     "  -p, --project P    limit the user to project P (repeatable, or a,b);\n"
     "                     default: every project\n" PASSWORD_HELP},
    {"user list", cmd_user_list, common_opts, 0, 0, "user list",
     "Lists users: NAME, ROLE, PROJECTS (* for every project), CREATED.\n"},
    {"user passwd", cmd_user_passwd, user_passwd_opts, 1, 1, "user passwd NAME [--password-file FILE]",
     "Sets a user's password.\n" PASSWORD_HELP},
    {"user set", cmd_user_set, user_set_opts, 1, 1,
     "user set NAME [--role ROLE] [--project P]... [--all-projects]",
     "Changes a user's role or projects; only what is given changes.\n" ROLES_HELP
     "  -p, --project P    the user's projects become exactly these (repeatable)\n"
     "  --all-projects     the user may use every project\n"},
    {"user remove", cmd_user_remove, common_opts, 1, 1, "user remove NAME",
     "Deletes a user.\n"},
};
const size_t cli_nauth_cmds = sizeof(cli_auth_cmds) / sizeof(cli_auth_cmds[0]);
