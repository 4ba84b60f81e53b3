/* peak_rss: run a program and write its peak resident set size in bytes and
 * its wall time in seconds to a file, on one line. Linux keeps a process's
 * peak RSS across exec, so a program started directly by the (much larger)
 * benchmark driver would report the driver's footprint; started from this
 * small launcher it reports its own. The time is taken here too, from the
 * fork to the reaping wait: a driver that waits with a timeout polls, and
 * its clock would round every run up to its polling step (Python's waits by
 * up to 50 ms, as much as a whole run of the shorter programs).
 *
 * Usage: peak_rss OUTFILE PROGRAM [ARG...]   (exits with the program's status) */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  double t0 = now();
  pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    execvp(argv[2], argv + 2);
    _exit(127);
  }
  /* A termination request to the process group (the launcher leads one:
   * the driver starts it in a session of its own) stops the program while
   * the launcher stays to report it. */
  signal(SIGTERM, SIG_IGN);
  int status;
  struct rusage ru;
  while (wait4(pid, &status, 0, &ru) < 0) {
  }
  double seconds = now() - t0;
  FILE* f = fopen(argv[1], "w");
  if (f) {
    fprintf(f, "%ld %.6f\n", ru.ru_maxrss * 1024L, seconds);
    fclose(f);
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}
