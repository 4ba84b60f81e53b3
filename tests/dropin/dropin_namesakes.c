/* A library of the program's, linked into test_dropin_namesakes, whose
 * functions share names with the seed's compatibility API that the core
 * implements (now_ns, epoch_close, slab_free): the drop-in must not take
 * their place (src/malloc/exports.map). Its own signatures on purpose. */
#include <stdint.h>

uint64_t now_ns(void);
int epoch_close(int id);
int slab_free(const char* name);

uint64_t now_ns(void) { return 42; }
int epoch_close(int id) { return id + 1; }
int slab_free(const char* name) { return name[0]; }
