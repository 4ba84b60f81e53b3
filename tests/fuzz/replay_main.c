/* Runs the fuzz target on every file of the corpus directories given as
 * arguments (default: the committed corpus), so the normal test suite
 * exercises the driver with any compiler, sanitizers or not. Each input runs
 * in a child process, so one failing input (the driver aborts) does not hide
 * the others. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fuzz_api.h"

static int replay_file(const char* path) {
  FILE* f = fopen(path, "rb");
  if (!f) {
    perror(path);
    return 1;
  }
  static uint8_t buf[1 << 20];
  size_t n = fread(buf, 1, sizeof buf, f);
  fclose(f);
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    LLVMFuzzerTestOneInput(buf, n);
    exit(0); /* not _exit: LeakSanitizer checks at exit */
  }
  int status;
  if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    fprintf(stderr, "FAILED: %s\n", path);
    return 1;
  }
  return 0;
}

static int replay_dir(const char* dir) {
  struct dirent** names;
  int n = scandir(dir, &names, NULL, alphasort);
  if (n < 0) {
    perror(dir);
    return -1;
  }
  int files = 0;
  for (int i = 0; i < n; i++) {
    if (names[i]->d_name[0] != '.') {
      char path[4096];
      snprintf(path, sizeof path, "%s/%s", dir, names[i]->d_name);
      if (replay_file(path) != 0) {
        files = -1;
      } else if (files >= 0) {
        files++;
      }
    }
    free(names[i]);
  }
  free(names);
  return files;
}

int main(int argc, char** argv) {
  const char* dflt[] = {argv[0], TSLAB_FUZZ_CORPUS};
  if (argc < 2) {
    argc = 2;
    argv = (char**)dflt;
  }
  int total = 0;
  for (int i = 1; i < argc; i++) {
    int n = replay_dir(argv[i]);
    if (n <= 0) {
      fprintf(stderr, "%s: %s\n", argv[i], n == 0 ? "no corpus files" : "failures");
      return 1;
    }
    total += n;
  }
  printf("replayed %d inputs\nok\n", total);
  return 0;
}
