# The C++ layer (include/tslab.hpp): containers in epochs, typed pools,
# scopes, its thread-safety statements, the debug report of dropped slots,
# and the header under -fno-exceptions -fno-rtti. Needs a C++17 compiler.
if(CMAKE_CXX_COMPILER)
  tslab_add_test(test_cpp_resource SOURCES test_cpp_resource.cpp LABELS cpp TIMEOUT 60)
  tslab_add_test(test_cpp_pool SOURCES test_cpp_pool.cpp LABELS cpp TIMEOUT 60)
  tslab_add_test(test_cpp_scopes SOURCES test_cpp_scopes.cpp LABELS cpp TIMEOUT 60)
  tslab_add_test(test_cpp_threads SOURCES test_cpp_threads.cpp LABELS cpp concurrency TIMEOUT 120)
  tslab_add_test(test_cpp_slot_leak SOURCES test_cpp_slot_leak.cpp LABELS cpp TIMEOUT 60)
  target_compile_definitions(test_cpp_slot_leak PRIVATE TSLAB_SLOT_LEAK_CHECK=1)
  tslab_add_test(test_cpp_no_exceptions SOURCES test_cpp_no_exceptions.cpp LABELS cpp TIMEOUT 60)
  target_compile_options(test_cpp_no_exceptions PRIVATE -fno-exceptions -fno-rtti)
endif()
