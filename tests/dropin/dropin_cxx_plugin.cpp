// A C++ library that a C program loads with dlopen (test_dropin_dlopen):
// the C++ runtime comes into the process with it, after the drop-in, and
// only in the plugin's local scope. operator new's failure must still call
// the new-handler and throw std::bad_alloc, and the nothrow forms return
// nullptr after calling the handler.
#include <cstddef>
#include <new>

static int handler_calls;
static void handler() {
  handler_calls++;
  std::set_new_handler(nullptr);
}

// 0 when every check passed, else the number of the first that failed.
extern "C" int cxx_plugin_check(void) {
  const std::size_t huge = static_cast<std::size_t>(1) << 62;
  std::set_new_handler(handler);
  try {
    char* p = new char[huge];
    delete[] p;
    return 1;  // a throwing new returned
  } catch (const std::bad_alloc&) {
  }
  if (handler_calls != 1) return 2;
  std::set_new_handler(handler);
  if (::operator new(huge, std::nothrow) != nullptr || handler_calls != 2) return 3;
  int* ok = new int(7);
  int r = *ok == 7 ? 0 : 4;
  delete ok;
  return r;
}
