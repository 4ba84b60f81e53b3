/* Options from the environment, in the style of MIMALLOC_*: every TSLAB_*
 * variable is read once, when the process instance is created (which can be
 * before main), so the reading must not allocate: getenv and hand-written
 * parsers only. An invalid value keeps the default and says so on stderr, so
 * a typo never goes unnoticed. docs/DROPIN.md lists the variables. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "dropin.h"

void dropin_message(const char* fmt, ...) {
  char buf[512];
  int n = snprintf(buf, sizeof buf, "tslab-malloc: ");
  va_list ap;
  va_start(ap, fmt);
  int m = vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
  va_end(ap);
  size_t len = (size_t)n + (m > 0 ? (size_t)m : 0);
  if (len > sizeof buf - 1) len = sizeof buf - 1;
  ssize_t w = write(STDERR_FILENO, buf, len);
  (void)w;
}

static void invalid(const char* name, const char* value) {
  dropin_message("ignoring %s=%s (invalid value; see docs/DROPIN.md)\n", name, value);
}

/* A decimal number with an optional k, m, g or t suffix (powers of 1024,
 * either case, an optional trailing "b" or "ib"). */
static bool parse_size(const char* s, size_t* out) {
  if (*s < '0' || *s > '9') return false;
  size_t v = 0;
  for (; *s >= '0' && *s <= '9'; s++) {
    if (v > (SIZE_MAX - 9) / 10) return false;
    v = v * 10 + (size_t)(*s - '0');
  }
  unsigned shift = 0;
  switch (*s) {
    case 'k': case 'K': shift = 10; s++; break;
    case 'm': case 'M': shift = 20; s++; break;
    case 'g': case 'G': shift = 30; s++; break;
    case 't': case 'T': shift = 40; s++; break;
    default: break;
  }
  if (shift && (*s == 'i' || *s == 'I')) s++;
  if (*s == 'b' || *s == 'B') s++;
  if (*s != '\0' || (shift && v > (SIZE_MAX >> shift))) return false;
  *out = v << shift;
  return true;
}

static bool parse_bool(const char* s, bool* out) {
  if (!strcmp(s, "1") || !strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcasecmp(s, "on")) {
    *out = true;
    return true;
  }
  if (!strcmp(s, "0") || !strcasecmp(s, "false") || !strcasecmp(s, "no") || !strcasecmp(s, "off") ||
      !*s) {
    *out = false;
    return true;
  }
  return false;
}

/* "PORT", "ADDRESS:PORT" or "[IPV6]:PORT". */
static bool parse_http(const char* s, dropin_options_t* o) {
  const char* colon = strrchr(s, ':');
  const char* port = colon ? colon + 1 : s;
  size_t p;
  if (!parse_size(port, &p) || p > 65535 || strpbrk(port, "kKmMgGtTbBiI")) return false;
  const char* addr = "127.0.0.1";
  size_t len = strlen(addr);
  if (colon) {
    addr = s;
    len = (size_t)(colon - s);
    if (len >= 2 && addr[0] == '[' && addr[len - 1] == ']') {
      addr++;
      len -= 2;
    }
  }
  if (len == 0 || len >= sizeof o->http_address) return false;
  memcpy(o->http_address, addr, len);
  o->http_address[len] = '\0';
  o->http_port = (uint16_t)p;
  o->http = true;
  return true;
}

void dropin_options_read(dropin_options_t* o) {
  memset(o, 0, sizeof *o);
  tslab_config_init(&o->config);
  size_t max_alloc = 0;
  const char* v;
  size_t n;

  if ((v = getenv("TSLAB_RELEASE_POLICY")) && *v) {
    if (!strcasecmp(v, "on_close") || !strcmp(v, "0"))
      o->config.release_policy = TSLAB_RELEASE_ON_CLOSE;
    else if (!strcasecmp(v, "eager") || !strcmp(v, "1"))
      o->config.release_policy = TSLAB_RELEASE_EAGER;
    else if (!strcasecmp(v, "pooled") || !strcmp(v, "2"))
      o->config.release_policy = TSLAB_RELEASE_POOLED;
    else
      invalid("TSLAB_RELEASE_POLICY", v);
  }
  if ((v = getenv("TSLAB_RESERVE")) && *v) {
    if (parse_size(v, &n) && n >= ((size_t)4 << 20) && n <= ((size_t)1 << 40))
      o->config.reserve_bytes = n;
    else
      invalid("TSLAB_RESERVE", v);
  }
  if ((v = getenv("TSLAB_POOL_RESIDENT_MAX")) && *v) {
    if (parse_size(v, &n))
      o->config.pool_resident_max = n;
    else
      invalid("TSLAB_POOL_RESIDENT_MAX", v);
  }
  if ((v = getenv("TSLAB_POOL_DECAY_MAX")) && *v) {
    if (parse_size(v, &n))
      o->config.pool_decay_max = n;
    else
      invalid("TSLAB_POOL_DECAY_MAX", v);
  }
  if ((v = getenv("TSLAB_POOL_DECAY_MS")) && *v) {
    if (parse_size(v, &n) && n <= 3600u * 1000u && !strpbrk(v, "kKmMgGtTbBiI"))
      o->config.pool_decay_ms = (uint32_t)n;
    else
      invalid("TSLAB_POOL_DECAY_MS", v);
  }
  if ((v = getenv("TSLAB_EPOCH_RING_SIZE")) && *v) {
    if (parse_size(v, &n) && n >= 2 && n <= 256 && (n & (n - 1)) == 0 && !strpbrk(v, "kKmMgGtTbBiI"))
      o->config.epoch_ring_size = (uint32_t)n;
    else
      invalid("TSLAB_EPOCH_RING_SIZE", v);
  }
  if ((v = getenv("TSLAB_MAX_ALLOC_SIZE")) && *v) {
    /* At least 1 MiB: below that, everyday requests (a stdio buffer grown,
     * a hash table) fail, and programs die in their own out-of-memory
     * paths (found by review: `sh` and `python3` crashed at 100 bytes). */
    if (parse_size(v, &n) && n >= ((size_t)1 << 20))
      max_alloc = n;
    else
      invalid("TSLAB_MAX_ALLOC_SIZE", v);
  }
  /* malloc has no size limit of its own: by default the largest request is
   * half the reservation (the most the core accepts), not the core's 1 GiB. */
  o->config.max_alloc_size = o->config.reserve_bytes / 2;
  if (max_alloc && max_alloc <= o->config.max_alloc_size)
    o->config.max_alloc_size = max_alloc;
  else if (max_alloc)
    dropin_message("TSLAB_MAX_ALLOC_SIZE is above half of TSLAB_RESERVE; using half of it\n");

  if ((v = getenv("TSLAB_SHOW_STATS")) && *v) {
    bool b;
    if (!strcasecmp(v, "json"))
      o->show_stats = DROPIN_STATS_JSON;
    else if (parse_bool(v, &b))
      o->show_stats = b ? DROPIN_STATS_TEXT : DROPIN_STATS_OFF;
    else
      invalid("TSLAB_SHOW_STATS", v);
  }
  if ((v = getenv("TSLAB_VERBOSE")) && *v && !parse_bool(v, &o->verbose)) invalid("TSLAB_VERBOSE", v);
  if ((v = getenv("TSLAB_HTTP")) && *v && !parse_http(v, o)) invalid("TSLAB_HTTP", v);
}
