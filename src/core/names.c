#include "core/names.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_BYTES 200

static int is_digit(int c) { return c >= '0' && c <= '9'; }
static int lower(int c) { return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c; }

/* ---- UTF-8 ------------------------------------------------------------- */

/* Python reports the bytes it had accepted as one sequence: a single byte by
 * value, a longer run by its position range. Matching it lets Scrapyd clients
 * that parse these messages keep working. */
static int utf8_fail(char *err, size_t errlen, const unsigned char *u, size_t pos,
                     size_t span, const char *reason) {
  if (err && errlen) {
    if (span == 1)
      snprintf(err, errlen, "'utf-8' codec can't decode byte 0x%02x in position %zu: %s",
               u[pos], pos, reason);
    else
      snprintf(err, errlen, "'utf-8' codec can't decode bytes in position %zu-%zu: %s", pos,
               pos + span - 1, reason);
  }
  return 0;
}

/* Length of the valid sequence at u (1-4), or 0 with the reason and the
 * number of bytes Python had accepted before giving up. The second byte's
 * range excludes overlongs (E0, F0), surrogates (ED) and code points above
 * U+10FFFF (F4), as Python's decoder does. */
static size_t seq_check(const unsigned char *u, size_t left, size_t *span, const char **reason) {
  unsigned c = u[0], lo = 0x80, hi = 0xbf;
  size_t need;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) {
    need = 1;
  } else if (c >= 0xe0 && c <= 0xef) {
    need = 2;
    if (c == 0xe0) lo = 0xa0;
    if (c == 0xed) hi = 0x9f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    need = 3;
    if (c == 0xf0) lo = 0x90;
    if (c == 0xf4) hi = 0x8f;
  } else {
    *span = 1;
    *reason = "invalid start byte";
    return 0;
  }
  for (size_t k = 1; k <= need; k++) {
    *span = k;
    if (k >= left) {
      *reason = "unexpected end of data";
      return 0;
    }
    unsigned cc = u[k];
    if (cc < (k == 1 ? lo : 0x80) || cc > (k == 1 ? hi : 0xbf)) {
      *reason = "invalid continuation byte";
      return 0;
    }
  }
  return need + 1;
}

size_t utf8_sequence(const char *s, size_t left) {
  size_t span;
  const char *reason;
  return left ? seq_check((const unsigned char *)s, left, &span, &reason) : 0;
}

/* A predicate, as the header's "Is s valid UTF-8?" reads: 1 valid, 0 not. */
int utf8_valid(const char *s, size_t len, char *err, size_t errlen) {
  const unsigned char *u = (const unsigned char *)s;
  for (size_t i = 0; i < len;) {
    size_t span = 0;
    const char *reason = NULL;
    size_t n = seq_check(u + i, len - i, &span, &reason);
    if (!n) return utf8_fail(err, errlen, u, i, span, reason);
    i += n;
  }
  return 1;
}

/* ---- names --------------------------------------------------------------- */

/* A predicate like utf8_valid: 1 safe, 0 refused with the reason in err. */
int name_valid(const char *what, const char *s, char *err, size_t errlen) {
  char why[160];
  if (!what) what = "name";
  if (!s || !*s) {
    if (err && errlen) snprintf(err, errlen, "%s must not be empty", what);
    return 0;
  }
  size_t len = strlen(s);
  if (len > NAME_MAX_BYTES) {
    if (err && errlen)
      snprintf(err, errlen, "%s is longer than %d bytes", what, NAME_MAX_BYTES);
    return 0;
  }
  if (!utf8_valid(s, len, why, sizeof(why))) {
    if (err && errlen) snprintf(err, errlen, "%s is invalid: %s", what, why);
    return 0;
  }
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)s[i];
    /* Not echoed: a control character in a message would garble logs. */
    if (c < 0x20 || c == 0x7f) {
      if (err && errlen)
        snprintf(err, errlen,
                 "%s must not contain control characters (byte 0x%02x in position %zu)", what,
                 c, i);
      return 0;
    }
  }
  if (strcmp(s, ".") == 0 || strcmp(s, "..") == 0) {
    if (err && errlen) snprintf(err, errlen, "%s '%s' must not be '.' or '..'", what, s);
    return 0;
  }
  if (strchr(s, '/') || strstr(s, "..")) {
    if (err && errlen) snprintf(err, errlen, "%s '%s' must not contain '/' or '..'", what, s);
    return 0;
  }
  if (strchr(s, '\\')) {
    if (err && errlen) snprintf(err, errlen, "%s '%s' must not contain '\\'", what, s);
    return 0;
  }
  return 1;
}

char *version_sanitize(const char *version) {
  if (!version) return NULL;
  size_t len = strlen(version);
  char *out = malloc(len + 1);
  if (!out) return NULL;
  for (size_t i = 0; i < len; i++) {
    unsigned char c = (unsigned char)version[i];
    int keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '_' ||
               c == '-';
    out[i] = keep ? (char)c : '_';
  }
  out[len] = '\0';
  return out;
}

/* ---- version order ----------------------------------------------------- */

/* A run of digits, leading zeros skipped, so numbers of any length compare
 * without overflow: by length, then byte by byte. */
typedef struct {
  const char *p;
  size_t n;
} num_t;

static const char *num_read(const char *s, num_t *out) {
  while (*s == '0') s++;
  out->p = s;
  while (is_digit(*s)) s++;
  out->n = (size_t)(s - out->p);
  /* "000" has consumed every zero; it is the number 0 (n == 0). */
  return s;
}

static int num_cmp(num_t a, num_t b) {
  if (a.n != b.n) return a.n < b.n ? -1 : 1;
  int c = memcmp(a.p, b.p, a.n);
  return c < 0 ? -1 : c > 0;
}

static int cmp_int(int a, int b) { return a < b ? -1 : a > b; }

/* The comparison key of packaging's Version, minus epoch and local part
 * (sanitizing turned '!' and '+' into '_', so stems cannot carry them). */
typedef struct {
  const char *rel; /* release segments separated by '.' or '_' */
  int pre_rank;    /* 0: dev-only (before any pre), 1-3: a/b/rc, 4: none */
  num_t pre;
  int post_rank; /* 0: none, 1: post */
  num_t post;
  int dev_rank; /* 0: dev, 1: none */
  num_t dev;
} pver_t;

static int is_sep(int c) { return c == '.' || c == '_' || c == '-'; }

/* Case-insensitive match of word at s; returns its length or 0. */
static size_t word_at(const char *s, const char *word) {
  size_t i = 0;
  for (; word[i]; i++)
    if (lower((unsigned char)s[i]) != word[i]) return 0;
  return i;
}

/* Case-insensitive match at s of the first of words (longest alternatives
 * listed first); returns its index and sets *len, or -1. */
static int word_match(const char *s, const char *const *words, size_t *len) {
  for (int w = 0; words[w]; w++)
    if ((*len = word_at(s, words[w]))) return w;
  return -1;
}

enum { ST_PRE, ST_POST, ST_DEV, ST_END };

static int parse_rest(const char *s, int stage, pver_t *v);

/* The "[-_.]?N?" after a label, tried in the order a greedy regex backtracks
 * through them: the first way that lets the rest parse wins, as in
 * packaging's VERSION_PATTERN. */
static int label_tail(const char *s, int stage, pver_t *v, num_t *n) {
  for (int take_sep = 1; take_sep >= 0; take_sep--) {
    const char *t = s;
    if (take_sep) {
      if (!is_sep(*t)) continue;
      t++;
    }
    if (is_digit(*t)) {
      const char *after = num_read(t, n);
      if (parse_rest(after, stage + 1, v) == 0) return 0;
    }
    if (parse_rest(t, stage + 1, v) == 0) {
      n->p = t;
      n->n = 0;
      return 0;
    }
  }
  return -1;
}

/* Parses the optional pre, post and dev parts from stage on; fills each
 * stage's fields only on the path that succeeds. */
static int parse_rest(const char *s, int stage, pver_t *v) {
  static const char *const pre_words[] = {"alpha", "a", "beta", "b", "preview", "pre",
                                          "rc",    "c", NULL};
  static const int pre_rank[] = {1, 1, 2, 2, 3, 3, 3, 3};
  static const char *const post_words[] = {"post", "rev", "r", NULL};
  static const char *const dev_words[] = {"dev", NULL};
  static const char *const *const words[] = {pre_words, post_words, dev_words};
  num_t n;
  size_t len;

  if (stage == ST_END) return *s ? -1 : 0;
  if (stage == ST_POST && *s == '-' && is_digit(s[1])) {
    const char *after = num_read(s + 1, &n);
    if (parse_rest(after, stage + 1, v) == 0) {
      v->post_rank = 1;
      v->post = n;
      return 0;
    }
  }
  for (int take_sep = 1; take_sep >= 0; take_sep--) {
    const char *t = s;
    if (take_sep) {
      if (!is_sep(*t)) continue;
      t++;
    }
    int w = word_match(t, words[stage], &len);
    if (w < 0 || label_tail(t + len, stage, v, &n)) continue;
    if (stage == ST_PRE) {
      v->pre_rank = pre_rank[w];
      v->pre = n;
    } else if (stage == ST_POST) {
      v->post_rank = 1;
      v->post = n;
    } else {
      v->dev_rank = 0;
      v->dev = n;
    }
    return 0;
  }
  if (parse_rest(s, stage + 1, v)) return -1;
  if (stage == ST_PRE) v->pre_rank = 4;
  else if (stage == ST_POST) v->post_rank = 0;
  else v->dev_rank = 1;
  return 0;
}

static int pver_parse(const char *s, pver_t *v) {
  num_t scratch;

  memset(v, 0, sizeof(*v));
  if (*s == 'v' || *s == 'V') s++;
  if (!is_digit(*s)) return -1;
  v->rel = s;
  for (;;) {
    s = num_read(s, &scratch);
    if ((*s == '.' || *s == '_') && is_digit(s[1]))
      s++;
    else
      break;
  }
  if (parse_rest(s, ST_PRE, v)) return -1;
  /* packaging: a bare dev release sorts before every pre-release of it. */
  if (v->pre_rank == 4 && v->post_rank == 0 && v->dev_rank == 0) v->pre_rank = 0;
  return 0;
}

/* Missing segments count as zero, which is packaging's "trailing zeros are
 * not significant". */
static int release_cmp(const char *a, const char *b) {
  num_t x, y;
  while (is_digit(*a) || is_digit(*b)) {
    if (is_digit(*a)) {
      a = num_read(a, &x);
    } else {
      x.p = a;
      x.n = 0;
    }
    if (is_digit(*b)) {
      b = num_read(b, &y);
    } else {
      y.p = b;
      y.n = 0;
    }
    int c = num_cmp(x, y);
    if (c) return c;
    if ((*a == '.' || *a == '_') && is_digit(a[1])) a++;
    if ((*b == '.' || *b == '_') && is_digit(b[1])) b++;
  }
  return 0;
}

static int pver_cmp(const pver_t *a, const pver_t *b) {
  int c = release_cmp(a->rel, b->rel);
  if (c) return c;
  if ((c = cmp_int(a->pre_rank, b->pre_rank))) return c;
  if (a->pre_rank >= 1 && a->pre_rank <= 3 && (c = num_cmp(a->pre, b->pre))) return c;
  if ((c = cmp_int(a->post_rank, b->post_rank))) return c;
  if (a->post_rank && (c = num_cmp(a->post, b->post))) return c;
  if ((c = cmp_int(a->dev_rank, b->dev_rank))) return c;
  if (a->dev_rank == 0 && (c = num_cmp(a->dev, b->dev))) return c;
  return 0;
}

/* Digit runs compare as numbers, any other byte by value. A digit run against
 * a non-digit byte compares as its first digit would: every non-digit is
 * either below or above all digits, so this stays a total preorder. */
static int natural_cmp(const char *a, const char *b) {
  while (*a && *b) {
    if (is_digit(*a) && is_digit(*b)) {
      num_t x, y;
      a = num_read(a, &x);
      b = num_read(b, &y);
      int c = num_cmp(x, y);
      if (c) return c;
      continue;
    }
    unsigned char ca = (unsigned char)*a, cb = (unsigned char)*b;
    if (ca != cb) return ca < cb ? -1 : 1;
    a++;
    b++;
  }
  return cmp_int(*a != '\0', *b != '\0');
}

int version_compare(const char *a, const char *b) {
  if (!a || !b) return cmp_int(a != NULL, b != NULL);
  pver_t va, vb;
  int oka = pver_parse(a, &va) == 0, okb = pver_parse(b, &vb) == 0;
  int c;
  if (oka != okb) return oka ? 1 : -1;
  c = oka ? pver_cmp(&va, &vb) : natural_cmp(a, b);
  if (c) return c;
  c = strcmp(a, b);
  return c < 0 ? -1 : c > 0;
}

int version_compare_qsort(const void *a, const void *b) {
  return version_compare(*(const char *const *)a, *(const char *const *)b);
}
