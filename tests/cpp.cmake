# The C++ layer (include/tslab.hpp): containers in epochs, typed pools,
# scopes, the debug report of dropped slots, and the header under
# -fno-exceptions -fno-rtti. Needs a C++17 compiler.
if(CMAKE_CXX_COMPILER)
  tslab_add_test(test_cpp_resource SOURCES test_cpp_resource.cpp LABELS cpp TIMEOUT 60)
  tslab_add_test(test_cpp_pool SOURCES test_cpp_pool.cpp LABELS cpp TIMEOUT 60)
endif()
