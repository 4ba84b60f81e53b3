# The core allocator (src/): one test per contract line of docs/ARCHITECTURE.md
# and ../DESIGN.md section 2, bad input included.
tslab_add_test(test_core_api SOURCES test_core_api.c LABELS core TIMEOUT 120)
tslab_add_test(test_core_epochs SOURCES test_core_epochs.c LABELS core TIMEOUT 120)
tslab_add_test(test_core_reclaim SOURCES test_core_reclaim.c LABELS core TIMEOUT 300)
tslab_add_test(test_core_threads SOURCES test_core_threads.c LABELS core concurrency TIMEOUT 600)
