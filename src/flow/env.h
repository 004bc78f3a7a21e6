/* The environment and argv prefix of runner processes (crawls and spider
 * listings), as Scrapyd's environ.py builds them.
 *
 * Ownership: returns a malloc'd NULL-terminated array of malloc'd "K=V"
 * strings; free it with env_free().
 */
#ifndef SPIDERD_FLOW_ENV_H
#define SPIDERD_FLOW_ENV_H

#include "config.h"

/* A copy of the daemon's environment (environ) plus, replacing any
 * variable of the same name:
 *   PYTHONPATH=<cfg->pythonpath>[:<inherited PYTHONPATH>]
 *   SCRAPY_PROJECT=<project>
 *   SPIDERD_EGG=<egg_path>            when egg_path != NULL
 *   SCRAPYD_EGG_VERSION=<version>     when version != NULL (raw, as sent)
 *   SCRAPY_SETTINGS_MODULE=<module>   when project is in [settings]
 * then each "K=V" of extra (NULL-terminated, may be NULL), also replacing.
 * Returns NULL on allocation failure. */
char **env_build(const config_t *cfg, const char *project, const char *egg_path,
                 const char *version, const char *const *extra);
void env_free(char **env);

#endif
