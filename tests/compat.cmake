# The seed-compatible API (include/slab_alloc.h, epoch_domain.h, slab_stats.h;
# src/compat.c, libtslab-compat).
tslab_add_test(test_compat SOURCES test_compat.c LIBS tslab_compat_static LABELS compat TIMEOUT 120)
tslab_add_test(test_compat_domain SOURCES test_compat_domain.c LIBS tslab_compat_static
  LABELS compat domain TIMEOUT 60)

# Each compatibility header is included first and alone in its own translation unit.
set(TSLAB_COMPAT_HEADER_PROBES
  test_compat_header_slab_alloc.c
  test_compat_header_epoch_domain.c
  test_compat_header_slab_stats.c)
set_source_files_properties(${TSLAB_COMPAT_HEADER_PROBES} PROPERTIES COMPILE_OPTIONS "-pedantic-errors")
tslab_add_test(test_compat_headers SOURCES test_compat_headers.c ${TSLAB_COMPAT_HEADER_PROBES}
  LIBS tslab_compat_static LABELS compat TIMEOUT 30)

# The same programs against the shared libtslab-compat, over the shared libtslab.
foreach(name test_compat test_compat_domain)
  add_executable(${name}_shared ${name}.c)
  target_link_libraries(${name}_shared PRIVATE tslab_compat Threads::Threads)
  target_include_directories(${name}_shared PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_compile_definitions(${name}_shared PRIVATE _GNU_SOURCE)
  add_test(NAME ${name}_shared COMMAND ${name}_shared)
  set_tests_properties(${name}_shared PROPERTIES LABELS compat TIMEOUT 120)
endforeach()
