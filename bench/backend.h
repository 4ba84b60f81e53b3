/* The allocator under test, as the workloads see it.
 *
 * Every workload in workloads.c is written once against this interface; each
 * benchmark binary links exactly one backend file (be_*.c) and the library it
 * wraps, so the peers' malloc replacements never collide in one process.
 *
 * A "phase" is a span of work whose objects die together: a request, a batch
 * of requests, a frame. tslab maps it to an epoch, peers in their phase-scoped
 * mode to a heap (mimalloc) or an arena (jemalloc), and peers in plain mode
 * ignore it. Objects allocated with be_alloc belong to no phase and may live
 * as long as the program wants.
 */
#ifndef BENCH_BACKEND_H
#define BENCH_BACKEND_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef uint64_t be_phase_t;

/* Allocator name as the report shows it, and the mode used when the
 * command line names none. */
extern const char* const be_name;
extern const char* const be_default_mode;

/* Select the mode ("plain", or the backend's phase-scoped mode such as
 * "epoch", "heap", "arena") and set the allocator up. Returns 0, or -1 when
 * this backend has no such mode. Called once, before any other thread runs. */
int be_init(const char* mode);

void* be_alloc(size_t size);
void be_free(void* p);

be_phase_t be_phase_begin(void);
void* be_phase_alloc(be_phase_t ph, size_t size);
void be_phase_free(be_phase_t ph, void* p);
void be_phase_end(be_phase_t ph);
/* End phase ph together with every object still live in it, in one call
 * (arena semantics: the objects are never freed one by one). Returns 0, or
 * -1 when the mode has no such operation (plain malloc/free). */
int be_phase_free_all(be_phase_t ph);

/* The command line's parameter key (key=value), or dflt: for a backend's own
 * settings (be_tslab.c: reserve_mib). */
const char* bench_param(const char* key, const char* dflt);

/* Library version, e.g. "5.3.0". */
const char* be_version(void);

/* Write backend-specific figures as JSON members (each preceded by a comma)
 * into the result object being printed; may write nothing. */
void be_report(FILE* out);

#endif
