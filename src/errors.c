/* Per-thread last error and status descriptions. */
#include "internal.h"

static __thread int last_error;

TSLAB_API void tslab_set_error(int status) { last_error = status; }

/* Through the exported setter, as every write of the error: in a process
 * with two copies of the core (libtslab, and the drop-in preloaded or linked
 * statically), the error must land in the copy whose tslab_last_error() the
 * program's calls bind to, not in the one whose code failed. */
TSLAB_INTERNAL int tslab_fail(int status) {
  if (status != TSLAB_OK) tslab_set_error(status);
  return status;
}

TSLAB_API int tslab_last_error(void) { return last_error; }

TSLAB_API void tslab_clear_error(void) { last_error = TSLAB_OK; }

TSLAB_API const char* tslab_strerror(int status) {
  switch (status) {
    case TSLAB_OK: return "success";
    case TSLAB_ERR_INVALID_ARGUMENT: return "invalid argument";
    case TSLAB_ERR_BAD_SIZE: return "size is zero or above the maximum";
    case TSLAB_ERR_BAD_ALIGNMENT: return "alignment is not a power of two or is too large";
    case TSLAB_ERR_EPOCH_CLOSED: return "epoch is closed";
    case TSLAB_ERR_EPOCH_STALE: return "epoch is stale: its ring slot holds a newer era";
    case TSLAB_ERR_EPOCH_UNKNOWN: return "epoch is unknown: never opened";
    case TSLAB_ERR_OUT_OF_MEMORY: return "out of memory";
    case TSLAB_ERR_INVALID_POINTER: return "not a live allocation of this allocator";
    case TSLAB_ERR_INVALID_HANDLE: return "handle is stale, forged or foreign";
    case TSLAB_ERR_WRONG_THREAD: return "object belongs to another thread";
    case TSLAB_ERR_NOT_INNERMOST: return "domain is not the innermost entered domain";
    case TSLAB_ERR_DOMAIN_ENTERED: return "domain is still entered";
    case TSLAB_ERR_NOT_ENTERED: return "domain is not entered";
    case TSLAB_ERR_NO_DOMAIN: return "no domain is entered on this thread";
    case TSLAB_ERR_LIMIT: return "a bounded table is full";
    case TSLAB_ERR_IO: return "input/output error";
    case TSLAB_ERR_BUSY: return "already running";
    case TSLAB_ERR_NOT_SUPPORTED: return "not supported on this platform";
    default: return "unknown status";
  }
}
