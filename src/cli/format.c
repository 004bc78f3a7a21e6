/* Local times, members as text and tables for the client sub-commands
 * (format.h). */
#include "cli/format.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int digits(const char *s, int n, int *out) {
  int v = 0;
  for (int i = 0; i < n; i++) {
    if (!isdigit((unsigned char)s[i])) return -EINVAL;
    v = v * 10 + (s[i] - '0');
  }
  *out = v;
  return 0;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's
 * days_from_civil): timegm() would do, but it is not in C11 or POSIX. */
static int64_t days_from_civil(int64_t y, int m, int d) {
  y -= m <= 2;
  int64_t era = (y >= 0 ? y : y - 399) / 400;
  int64_t yoe = y - era * 400;
  int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

int fmt_iso_to_ms(const char *s, int64_t *ms) {
  int y, mo, d, h, mi, sec;
  if (!s || strlen(s) < 19 || digits(s, 4, &y) || s[4] != '-' || digits(s + 5, 2, &mo) ||
      s[7] != '-' || digits(s + 8, 2, &d) || (s[10] != 'T' && s[10] != ' ') ||
      digits(s + 11, 2, &h) || s[13] != ':' || digits(s + 14, 2, &mi) || s[16] != ':' ||
      digits(s + 17, 2, &sec))
    return -EINVAL;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return -EINVAL;
  const char *p = s + 19;
  int frac_ms = 0;
  if (*p == '.') {
    p++;
    if (!isdigit((unsigned char)*p)) return -EINVAL;
    for (int scale = 100; isdigit((unsigned char)*p); p++, scale /= 10)
      frac_ms += (*p - '0') * scale;
  }
  int off_min = 0;
  if (*p == 'Z' && !p[1]) {
    off_min = 0;
  } else if ((*p == '+' || *p == '-') && strlen(p) >= 5) {
    int oh, om;
    if (digits(p + 1, 2, &oh)) return -EINVAL;
    const char *q = p + 3;
    if (*q == ':') q++;
    if (digits(q, 2, &om) || q[2] || oh > 23 || om > 59) return -EINVAL;
    off_min = (oh * 60 + om) * (*p == '-' ? -1 : 1);
  } else {
    return -EINVAL;
  }
  int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec - off_min * 60;
  *ms = secs * 1000 + frac_ms;
  return 0;
}

void fmt_local_time(int64_t ms, char *buf, size_t n) {
  /* Floor division keeps times before 1970 on the right second. */
  time_t t = (time_t)(ms >= 0 ? ms / 1000 : -((-ms + 999) / 1000));
  struct tm tm;
  if (!localtime_r(&t, &tm) || !strftime(buf, n, "%Y-%m-%d %H:%M:%S", &tm))
    snprintf(buf, n, "%lld", (long long)ms);
}

void fmt_duration(int64_t s, char *buf, size_t n) {
  if (s < 0) s = 0;
  if (s >= 86400)
    snprintf(buf, n, "%lldd %lldh", (long long)(s / 86400), (long long)(s % 86400 / 3600));
  else if (s >= 3600)
    snprintf(buf, n, "%lldh %lldm", (long long)(s / 3600), (long long)(s % 3600 / 60));
  else if (s >= 60)
    snprintf(buf, n, "%lldm %llds", (long long)(s / 60), (long long)(s % 60));
  else
    snprintf(buf, n, "%llds", (long long)s);
}

int fmt_table_init(fmt_table_t *t, size_t ncols, const char *const *headers) {
  memset(t, 0, sizeof(*t));
  t->ncols = ncols;
  return fmt_table_add(t, headers);
}

int fmt_table_add(fmt_table_t *t, const char *const *cells) {
  if (t->nrows == t->cap) {
    size_t cap = t->cap ? t->cap * 2 : 16;
    char **c = realloc(t->cells, cap * t->ncols * sizeof(*c));
    if (!c) return -ENOMEM;
    t->cells = c;
    t->cap = cap;
  }
  char **row = t->cells + t->nrows * t->ncols;
  for (size_t i = 0; i < t->ncols; i++) {
    row[i] = strdup(cells[i] && cells[i][0] ? cells[i] : "-");
    if (!row[i]) {
      while (i-- > 0) free(row[i]);
      return -ENOMEM;
    }
  }
  t->nrows++;
  return 0;
}

/* Characters, not bytes, so a name with accents does not skew its column. */
static size_t width(const char *s) {
  size_t w = 0;
  for (; *s; s++)
    if (((unsigned char)*s & 0xC0) != 0x80) w++;
  return w;
}

void fmt_table_print(const fmt_table_t *t, FILE *out) {
  size_t *w = calloc(t->ncols ? t->ncols : 1, sizeof(*w));
  if (!w) return;
  for (size_t r = 0; r < t->nrows; r++)
    for (size_t c = 0; c < t->ncols; c++) {
      size_t cw = width(t->cells[r * t->ncols + c]);
      if (cw > w[c]) w[c] = cw;
    }
  for (size_t r = 0; r < t->nrows; r++) {
    for (size_t c = 0; c < t->ncols; c++) {
      const char *cell = t->cells[r * t->ncols + c];
      fputs(cell, out);
      if (c + 1 < t->ncols) fprintf(out, "%*s", (int)(w[c] - width(cell) + 2), "");
    }
    fputc('\n', out);
  }
  free(w);
}

void fmt_table_release(fmt_table_t *t) {
  for (size_t i = 0; i < t->nrows * t->ncols; i++) free(t->cells[i]);
  free(t->cells);
  memset(t, 0, sizeof(*t));
}

/* ---- members as text ---- */

void fmt_field(const json_t *o, const char *key, char *buf, size_t n) {
  const json_t *v = json_object_get(o, key);
  buf[0] = '\0';
  if (json_is_string(v)) {
    snprintf(buf, n, "%s", json_string_value(v));
  } else if (json_is_integer(v)) {
    snprintf(buf, n, "%lld", (long long)json_integer_value(v));
  } else if (json_is_real(v)) {
    snprintf(buf, n, "%.15g", json_real_value(v));
  } else if (json_is_boolean(v)) {
    snprintf(buf, n, "%s", json_is_true(v) ? "yes" : "no");
  } else if (v && !json_is_null(v)) {
    char *s = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
    snprintf(buf, n, "%s", s ? s : "");
    free(s);
  }
}

void fmt_ms_field(const json_t *o, const char *key, char *buf, size_t n) {
  const json_t *v = json_object_get(o, key);
  buf[0] = '\0';
  if (json_is_integer(v)) fmt_local_time(json_integer_value(v), buf, n);
}

void fmt_iso_field(const json_t *o, const char *key, char *buf, size_t n) {
  const char *s = json_string_value(json_object_get(o, key));
  int64_t ms;
  buf[0] = '\0';
  if (!s) return;
  if (fmt_iso_to_ms(s, &ms) == 0)
    fmt_local_time(ms, buf, n);
  else
    snprintf(buf, n, "%s", s);
}

void fmt_pairs_field(const json_t *o, const char *key, char *buf, size_t n) {
  const json_t *obj = json_object_get(o, key);
  const char *k;
  const json_t *v;
  size_t len = 0;
  buf[0] = '\0';
  json_object_foreach((json_t *)obj, k, v) {
    char val[512];
    fmt_field(obj, k, val, sizeof(val));
    int w = snprintf(buf + len, n - len, "%s%s=%s", len ? ", " : "", k, val);
    if (w < 0 || (size_t)w >= n - len) break;
    len += (size_t)w;
  }
}

static int ends_with(const char *s, const char *end) {
  size_t ls = strlen(s), le = strlen(end);
  return ls > le && !strcmp(s + ls - le, end);
}

void fmt_auto_field(const json_t *o, const char *key, char *buf, size_t n) {
  const json_t *v = json_object_get(o, key);
  if (ends_with(key, "_ms"))
    fmt_ms_field(o, key, buf, n);
  else if (ends_with(key, "_at"))
    fmt_iso_field(o, key, buf, n);
  else if (json_is_object(v))
    fmt_pairs_field(o, key, buf, n);
  else if (json_is_array(v) && !json_array_size(v))
    buf[0] = '\0';
  else
    fmt_field(o, key, buf, n);
}

/* ---- the printers ---- */

static void cell(const json_t *o, const fmt_col_t *col, char *buf, size_t n) {
  (col->cell ? col->cell : fmt_auto_field)(o, col->key, buf, n);
}

/* The indent rides on the first column: every line starts with it, and
 * the columns after it stay aligned. */
int fmt_json_table(FILE *out, const json_t *rows, size_t from, const fmt_col_t *cols,
                   size_t ncols, const char *indent) {
  if (!ncols || ncols > FMT_NCOLS_MAX) return -EINVAL;
  char c[FMT_NCOLS_MAX][FMT_CELL_MAX];
  const char *row[FMT_NCOLS_MAX];
  size_t lead = indent ? strlen(indent) : 0;
  if (lead >= FMT_CELL_MAX / 2) return -EINVAL;
  for (size_t i = 0; i < ncols; i++) {
    snprintf(c[i], sizeof(c[i]), "%s%s", i ? "" : indent ? indent : "", cols[i].label);
    row[i] = c[i];
  }
  fmt_table_t t;
  int rc = fmt_table_init(&t, ncols, row);
  for (size_t r = from; !rc && r < json_array_size(rows); r++) {
    const json_t *o = json_array_get(rows, r);
    for (size_t i = 0; i < ncols; i++) {
      size_t skip = i ? 0 : lead;
      cell(o, &cols[i], c[i] + skip, sizeof(c[i]) - skip);
      if (skip) memcpy(c[i], indent, skip);
    }
    rc = fmt_table_add(&t, row);
  }
  if (!rc) fmt_table_print(&t, out);
  fmt_table_release(&t);
  return rc;
}

void fmt_json_fields(FILE *out, const json_t *o, const fmt_col_t *cols, size_t ncols,
                     int width) {
  char v[4096];
  for (size_t i = 0; i < ncols; i++) {
    cell(o, &cols[i], v, sizeof(v));
    fprintf(out, "%-*s %s\n", width, cols[i].label, v[0] ? v : "-");
  }
}
