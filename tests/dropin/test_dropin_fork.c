/* fork under the drop-in: while other threads allocate and free, the child
 * can allocate (from several threads of its own), free memory of the
 * parent, run a program (fork + exec through system()), and exit cleanly;
 * the parent goes on as before. */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_util.h"
#include "dropin_sym.h"

static atomic_bool stop;

static void* churn(void* arg) {
  (void)arg;
  void* keep[64] = {0};
  for (unsigned i = 0; !atomic_load(&stop); i++) {
    unsigned k = i % 64;
    free(keep[k]);
    keep[k] = malloc(16 + (i * 37) % 3000);
    if (keep[k]) memset(keep[k], (int)k, 16);
  }
  for (int k = 0; k < 64; k++) free(keep[k]);
  return NULL;
}

static void* child_worker(void* arg) {
  char** blocks = arg;
  for (int i = 0; i < 1000; i++) {
    blocks[i] = malloc(24 + (size_t)i);
    if (!blocks[i]) return (void*)1;
    memset(blocks[i], 1, 24);
  }
  for (int i = 0; i < 1000; i++) free(blocks[i]);
  return NULL;
}

static int child(char* parent_block) {
  if (strcmp(parent_block, "from the parent") != 0) return 2;
  free(parent_block);
  static char* blocks[4][1000];
  pthread_t t[4];
  for (int i = 0; i < 4; i++)
    if (pthread_create(&t[i], NULL, child_worker, blocks[i]) != 0) return 3;
  for (int i = 0; i < 4; i++) {
    void* r;
    pthread_join(t[i], &r);
    if (r) return 4;
  }
  if (system("exit 0") != 0) return 5;
  return 0;
}

int main(void) {
  REQUIRE(SYM(tslab_malloc_instance)() != NULL);
  pthread_t t[2];
  for (int i = 0; i < 2; i++) REQUIRE(pthread_create(&t[i], NULL, churn, NULL) == 0);
  for (int round = 0; round < 20; round++) {
    char* block = strdup("from the parent");
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) _exit(child(block));
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
      fprintf(stderr, "round %d: child status %d\n", round, status);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    CHECK(strcmp(block, "from the parent") == 0);
    free(block);
  }
  atomic_store(&stop, true);
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  DROPIN_CHECK_CONSISTENT();
  TEST_DONE();
}
