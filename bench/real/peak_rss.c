/* peak_rss: run a program and write its peak resident set size in bytes to
 * a file. Linux keeps a process's peak RSS across exec, so a program started
 * directly by the (much larger) benchmark driver would report the driver's
 * footprint; started from this small launcher it reports its own.
 *
 * Usage: peak_rss OUTFILE PROGRAM [ARG...]   (exits with the program's status) */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  pid_t pid = fork();
  if (pid < 0) return 2;
  if (pid == 0) {
    execvp(argv[2], argv + 2);
    _exit(127);
  }
  /* Forward a termination request to the program (the driver stops servers). */
  signal(SIGTERM, SIG_IGN);
  int status;
  struct rusage ru;
  while (wait4(pid, &status, 0, &ru) < 0) {
  }
  FILE* f = fopen(argv[1], "w");
  if (f) {
    fprintf(f, "%ld\n", ru.ru_maxrss * 1024L);
    fclose(f);
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}
