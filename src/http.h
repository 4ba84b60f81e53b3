/* Internal interface of the HTTP endpoint (src/http.c) for the core, and its
 * bounds for the tests. */
#ifndef TSLAB_HTTP_H
#define TSLAB_HTTP_H

#include "internal.h"

/* Bounds of an endpoint (docs/OBSERVABILITY.md, "The HTTP endpoint"). */
#define TSLAB_HTTP_CONNECTIONS_MAX 256    /* open at once; beyond, the oldest is refused */
#define TSLAB_HTTP_REQUEST_TIMEOUT_MS 2000 /* from accept to the end of the request head */

/* Stop a's endpoint if one runs and free its state. tslab_destroy calls this
 * before tearing the instance down, because the endpoint's thread reads the
 * instance's statistics. Safe when no endpoint was started. */
TSLAB_INTERNAL void tslab_http_shutdown(tslab_t* a);

#endif
