# The seed-compatible API (include/slab_alloc.h, epoch_domain.h, slab_stats.h; src/compat.c).
tslab_add_test(test_compat SOURCES test_compat.c LABELS compat TIMEOUT 120)
tslab_add_test(test_compat_domain SOURCES test_compat_domain.c LABELS compat domain TIMEOUT 60)

# Each compatibility header is included first and alone in its own translation unit.
set(TSLAB_COMPAT_HEADER_PROBES
  test_compat_header_slab_alloc.c
  test_compat_header_epoch_domain.c
  test_compat_header_slab_stats.c)
set_source_files_properties(${TSLAB_COMPAT_HEADER_PROBES} PROPERTIES COMPILE_OPTIONS "-pedantic-errors")
tslab_add_test(test_compat_headers SOURCES test_compat_headers.c ${TSLAB_COMPAT_HEADER_PROBES}
  LABELS compat TIMEOUT 30)
