/* The wall clock as spiderd stores every time: UTC milliseconds since the
 * epoch (DESIGN: time). */
#ifndef SPIDERD_CLOCK_H
#define SPIDERD_CLOCK_H

#include <stdint.h>

int64_t clock_wall_ms(void);

/* A duration setting in seconds as milliseconds: 0 for none (not > 0),
 * at most ten years (beyond it a timeout means "never", and int64 math on
 * it stays safe). */
int64_t clock_secs_ms(double s);

#endif
