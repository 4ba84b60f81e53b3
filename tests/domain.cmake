# Epoch domains (include/tslab.h, src/domain.c).
tslab_add_test(test_domain SOURCES test_domain.c LABELS domain TIMEOUT 60)
tslab_add_test(test_domain_threads SOURCES test_domain_threads.c LABELS domain concurrency TIMEOUT 120)
