/* dlopen and dlclose of a library that allocates, over and over, from the
 * main thread and from threads: its constructor's and destructor's
 * allocations, dynamic TLS, and blocks it returned, freed after dlclose.
 * With a second argument, a C++ library loaded the same way into this C
 * program: its C++ runtime comes in after the drop-in, and operator new's
 * failure must still reach its new-handler and std::bad_alloc. */
#include <pthread.h>
#include <string.h>

#include "test_util.h"
#include "dropin_sym.h"

static const char* plugin_path;

static int round_trip(void) {
  void* h = dlopen(plugin_path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  char* (*make)(size_t) = (char* (*)(size_t))dlsym(h, "plugin_make");
  if (!make) return 1;
  char* s = make(100);
  int bad = !s || strlen(s) != 100 || s[0] != 'p';
  dlclose(h);
  free(s); /* outlives the library that allocated it */
  return bad;
}

static void* thread_round_trips(void* arg) {
  (void)arg;
  int bad = 0;
  for (int i = 0; i < 20; i++) bad |= round_trip();
  return (void*)(size_t)bad;
}

/* The C++ library's own checks (tests/dropin/dropin_cxx_plugin.cpp). */
static int cxx_plugin(const char* path) {
  void* h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return -1;
  }
  int (*check)(void) = (int (*)(void))dlsym(h, "cxx_plugin_check");
  int r = check ? check() : -2;
  dlclose(h);
  return r;
}

int main(int argc, char** argv) {
  REQUIRE(argc == 2 || argc == 3);
  plugin_path = argv[1];
  if (argc == 3) CHECK_EQ_U(cxx_plugin(argv[2]), 0);
  REQUIRE(SYM(tslab_malloc_instance)() != NULL);
  for (int i = 0; i < 50; i++) CHECK(round_trip() == 0);
  pthread_t t[3];
  for (int i = 0; i < 3; i++) REQUIRE(pthread_create(&t[i], NULL, thread_round_trips, NULL) == 0);
  for (int i = 0; i < 3; i++) {
    void* r;
    pthread_join(t[i], &r);
    CHECK(r == NULL);
  }
  tslab_malloc_stats_t m;
  SYM(tslab_malloc_stats)(&m);
  CHECK_EQ_U(m.foreign_frees, 0);
  DROPIN_CHECK_CONSISTENT();
  TEST_DONE();
}
