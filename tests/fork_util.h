/* Helpers of the fork tests (tests/test_fork.c, tests/test_fork_repair.c).
 * A child reports through its exit status and, for tslab_check, a line on
 * stderr written with write(2): another thread of the parent may have held
 * stdio's lock at the fork. */
#ifndef TSLAB_FORK_UTIL_H
#define TSLAB_FORK_UTIL_H

#include <errno.h>
#include <stdio.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tslab.h"

/* Wait for pid up to deadline_s seconds; kill it when it hangs. 1 when it
 * ended by itself. */
static int fork_wait_child(pid_t pid, int* status, int deadline_s) {
  struct timespec start, now, nap = {0, 2000000};
  clock_gettime(CLOCK_MONOTONIC, &start);
  for (;;) {
    pid_t r = waitpid(pid, status, WNOHANG);
    if (r == pid) return 1;
    if (r < 0 && errno != EINTR) return 0;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec - start.tv_sec > deadline_s) {
      kill(pid, SIGKILL);
      waitpid(pid, status, 0);
      return 0;
    }
    nanosleep(&nap, NULL);
  }
}

/* Fork; the child runs `child` and exits with its result. The parent waits
 * up to deadline_s seconds: 1 when the child ended by itself, its status in
 * *status. */
static int fork_run_child(int (*child)(void), int* status, int deadline_s) {
  pid_t pid = fork();
  if (pid < 0) return 0;
  if (pid == 0) _exit(child());
  return fork_wait_child(pid, status, deadline_s);
}

/* Whether a child waited for with fork_wait_child (`done`) exited with 0;
 * says what it did instead on stderr. */
static int fork_child_passed(const char* what, int done, int status) {
  if (done && WIFEXITED(status) && WEXITSTATUS(status) == 0) return 1;
  fprintf(stderr, "%s: child %s %d\n", what, done && WIFEXITED(status) ? "exited with" : "hung or was killed",
          done && WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  return 0;
}

/* Child: whether the instance passes tslab_check (its report on stderr if
 * not). */
static int fork_child_consistent(tslab_t* a) {
  char report[256];
  if (!tslab_check(a, report, sizeof report)) return 1;
  (void)!write(2, report, strnlen(report, sizeof report));
  (void)!write(2, "\n", 1);
  return 0;
}

#endif
