#include "clock.h"

#include <math.h>
#include <time.h>

int64_t clock_wall_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t clock_secs_ms(double s) {
  if (!(s > 0)) return 0;
  if (s > 315360000.0) s = 315360000.0;
  return (int64_t)llround(s * 1000.0);
}
