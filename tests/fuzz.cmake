# The API fuzz driver (tests/fuzz/). Always built as a CTest test replaying
# the committed corpus; with clang and -DTSLAB_FUZZ=ON also as a libFuzzer
# binary, fuzz_api (run by scripts/ci/40-fuzz.sh).
option(TSLAB_FUZZ "Build the libFuzzer target (clang only)" OFF)

tslab_add_test(test_fuzz_replay
  SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_api.c ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/replay_main.c
  LABELS fuzz TIMEOUT 300)
target_compile_definitions(test_fuzz_replay PRIVATE
  TSLAB_FUZZ_CORPUS="${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus")

# Defects the fuzzer found, each with the test that failed before its fix.
tslab_add_test(test_fuzz_regressions SOURCES test_fuzz_regressions.c LABELS fuzz TIMEOUT 120)

if(TSLAB_FUZZ AND CMAKE_C_COMPILER_ID MATCHES "Clang")
  # A copy of the library instrumented for coverage feedback, so the fuzzer
  # is guided by the allocator's branches and the other targets stay as they are.
  add_library(tslab_fuzz_objects OBJECT ${TSLAB_SOURCES})
  target_include_directories(tslab_fuzz_objects
    PUBLIC ${PROJECT_SOURCE_DIR}/include PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_compile_definitions(tslab_fuzz_objects PRIVATE _GNU_SOURCE TSLAB_DEBUG=1)
  target_compile_options(tslab_fuzz_objects PRIVATE -fvisibility=hidden
    -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined)
  add_executable(fuzz_api ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/fuzz_api.c
    $<TARGET_OBJECTS:tslab_fuzz_objects>)
  target_include_directories(fuzz_api PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/src)
  target_compile_definitions(fuzz_api PRIVATE _GNU_SOURCE)
  target_compile_options(fuzz_api PRIVATE -fsanitize=fuzzer,address,undefined
    -fno-sanitize-recover=undefined)
  target_link_options(fuzz_api PRIVATE -fsanitize=fuzzer,address,undefined)
  target_link_libraries(fuzz_api PRIVATE Threads::Threads)
elseif(TSLAB_FUZZ)
  message(WARNING "TSLAB_FUZZ needs clang; only the corpus replay test is built")
endif()
