# The core allocator (src/): one test per contract line of docs/ARCHITECTURE.md
# and ../DESIGN.md section 2, bad input included.
tslab_add_test(test_core_api SOURCES test_core_api.c LABELS core TIMEOUT 120)
tslab_add_test(test_core_epochs SOURCES test_core_epochs.c LABELS core TIMEOUT 120)
tslab_add_test(test_core_reclaim SOURCES test_core_reclaim.c LABELS core TIMEOUT 300)
tslab_add_test(test_core_threads SOURCES test_core_threads.c LABELS core concurrency TIMEOUT 600)
tslab_add_test(test_core_free_all SOURCES test_core_free_all.c LABELS core concurrency TIMEOUT 300)

# Install rules: a user program builds against the installed library with
# find_package(tslab) and with pkg-config; only the public API is exported.
add_test(NAME test_install
  COMMAND ${CMAKE_CURRENT_SOURCE_DIR}/install/check_install.sh ${PROJECT_SOURCE_DIR}
          ${CMAKE_CURRENT_BINARY_DIR}/install-check)
set_tests_properties(test_install PROPERTIES LABELS "core;install" TIMEOUT 300)
tslab_add_test(test_core_stats SOURCES test_core_stats.c LABELS core TIMEOUT 120)
