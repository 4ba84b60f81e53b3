# The drop-in malloc (src/malloc, include/tslab_malloc.h, docs/DROPIN.md).
# Programs run under LD_PRELOAD of libtslab-malloc.so without being linked
# to it, and linked with it (shared, first; static), and look up the
# drop-in's functions at run time (tests/dropin/dropin_sym.h).
#
# An allocator that replaces malloc cannot run beside AddressSanitizer or
# ThreadSanitizer, which own malloc themselves: sanitizer builds do not
# build the drop-in, and its tests skip with a message.
set(DROPIN_TESTS test_dropin_malloc test_dropin_scope test_dropin_fork test_dropin_threads test_dropin_ring
  test_dropin_dlopen test_dropin_cxx test_dropin_malloc_linked test_dropin_malloc_static
  test_dropin_scope_static test_dropin_options test_dropin_namesakes test_dropin_namesakes_linked
  test_dropin_namesakes_static test_dropin_compat test_dropin_compat_domain test_dropin_compat_static
  test_dropin_compat_domain_static)

if(NOT TARGET tslab_malloc)
  foreach(name ${DROPIN_TESTS})
    add_test(NAME ${name} COMMAND sh -c
      "echo 'skipped: the drop-in malloc is not built in sanitizer builds'; exit 77")
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 LABELS dropin)
  endforeach()
  return()
endif()

set(DROPIN_DIR ${CMAKE_CURRENT_SOURCE_DIR}/dropin)

# tslab_add_dropin_test(NAME SOURCE [LINK shared|static] [ARGS ...])
function(tslab_add_dropin_test name source)
  cmake_parse_arguments(T "" "LINK" "ARGS" ${ARGN})
  add_executable(${name} ${source})
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/include ${PROJECT_SOURCE_DIR}/tests
    ${DROPIN_DIR})
  target_compile_definitions(${name} PRIVATE _GNU_SOURCE)
  # The test exercises the allocation calls themselves.
  target_compile_options(${name} PRIVATE -fno-builtin)
  if(T_LINK STREQUAL "shared")
    target_link_libraries(${name} PRIVATE tslab_malloc)
  elseif(T_LINK STREQUAL "static")
    target_link_libraries(${name} PRIVATE tslab_malloc_static)
    set_target_properties(${name} PROPERTIES ENABLE_EXPORTS ON)
  endif()
  target_link_libraries(${name} PRIVATE Threads::Threads ${CMAKE_DL_LIBS})
  add_test(NAME ${name} COMMAND ${name} ${T_ARGS})
  set_tests_properties(${name} PROPERTIES TIMEOUT 120 LABELS dropin)
  if(NOT T_LINK)
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:tslab_malloc>")
  endif()
endfunction()

tslab_add_dropin_test(test_dropin_malloc ${DROPIN_DIR}/test_dropin_malloc.c)
tslab_add_dropin_test(test_dropin_malloc_linked ${DROPIN_DIR}/test_dropin_malloc.c LINK shared)
tslab_add_dropin_test(test_dropin_malloc_static ${DROPIN_DIR}/test_dropin_malloc.c LINK static)
tslab_add_dropin_test(test_dropin_scope ${DROPIN_DIR}/test_dropin_scope.c)
tslab_add_dropin_test(test_dropin_scope_static ${DROPIN_DIR}/test_dropin_scope.c LINK static)
tslab_add_dropin_test(test_dropin_fork ${DROPIN_DIR}/test_dropin_fork.c)
tslab_add_dropin_test(test_dropin_threads ${DROPIN_DIR}/test_dropin_threads.c)
tslab_add_dropin_test(test_dropin_ring ${DROPIN_DIR}/test_dropin_ring.c)
set_tests_properties(test_dropin_ring PROPERTIES
  ENVIRONMENT "LD_PRELOAD=$<TARGET_FILE:tslab_malloc>;TSLAB_EPOCH_RING_SIZE=4")

include(CheckLanguage)
check_language(CXX)
if(CMAKE_CXX_COMPILER)
  enable_language(CXX)
endif()

add_library(dropin_plugin MODULE ${DROPIN_DIR}/dropin_plugin.c)
set(dlopen_args $<TARGET_FILE:dropin_plugin>)
if(CMAKE_CXX_COMPILER)
  # A C++ library for this C program to load: its C++ runtime comes in late.
  add_library(dropin_cxx_plugin MODULE ${DROPIN_DIR}/dropin_cxx_plugin.cpp)
  list(APPEND dlopen_args $<TARGET_FILE:dropin_cxx_plugin>)
endif()
tslab_add_dropin_test(test_dropin_dlopen ${DROPIN_DIR}/test_dropin_dlopen.c ARGS ${dlopen_args})
add_dependencies(test_dropin_dlopen dropin_plugin)
if(CMAKE_CXX_COMPILER)
  add_dependencies(test_dropin_dlopen dropin_cxx_plugin)
endif()

# A library of the program's with functions named like the seed's API.
add_library(dropin_namesakes SHARED ${DROPIN_DIR}/dropin_namesakes.c)
tslab_add_dropin_test(test_dropin_namesakes ${DROPIN_DIR}/test_dropin_namesakes.c)
tslab_add_dropin_test(test_dropin_namesakes_linked ${DROPIN_DIR}/test_dropin_namesakes.c LINK shared)
tslab_add_dropin_test(test_dropin_namesakes_static ${DROPIN_DIR}/test_dropin_namesakes.c LINK static)
foreach(t test_dropin_namesakes test_dropin_namesakes_linked test_dropin_namesakes_static)
  target_link_libraries(${t} PRIVATE dropin_namesakes)
endforeach()

# The seed's compatibility API (libtslab-compat, over the shared libtslab)
# with a second copy of the core in the process: the drop-in preloaded, or
# linked statically first. The errors the compatibility functions report
# must reach the program whichever copy failed.
foreach(t compat compat_domain)
  tslab_add_dropin_test(test_dropin_${t} ${CMAKE_CURRENT_SOURCE_DIR}/test_${t}.c)
  tslab_add_dropin_test(test_dropin_${t}_static ${CMAKE_CURRENT_SOURCE_DIR}/test_${t}.c LINK static)
  target_link_libraries(test_dropin_${t} PRIVATE tslab_compat)
  target_link_libraries(test_dropin_${t}_static PRIVATE tslab_compat)
endforeach()

# The TSLAB_* variables, by their effect on a program run under the drop-in.
find_package(Python3 COMPONENTS Interpreter)
add_executable(dropin_probe ${DROPIN_DIR}/dropin_probe.c)
target_include_directories(dropin_probe PRIVATE ${PROJECT_SOURCE_DIR}/include)
target_link_libraries(dropin_probe PRIVATE ${CMAKE_DL_LIBS})
if(Python3_FOUND)
  add_test(NAME test_dropin_options COMMAND ${Python3_EXECUTABLE} ${DROPIN_DIR}/check_options.py
    $<TARGET_FILE:tslab_malloc> $<TARGET_FILE:dropin_probe>)
else()
  add_test(NAME test_dropin_options COMMAND sh -c "echo 'skipped: no python3'; exit 77")
  set_tests_properties(test_dropin_options PROPERTIES SKIP_RETURN_CODE 77)
endif()
set_tests_properties(test_dropin_options PROPERTIES TIMEOUT 120 LABELS dropin)

if(CMAKE_CXX_COMPILER)
  tslab_add_dropin_test(test_dropin_cxx ${DROPIN_DIR}/test_dropin_cxx.cpp)
  set_target_properties(test_dropin_cxx PROPERTIES CXX_STANDARD 17 CXX_STANDARD_REQUIRED ON)
else()
  add_test(NAME test_dropin_cxx COMMAND sh -c "echo 'skipped: no C++ compiler'; exit 77")
  set_tests_properties(test_dropin_cxx PROPERTIES SKIP_RETURN_CODE 77 LABELS dropin)
endif()
