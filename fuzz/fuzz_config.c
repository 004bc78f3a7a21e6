/* The configuration loader (config*.c): an INI file as scrapyd.conf (every
 * section: [scrapyd], [spiderd], [services], [settings], [retention],
 * [concurrency]), then, after a line "%%", command-line arguments one per
 * line ("--set spiderd.max_proc=4", "--port", "6801", ...); a line
 * "ENV:NAME=VALUE" sets an environment variable instead (SPIDERD_MAX_PROC,
 * SCRAPYD_HTTP_PORT, ...), unset again afterwards. Loaded the way `spiderd
 * serve` loads it, secrets included, then queried. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "fuzz.h"

extern char **environ;

static char conf_path[256];

static void init(void) {
  /* only the input decides: no SPIDERD_* / SCRAPYD_* from the environment */
  for (int again = 1; again;) {
    again = 0;
    for (char **e = environ; *e; e++)
      if (!strncmp(*e, "SPIDERD_", 8) || !strncmp(*e, "SCRAPYD_", 8)) {
        char name[256];
        size_t n = strcspn(*e, "=");
        snprintf(name, sizeof(name), "%.*s", (int)n, *e);
        unsetenv(name);
        again = 1;
        break;
      }
  }
  snprintf(conf_path, sizeof(conf_path), "%s/scrapyd.conf", fuzz_tmpdir());
  setenv("SPIDERD_CONFIG_FILES", conf_path, 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!conf_path[0]) init();
  if (size > 65536) return 0;
  char *buf = fuzz_strndup(data, size);
  char *args = strstr(buf, "\n%%\n");
  if (args) {
    *args = '\0';
    args += 4;
  }
  FILE *f = fopen(conf_path, "w");
  if (!f) abort();
  fwrite(buf, 1, strlen(buf), f);
  fclose(f);

  char *argv[64], *envs[16];
  int argc = 0, nenv = 0;
  for (char *p = args; p && *p && argc < 63;) {
    char *nl = strchr(p, '\n');
    if (nl) *nl = '\0';
    /* only the daemon's own variables, and not the list of files */
    char *eq = !strncmp(p, "ENV:", 4) && (!strncmp(p + 4, "SPIDERD_", 8) ||
                                          !strncmp(p + 4, "SCRAPYD_", 8)) &&
                       strncmp(p + 4, "SPIDERD_CONFIG_FILES=", 21)
                   ? strchr(p + 4, '=')
                   : NULL;
    if (eq && eq > p + 4 && nenv < 16) {
      *eq = '\0';
      if (!setenv(p + 4, eq + 1, 1)) envs[nenv++] = p + 4;
    } else {
      argv[argc++] = p;
    }
    p = nl ? nl + 1 : NULL;
  }
  argv[argc] = NULL;

  config_t c;
  char err[1024];
  if (!config_load(&c, argc, argv, err, sizeof(err))) {
    config_load_secrets(&c, err, sizeof(err));
    char red[512];
    config_redact_url(c.store, red, sizeof(red));
    config_service_enabled(&c, "schedule.json");
    config_project_settings(&c, "default");
    config_max_proc(&c);
    config_items_remote(&c);
    config_release(&c);
  }
  /* secrets leave the environment once read: keep the next run clean */
  unsetenv("SPIDERD_STORE_PASSWORD");
  for (int i = 0; i < nenv; i++) unsetenv(envs[i]);
  free(buf);
  return 0;
}
