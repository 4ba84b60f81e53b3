/* Helper of check_options.py: under LD_PRELOAD of the drop-in, prints what
 * the process instance was configured with, allocates a little, and when
 * asked serves its metrics for a while (TSLAB_HTTP) before exiting.
 *
 * Usage: dropin_probe [SECONDS_TO_STAY] */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tslab_malloc.h"

int main(int argc, char** argv) {
  tslab_t* (*instance)(void) = (tslab_t * (*)(void)) dlsym(RTLD_DEFAULT, "tslab_malloc_instance");
  int (*global)(tslab_t*, tslab_stats_global_t*) =
      (int (*)(tslab_t*, tslab_stats_global_t*))dlsym(RTLD_DEFAULT, "tslab_stats_global");
  uint16_t (*port)(tslab_t*) = (uint16_t(*)(tslab_t*))dlsym(RTLD_DEFAULT, "tslab_http_port");
  if (!instance || !global || !port || !instance()) {
    fprintf(stderr, "no drop-in\n");
    return 1;
  }
  char* keep[100];
  for (int i = 0; i < 100; i++) keep[i] = malloc(100 + (size_t)i);
  tslab_stats_global_t g;
  if (global(instance(), &g) != TSLAB_OK) return 1;
  printf("reserved_bytes=%llu ring=%u http_port=%u\n", (unsigned long long)g.reserved_bytes,
         g.epoch_ring_size, (unsigned)port(instance()));
  fflush(stdout);
  if (argc > 1) sleep((unsigned)atoi(argv[1]));
  for (int i = 0; i < 100; i++) free(keep[i]);
  return 0;
}
