/* epoch_domain.h must compile as the first and only include of a translation unit. */
#include "epoch_domain.h"

size_t compat_header_epoch_domain_probe(void);

size_t compat_header_epoch_domain_probe(void) {
  epoch_domain_t d = {.alloc = NULL, .epoch_id = 0, .auto_close = true};
  return sizeof d + (size_t)d.auto_close;
}
