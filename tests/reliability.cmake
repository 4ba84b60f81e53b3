# Reliability tests (docs/TESTING.md): fault injection, fork, thread churn,
# destroy, and a short soak run (scripts/ci/60-soak.sh runs the long one).
tslab_add_test(test_fault SOURCES test_fault.c LABELS reliability TIMEOUT 120)
# The defects found by the review of version 0.1, one test each (issue 15).
tslab_add_test(test_regressions SOURCES test_regressions.c LABELS reliability concurrency TIMEOUT 300)
tslab_add_test(test_fork SOURCES test_fork.c LABELS reliability TIMEOUT 300)
tslab_add_test(test_fork_repair SOURCES test_fork_repair.c LABELS reliability TIMEOUT 300)
tslab_add_test(test_thread_churn SOURCES test_thread_churn.c LABELS reliability TIMEOUT 300)
tslab_add_test(test_destroy SOURCES test_destroy.c LABELS reliability TIMEOUT 300)
# A close racing with a remote free of its last live block object.
tslab_add_test(test_close_race SOURCES test_close_race.c LABELS reliability concurrency TIMEOUT 300)
tslab_add_test(soak SOURCES soak.c LABELS soak TIMEOUT 120)
