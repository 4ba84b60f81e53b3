/* Internal interface of the HTTP endpoint (src/http.c) for the core. */
#ifndef TSLAB_HTTP_H
#define TSLAB_HTTP_H

#include "internal.h"

/* Stop a's endpoint if one runs and free its state. tslab_destroy calls this
 * before tearing the instance down, because the endpoint's thread reads the
 * instance's statistics. Safe when no endpoint was started. */
TSLAB_INTERNAL void tslab_http_shutdown(tslab_t* a);

#endif
