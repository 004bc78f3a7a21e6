/* The wall clock as spiderd stores every time: UTC milliseconds since the
 * epoch (DESIGN: time). */
#ifndef SPIDERD_CLOCK_H
#define SPIDERD_CLOCK_H

#include <stdint.h>

int64_t clock_wall_ms(void);

#endif
