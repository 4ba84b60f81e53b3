/* Game frames: one reusable frame domain per level, reclamation at level load.
 *
 * Every frame enters the same domain, allocates particles and render
 * commands, and frees them when the frame is presented. Closing the epoch
 * every frame would make the next frame fault its pages back in, so the frame
 * domain wraps the level's epoch instead: frames reuse the level's slabs and
 * no memory goes to the OS between frames. Loading the next level
 * force-closes the epoch, which returns all of it at once, outside the frame
 * budget. */
#include <stdint.h>
#include <string.h>

#include "example_check.h"
#include "tslab.h"

enum { LEVELS = 3, FRAMES = 120, MAX_PARTICLES = 20000, MAX_COMMANDS = 5000 };

typedef struct particle {
  float pos[3], vel[3], life, size;
  uint32_t color, flags;
  float pad[4];
} particle_t;

typedef struct command {
  uint32_t mesh, material;
  float transform[16];
  uint64_t sort_key;
  unsigned char uniforms[176];
} command_t;

static particle_t* particles[MAX_PARTICLES];
static command_t* commands[MAX_COMMANDS];

/* The busiest frame comes first, so later frames fit in what it used. */
static void run_frame(tslab_t* a, tslab_domain_t* frame, int f) {
  int np = MAX_PARTICLES - (f % 7) * 2000;
  int nc = MAX_COMMANDS - (f % 5) * 500;
  EXPECT(tslab_domain_enter(frame) == TSLAB_OK, "enter: %s", tslab_strerror(tslab_last_error()));
  for (int i = 0; i < np; i++) {
    particles[i] = tslab_domain_alloc(sizeof(particle_t));
    EXPECT(particles[i] != NULL, "particle: %s", tslab_strerror(tslab_last_error()));
    particles[i]->life = 1.0f;
  }
  for (int i = 0; i < nc; i++) {
    commands[i] = tslab_domain_alloc(sizeof(command_t));
    EXPECT(commands[i] != NULL, "command: %s", tslab_strerror(tslab_last_error()));
    commands[i]->sort_key = (uint64_t)i;
  }
  /* Present, then the frame's data is gone. */
  for (int i = 0; i < np; i++) EXPECT(tslab_free(a, particles[i]), "free particle");
  for (int i = 0; i < nc; i++) EXPECT(tslab_free(a, commands[i]), "free command");
  EXPECT(tslab_domain_exit(frame) == TSLAB_OK, "exit");
}

int main(void) {
  tslab_config_t cfg;
  tslab_config_init(&cfg);
  /* A hot reserve large enough to keep a whole frame's empty slabs
   * resident between frames; the level load gives it back. */
  cfg.pool_resident_max = 64u << 20;
  tslab_t* a = tslab_create(&cfg);
  EXPECT(a != NULL, "create: %s", tslab_strerror(tslab_last_error()));

  for (int level = 0; level < LEVELS; level++) {
    tslab_epoch_t level_era = tslab_epoch_advance(a);
    char label[TSLAB_LABEL_MAX];
    snprintf(label, sizeof label, "level-%d", level);
    EXPECT(tslab_epoch_set_label(a, level_era, label) == TSLAB_OK, "label");
    tslab_domain_t* frame = tslab_domain_wrap(a, level_era);
    EXPECT(frame != NULL, "wrap: %s", tslab_strerror(tslab_last_error()));

    run_frame(a, frame, 0);
    tslab_stats_global_t first;
    EXPECT(tslab_stats_global(a, &first) == TSLAB_OK, "stats");
    for (int f = 1; f < FRAMES; f++) {
      run_frame(a, frame, f);
      tslab_stats_global_t g;
      EXPECT(tslab_stats_global(a, &g) == TSLAB_OK, "stats");
      EXPECT(tslab_epoch_status(a, level_era) == TSLAB_OK, "the level's epoch stays open");
      EXPECT(g.release_calls_total == first.release_calls_total,
             "no memory returned to the OS between frames (frame %d)", f);
      EXPECT(g.committed_bytes == first.committed_bytes,
             "frames reuse the first frame's memory (frame %d: %.2f vs %.2f MiB)", f,
             MIB(g.committed_bytes), MIB(first.committed_bytes));
      EXPECT(g.live_objects == 0, "frame data freed");
    }

    /* Level load: the deferred reclamation happens here: the level's epoch
     * closes, and the reserve the frames recycled goes back. */
    uint64_t rss_before = tslab_process_rss();
    EXPECT(tslab_domain_force_close(frame) == TSLAB_OK, "force-close");
    tslab_reserve_release(a);
    uint64_t rss_after = tslab_process_rss();
    tslab_stats_epoch_t es;
    EXPECT(tslab_stats_epoch(a, level_era, &es) == TSLAB_OK, "epoch stats");
    tslab_stats_global_t g;
    EXPECT(tslab_stats_global(a, &g) == TSLAB_OK, "stats");
    printf("level %d: %d frames, level load released %.2f MiB (rss %.2f -> %.2f MiB)\n", level,
           FRAMES, MIB(es.released_at_close_bytes), MIB(rss_before), MIB(rss_after));
    EXPECT(g.release_calls_total > first.release_calls_total, "the level load returned memory");
    EXPECT(es.rss_estimate_bytes == 0, "nothing of the level stays resident");
    EXPECT(rss_before >= rss_after + (2u << 20), "process RSS dropped by at least 2 MiB");
    EXPECT(tslab_domain_destroy(frame) == TSLAB_OK, "destroy");
  }
  EXPECT(tslab_check(a, NULL, 0) == 0, "allocator consistent");
  tslab_destroy(a);
  printf("ok\n");
  return 0;
}
