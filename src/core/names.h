/* Names that become paths (project, spider, job id, version) and the order of
 * versions.
 *
 * Ownership: version_sanitize returns a malloc'd string the caller frees.
 */
#ifndef SPIDERD_CORE_NAMES_H
#define SPIDERD_CORE_NAMES_H

#include <stddef.h>

/* Is s a safe single path component for a project, spider or job id?
 * Refused: empty, longer than 200 bytes, ".", "..", containing "/", "\\",
 * "..", a NUL or any control character (< 0x20, 0x7f), or not valid UTF-8.
 * On refusal writes a person-readable reason into err (may be NULL), e.g.
 * "job id '../x' must not contain '/' or '..'". `what` names the field
 * ("project", "spider", "job id") in the message. */
int name_valid(const char *what, const char *s, char *err, size_t errlen);

/* Scrapyd's version -> file stem: every byte outside [A-Za-z0-9_-] becomes
 * '_' ("1.0" -> "1_0", "v 1/x.y" -> "v_1_x_y"). NULL on allocation failure. */
char *version_sanitize(const char *version);

/* Orders sanitized version stems so that the latest sorts last, fixing
 * Scrapyd's alphabetical fallback. A stem is read as PEP 440 with '_' standing
 * for '.': release numbers compared numerically ("1_5" < "2_0" < "10_0"),
 * pre-releases (a, b, rc, also "alpha", "beta", "c", "pre", "preview") and dev
 * releases before their release ("2_0rc1" < "2_0", "2_0_dev1" < "2_0a1"),
 * post releases after ("2_0_post1" > "2_0"), an optional leading "v" ignored,
 * trailing zero segments not significant ("1_0" == "1"). Stems that are not
 * such versions sort before all versions, among themselves by natural order
 * (digit runs compared as numbers). Ties are broken by strcmp so the order is
 * total. Returns <0, 0, >0 like strcmp. */
int version_compare(const char *a, const char *b);

/* qsort-compatible wrapper over an array of char*. */
int version_compare_qsort(const void *a, const void *b);

/* Is s valid UTF-8 (no overlongs, no surrogates)? len bytes. If not and err
 * is given, writes Python's message for the first bad byte, e.g.
 * "'utf-8' codec can't decode byte 0xc3 in position 0: invalid continuation byte". */
int utf8_valid(const char *s, size_t len, char *err, size_t errlen);

/* Length (1-4) of the valid UTF-8 sequence at s, given `left` bytes, or 0
 * when it is not valid (same rules as utf8_valid). */
size_t utf8_sequence(const char *s, size_t left);

#endif
