/* temporal-slab for C++17: RAII scopes, std::pmr memory resources, a
 * standard allocator, and typed pools with 8-byte handles.
 *
 * Header-only over include/tslab.h; link tslab (CMake: tslab::tslab_cpp).
 * Nothing here needs exceptions: failures are the C API's status codes
 * (tslab_status_t, tslab_strerror). The one exception is the standard's own
 * allocation interface (epoch_resource, allocator), which must not return
 * null and so fails with std::bad_alloc (see allocation_failed below).
 * docs/CPP.md is the reference; every type says here which of its operations
 * are thread-safe.
 *
 * Copyright (c) 2026 the temporal-slab developers. MIT licence.
 */
#ifndef TSLAB_HPP
#define TSLAB_HPP

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <memory_resource>
#include <new>
#include <optional>
#include <type_traits>
#include <utility>

/* tslab.h names a few functions like the structs they fill
 * (tslab_stats_global...), which C++'s -Wshadow reports on every include. */
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#endif
#include "tslab.h"
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

/* Debug builds report a slot<T> destroyed while it still owns its object
 * (see set_slot_leak_handler). The check changes slot<T>'s destructor, so a
 * program must compile every file with the same value. */
#ifndef TSLAB_SLOT_LEAK_CHECK
#ifdef NDEBUG
#define TSLAB_SLOT_LEAK_CHECK 0
#else
#define TSLAB_SLOT_LEAK_CHECK 1
#endif
#endif

namespace tslab {

/* ------------------------------------------------------------------------- */
/* Results                                                                   */
/* ------------------------------------------------------------------------- */

/* A value, or the status that explains why there is none. Pools return it
 * because some of their failures (a full bounded pool) do not come from a C
 * call and so leave no tslab_last_error(). */
template <class V>
class [[nodiscard]] result {
 public:
  result(V value) noexcept(std::is_nothrow_move_constructible_v<V>)
      : value_(std::move(value)), status_(TSLAB_OK) {}
  template <class... A>
  explicit result(std::in_place_t, A&&... args) : value_(std::in_place, std::forward<A>(args)...), status_(TSLAB_OK) {}
  static result failure(tslab_status_t status) noexcept { return result(status); }

  explicit operator bool() const noexcept { return status_ == TSLAB_OK; }
  tslab_status_t status() const noexcept { return status_; }
  const char* message() const noexcept { return tslab_strerror(status_); }

  /* The value; only when the result holds one. */
  V& operator*() & noexcept { return *value_; }
  V&& operator*() && noexcept { return std::move(*value_); }
  V* operator->() noexcept { return &*value_; }

 private:
  explicit result(tslab_status_t status) noexcept : status_(status) {}
  std::optional<V> value_;
  tslab_status_t status_;
};

namespace detail {

/* tslab_last_error() as the status type, for results of failed C calls. */
inline tslab_status_t last_status() noexcept { return static_cast<tslab_status_t>(tslab_last_error()); }

/* tslab_alloc aligns every block to 8 bytes and a block whose size is a
 * multiple of 16 to 16 (its size class is one: include/tslab.h); anything
 * else goes through tslab_aligned_alloc, which is slower. */
constexpr bool alloc_aligns(std::size_t bytes, std::size_t align) noexcept {
  return align <= 8 || (align == 16 && bytes % 16 == 0);
}

/* Bytes for the standard's interfaces, which may ask for 0 (tslab does not). */
inline void* allocate_bytes(tslab_t* a, tslab_epoch_t e, std::size_t bytes, std::size_t align) noexcept {
  if (bytes == 0) bytes = 1;
  return alloc_aligns(bytes, align) ? tslab_alloc(a, bytes, e) : tslab_aligned_alloc(a, align, bytes, e);
}

/* The standard's allocation interfaces must not return null. Fail the way
 * its own null_memory_resource() does: std::bad_alloc, which in a program
 * built with -fno-exceptions ends in std::terminate, as a failed operator
 * new does there. tslab_last_error() still tells why. */
inline void* allocation_failed() { return std::pmr::null_memory_resource()->allocate(1, 1); }

}  // namespace detail

/* ------------------------------------------------------------------------- */
/* Instances and scopes                                                      */
/* ------------------------------------------------------------------------- */

/* An owned allocator instance (tslab_create / tslab_destroy). Move-only.
 * An instance whose creation failed is empty (false); tslab_last_error()
 * tells why. Destroying it unmaps everything it holds: every object, pool,
 * scope and container using it must be gone by then. */
class instance {
 public:
  instance() noexcept : a_(tslab_create(nullptr)) {}
  explicit instance(const tslab_config_t& config) noexcept : a_(tslab_create(&config)) {}
  instance(instance&& other) noexcept : a_(std::exchange(other.a_, nullptr)) {}
  instance& operator=(instance&& other) noexcept {
    if (this != &other) {
      tslab_destroy(a_);
      a_ = std::exchange(other.a_, nullptr);
    }
    return *this;
  }
  instance(const instance&) = delete;
  instance& operator=(const instance&) = delete;
  ~instance() { tslab_destroy(a_); }

  tslab_t* get() const noexcept { return a_; }
  explicit operator bool() const noexcept { return a_ != nullptr; }

 private:
  tslab_t* a_;
};

/* How a scope ends its epoch. */
enum class epoch_end {
  close,    /* tslab_epoch_close: no new allocations; live objects stay valid
               until freed, empty slabs go back to the OS now */
  free_all  /* tslab_epoch_free_all: every object still live in the epoch
               ends at once, without its destructor; pointers into the epoch
               are dead and handles to it are stale */
};

/* A std::pmr::memory_resource that allocates in one epoch: std::pmr
 * containers built on it keep their memory in that epoch. deallocate frees
 * (a block whose epoch was freed-all is already dead: its free is refused
 * and ignored until another allocation reuses its memory, after which it
 * would free that allocation: destroy containers before a free-all of their
 * epoch, docs/CPP.md). A failed allocation (a closed epoch, no memory) throws
 * std::bad_alloc; see detail::allocation_failed. Allocations that need more
 * than tslab_alloc's alignment use tslab_aligned_alloc.
 *
 * Two resources are equal when they allocate in the same epoch of the same
 * instance. Resources of different epochs are unequal even though either
 * could free the other's blocks: equality lets a container take over
 * another's memory on move-assignment or swap, and a container must not end
 * up holding memory of an epoch that ends before it. Without RTTI a resource
 * is equal only to itself (containers then copy where they could have moved).
 *
 * Thread-safe, like the C calls it makes. */
class epoch_resource : public std::pmr::memory_resource {
 public:
  epoch_resource(tslab_t* a, tslab_epoch_t e) noexcept : a_(a), e_(e) {}
  tslab_t* instance() const noexcept { return a_; }
  tslab_epoch_t epoch() const noexcept { return e_; }

 protected:
  void* do_allocate(std::size_t bytes, std::size_t align) override {
    void* p = detail::allocate_bytes(a_, e_, bytes, align);
    return p ? p : detail::allocation_failed();
  }
  void do_deallocate(void* p, std::size_t, std::size_t) override { tslab_free(a_, p); }
  bool do_is_equal(const std::pmr::memory_resource& other) const noexcept override {
    if (this == &other) return true;
#if defined(__cpp_rtti) || defined(__GXX_RTTI)
    auto* o = dynamic_cast<const epoch_resource*>(&other);
    return o != nullptr && o->a_ == a_ && o->e_ == e_;
#else
    return false;
#endif
  }

 private:
  tslab_t* a_;
  tslab_epoch_t e_;
};

/* An epoch owned by a scope: opened (tslab_epoch_advance) or adopted at
 * construction, ended when the scope ends, by close or by free-all. Declare
 * it before the containers and pools that live in it, so that they are
 * destroyed first (with free_all their memory would otherwise be dead when
 * their destructors run). resource() is the epoch's memory resource; the
 * scope is not movable because containers point at it.
 *
 * Thread-safe except end() and destruction, which must not race each other. */
class epoch_scope {
 public:
  /* Open a new epoch; it becomes the instance's current one. Opening fails
   * (false) only for a null instance. */
  explicit epoch_scope(tslab_t* a, epoch_end end = epoch_end::close) noexcept
      : epoch_scope(a, tslab_epoch_advance(a), end) {}
  /* Adopt an open epoch e: the scope ends it. */
  epoch_scope(tslab_t* a, tslab_epoch_t e, epoch_end end = epoch_end::close) noexcept
      : resource_(a, e), end_(end), owned_(e != 0) {}
  epoch_scope(const epoch_scope&) = delete;
  epoch_scope& operator=(const epoch_scope&) = delete;
  ~epoch_scope() { end(); }

  explicit operator bool() const noexcept { return resource_.epoch() != 0; }
  tslab_t* instance() const noexcept { return resource_.instance(); }
  tslab_epoch_t epoch() const noexcept { return resource_.epoch(); }
  epoch_resource& resource() noexcept { return resource_; }

  /* End the epoch now, as the scope would; returns what the C call returns.
   * Later calls, and the scope's end, do nothing and return TSLAB_OK. */
  int end() noexcept {
    if (!std::exchange(owned_, false)) return TSLAB_OK;
    return end_ == epoch_end::free_all ? tslab_epoch_free_all(instance(), epoch())
                                       : tslab_epoch_close(instance(), epoch());
  }

  /* Stop owning the epoch: the scope will not end it. */
  tslab_epoch_t release() noexcept {
    owned_ = false;
    return epoch();
  }

 private:
  epoch_resource resource_;
  epoch_end end_;
  bool owned_;
};

/* An entered epoch domain (tslab_domain_*) for the life of the scope, so
 * that tslab_domain_alloc() and the C code it calls allocate in its epoch.
 * Either a domain of its own, which opens a fresh epoch and ends it when the
 * scope exits (by close, or by free-all), or a domain wrapping an existing
 * epoch, which it never ends. Creating or entering can fail: status() tells
 * why and the scope is then false (and holds no domain or nothing entered).
 *
 * Thread-confined, like domains: construct and destroy it on one thread, in
 * LIFO order with the thread's other domain scopes (it is a local variable,
 * never moved). resource() may be used from any thread. */
class domain_scope {
 public:
  explicit domain_scope(tslab_t* a, const char* label = nullptr, epoch_end end = epoch_end::close) noexcept
      : domain_scope(tslab_domain_create(a, label), end) {}
  domain_scope(tslab_t* a, tslab_epoch_t e) noexcept : domain_scope(tslab_domain_wrap(a, e), std::nullopt) {}
  domain_scope(const domain_scope&) = delete;
  domain_scope& operator=(const domain_scope&) = delete;
  ~domain_scope() {
    if (!d_) return;
    if (entered_) tslab_domain_exit(d_);
    /* A domain of its own closes its epoch when destroyed; free-all then
     * ends what the epoch still holds. */
    tslab_domain_destroy(d_);
    if (end_ == epoch_end::free_all) tslab_epoch_free_all(resource_.instance(), resource_.epoch());
  }

  explicit operator bool() const noexcept { return status_ == TSLAB_OK; }
  tslab_status_t status() const noexcept { return status_; }
  tslab_domain_t* domain() const noexcept { return d_; }
  tslab_epoch_t epoch() const noexcept { return resource_.epoch(); }
  epoch_resource& resource() noexcept { return resource_; }

 private:
  domain_scope(tslab_domain_t* d, std::optional<epoch_end> end) noexcept
      : d_(d), resource_(tslab_domain_allocator(d), tslab_domain_epoch(d)), end_(end) {
    status_ = d ? static_cast<tslab_status_t>(tslab_domain_enter(d)) : detail::last_status();
    entered_ = status_ == TSLAB_OK;
  }

  tslab_domain_t* d_;
  epoch_resource resource_;
  std::optional<epoch_end> end_; /* empty for a wrapped epoch: never ended */
  tslab_status_t status_;
  bool entered_;
};

/* ------------------------------------------------------------------------- */
/* Allocator for the standard containers without pmr                         */
/* ------------------------------------------------------------------------- */

/* A standard allocator that allocates in one epoch: std::vector<T,
 * tslab::allocator<T>> and friends. It has the value semantics of
 * std::pmr::polymorphic_allocator: a container keeps the allocator it was
 * built with (no propagation on copy-assignment, move-assignment or swap),
 * so it stays in its epoch; equal means same instance and same epoch.
 * allocate throws std::bad_alloc on failure (see epoch_resource).
 * Thread-safe. */
template <class T>
class allocator {
 public:
  using value_type = T;

  allocator(tslab_t* a, tslab_epoch_t e) noexcept : a_(a), e_(e) {}
  template <class U>
  allocator(const allocator<U>& other) noexcept : a_(other.instance()), e_(other.epoch()) {}

  T* allocate(std::size_t n) {
    void* p = n <= std::numeric_limits<std::size_t>::max() / sizeof(T)
                  ? detail::allocate_bytes(a_, e_, n * sizeof(T), alignof(T))
                  : nullptr;
    return static_cast<T*>(p ? p : detail::allocation_failed());
  }
  void deallocate(T* p, std::size_t) noexcept { tslab_free(a_, p); }

  tslab_t* instance() const noexcept { return a_; }
  tslab_epoch_t epoch() const noexcept { return e_; }

 private:
  tslab_t* a_;
  tslab_epoch_t e_;
};

template <class T, class U>
bool operator==(const allocator<T>& x, const allocator<U>& y) noexcept {
  return x.instance() == y.instance() && x.epoch() == y.epoch();
}
template <class T, class U>
bool operator!=(const allocator<T>& x, const allocator<U>& y) noexcept {
  return !(x == y);
}

/* ------------------------------------------------------------------------- */
/* Typed pools                                                               */
/* ------------------------------------------------------------------------- */

/* Called in debug builds (TSLAB_SLOT_LEAK_CHECK) when a slot<T> that still
 * owns its object is destroyed or overwritten: the object then leaks (until
 * its epoch is freed-all). The default prints one line to stderr. The
 * handler may run on any thread, concurrently. */
using slot_leak_handler = void (*)(tslab_handle_t handle, std::size_t object_size) noexcept;

namespace detail {

inline void print_slot_leak(tslab_handle_t handle, std::size_t object_size) noexcept {
  std::fprintf(stderr,
               "tslab: slot of a %zu-byte object (handle 0x%016llx) dropped without free, take or "
               "release: the object leaks\n",
               object_size, static_cast<unsigned long long>(handle));
}

inline std::atomic<slot_leak_handler> slot_leak{&print_slot_leak};

/* Where an object of type U lives in a block from tslab_alloc_handle, which
 * has no alignment argument. Up to 16 the block's own alignment suffices
 * (sizeof(U) is a multiple of alignof(U), see alloc_aligns); beyond, the
 * block is padded by the difference and the object sits at the first
 * aligned address in it. */
template <class U>
struct block_layout {
  static constexpr std::size_t pad = alignof(U) > 16 ? alignof(U) - 16 : 0;
  static constexpr std::size_t bytes = sizeof(U) + pad;
  static_assert(alloc_aligns(bytes, alignof(U) > 16 ? 16 : alignof(U)),
                "a block of this size is aligned enough for U, or padded to it");

  static U* object(void* block) noexcept {
    if constexpr (pad == 0) {
      return static_cast<U*>(block);
    } else {
      auto at = (reinterpret_cast<std::uintptr_t>(block) + alignof(U) - 1) & ~(std::uintptr_t{alignof(U)} - 1);
      return reinterpret_cast<U*>(at);
    }
  }
};

/* What an rc_slot names: its object and the count of its owners. */
template <class T>
struct rc_box {
  template <class... A>
  explicit rc_box(A&&... args) : value(std::forward<A>(args)...) {}
  std::atomic<std::uint32_t> owners{1};
  T value;
};

}  // namespace detail

/* Replace the handler (nullptr restores the default); returns the old one. */
inline slot_leak_handler set_slot_leak_handler(slot_leak_handler handler) noexcept {
  return detail::slot_leak.exchange(handler ? handler : &detail::print_slot_leak);
}

template <class T>
class pool;
template <class T>
class reservation;

/* The owner of one object in a pool: a tslab handle, 8 bytes, move-only. It
 * does not free its object by itself (it does not know its instance): give
 * it back with pool.free() or pool.take(), or disarm it with release(). A
 * slot that still owns its object when destroyed is a leak, reported in
 * debug builds. The handle is checked on every access through the pool, so
 * a slot whose object is gone (freed through a copy of its handle, or ended
 * with its epoch by free-all) reads as stale instead of reaching reused
 * memory; the check is exact until the object's memory has been reused
 * 65536 times (the handle's generation is 16 bits).
 *
 * A slot is not thread-safe: like any value, one thread uses it at a time. */
template <class T>
class slot {
 public:
  constexpr slot() noexcept = default;
  slot(slot&& other) noexcept : h_(std::exchange(other.h_, 0)) {}
  slot& operator=(slot&& other) noexcept {
    if (this != &other) {
      dropped();
      h_ = std::exchange(other.h_, 0);
    }
    return *this;
  }
  slot(const slot&) = delete;
  slot& operator=(const slot&) = delete;
  ~slot() { dropped(); }

  /* True while the slot owns an object (or a stale handle to one). */
  explicit operator bool() const noexcept { return h_ != 0; }
  tslab_handle_t handle() const noexcept { return h_; }

  /* Disarm: the slot owns nothing and the caller takes the handle. */
  [[nodiscard]] tslab_handle_t release() noexcept { return std::exchange(h_, 0); }
  /* Own a handle again (one that release() returned). */
  static slot adopt(tslab_handle_t handle) noexcept { return slot(handle); }

 private:
  friend class pool<T>;
  friend class reservation<T>;
  explicit slot(tslab_handle_t handle) noexcept : h_(handle) {}

  void dropped() noexcept {
#if TSLAB_SLOT_LEAK_CHECK
    if (h_ != 0) detail::slot_leak.load(std::memory_order_relaxed)(h_, sizeof(T));
#endif
  }

  tslab_handle_t h_ = 0;
};

/* Storage for one T taken from a pool and not constructed yet: the first
 * phase of placement construction. storage() is where the object goes;
 * construct() builds it there, or the caller builds it with placement new
 * and calls commit(); either way the reservation becomes a slot. Dropped
 * before that, it gives the storage back. When a constructor throws, the
 * storage goes back as the exception passes, and no destructor runs.
 * Move-only; the pool must outlive it. */
template <class T>
class reservation {
 public:
  reservation(reservation&& other) noexcept
      : pool_(other.pool_), h_(other.h_), block_(std::exchange(other.block_, nullptr)) {}
  reservation& operator=(reservation&&) = delete;
  reservation(const reservation&) = delete;
  ~reservation() {
    if (block_) pool_->give_block(block_);
  }

  /* Where the object goes; stays its address for the life of the slot. */
  T* storage() const noexcept { return detail::block_layout<T>::object(block_); }

  template <class... A>
  slot<T> construct(A&&... args) {
    ::new (static_cast<void*>(storage())) T(std::forward<A>(args)...);
    return commit();
  }
  /* The object at storage() was constructed by the caller. */
  slot<T> commit() noexcept {
    block_ = nullptr;
    return slot<T>(h_);
  }

 private:
  friend class pool<T>;
  reservation(pool<T>* p, tslab_handle_t h, void* block) noexcept : pool_(p), h_(h), block_(block) {}

  pool<T>* pool_;
  tslab_handle_t h_;
  void* block_; /* null once committed or moved from */
};

/* A shared owner of one object in a pool, counted: the last owner to go
 * destroys the object and frees its slot. Unlike slot<T> it is RAII and
 * copyable (16 bytes: it names its pool), and it checks its handle on every
 * use, so an object ended with its epoch by free-all reads as stale (get()
 * is null) and its owners then go without touching it.
 *
 * Copying, assigning and destroying distinct rc_slots of one object is
 * thread-safe, as for std::shared_ptr; access to the object is not
 * synchronized. The pool must outlive its rc_slots. */
template <class T>
class rc_slot {
 public:
  constexpr rc_slot() noexcept = default;
  rc_slot(const rc_slot& other) noexcept : pool_(other.pool_), h_(other.h_) {
    if (auto* b = box()) b->owners.fetch_add(1, std::memory_order_relaxed);
  }
  rc_slot(rc_slot&& other) noexcept : pool_(other.pool_), h_(std::exchange(other.h_, 0)) {}
  rc_slot& operator=(rc_slot other) noexcept {
    std::swap(pool_, other.pool_);
    std::swap(h_, other.h_);
    return *this;
  }
  ~rc_slot() { reset(); }

  /* The object, or null when empty or stale. */
  T* get() const noexcept {
    auto* b = box();
    return b ? &b->value : nullptr;
  }
  /* Owners of the object (0 when empty or stale); a snapshot. */
  std::uint32_t use_count() const noexcept {
    auto* b = box();
    return b ? b->owners.load(std::memory_order_relaxed) : 0;
  }
  explicit operator bool() const noexcept { return h_ != 0; }

  /* Stop owning; the last owner destroys the object and frees it. */
  void reset() noexcept {
    void* block = h_ ? pool_->find_block(h_) : nullptr;
    h_ = 0;
    if (!block) return;
    auto* b = detail::block_layout<detail::rc_box<T>>::object(block);
    /* acq_rel: the last owner sees every other owner's writes to the object
     * before it destroys it. */
    if (b->owners.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      b->~rc_box();
      pool_->give_block(block);
    }
  }

 private:
  friend class pool<T>;
  rc_slot(pool<T>* p, tslab_handle_t h) noexcept : pool_(p), h_(h) {}
  detail::rc_box<T>* box() const noexcept {
    return h_ ? pool_->template find<detail::rc_box<T>>(h_) : nullptr;
  }

  pool<T>* pool_ = nullptr;
  tslab_handle_t h_ = 0;
};

/* A typed pool: objects of type T in one epoch of an instance, each named by
 * a slot<T> (or shared by rc_slot<T>s). Growing pools take as many objects
 * as memory allows; bounded pools at most `capacity` live ones at a time,
 * and refuse more with TSLAB_ERR_LIMIT. Objects come from the epoch's slabs
 * like any tslab allocation (a bounded pool reserves no memory up front), so
 * a pool ends with its epoch: once the epoch is closed, new objects are
 * refused (TSLAB_ERR_EPOCH_CLOSED) and live ones stay until freed; once it is
 * freed-all, every slot of the pool is stale. A pool holds no memory itself.
 *
 * Any alignment of T works: up to 16 bytes objects sit where tslab puts
 * them, beyond that their blocks are padded to the alignment. Destructors
 * run exactly once: by free(), take() or the last rc_slot, never for a
 * stale slot (its object is gone) and never by free-all.
 *
 * Checked and fast access: get() validates the handle (one call into the
 * library, a few loads). The pointer it returns stays valid until the slot
 * is freed or taken or its epoch freed-all, so a hot loop resolves its
 * slots once and then works through the pointers, unchecked; reserve()
 * gives the pointer with the allocation, so allocate-and-use needs no
 * lookup at all.
 *
 * Thread safety: every pool operation may be called from any thread at
 * once; a bounded pool counts its objects with one atomic. A given slot is
 * used by one thread at a time (freeing an object while another thread reads
 * it is the program's race, as with delete). Slots must go back to the pool
 * they came from (a bounded pool counts them), which must outlive its
 * reservations and rc_slots. Not movable: those point at it. */
template <class T>
class pool {
  static_assert(std::is_object_v<T> && !std::is_array_v<T> && !std::is_const_v<T>,
                "pool<T> holds complete, non-const, non-array object types");
  static_assert(sizeof(slot<T>) == sizeof(tslab_handle_t), "a slot is exactly its handle");

 public:
  static constexpr std::size_t growing = std::numeric_limits<std::size_t>::max();

  pool(tslab_t* a, tslab_epoch_t e, std::size_t capacity = growing) noexcept
      : a_(a), e_(e), capacity_(capacity) {}
  pool(const pool&) = delete;
  pool& operator=(const pool&) = delete;

  tslab_t* instance() const noexcept { return a_; }
  tslab_epoch_t epoch() const noexcept { return e_; }
  std::size_t capacity() const noexcept { return capacity_; }
  bool bounded() const noexcept { return capacity_ != growing; }
  /* Live objects of a bounded pool (growing pools do not count: that would
   * cost an atomic per call; the epoch's statistics count for them).
   * Objects ended by a free-all of the epoch stay counted: the pool has
   * ended with its epoch. */
  std::size_t in_use() const noexcept { return live_.load(std::memory_order_relaxed); }

  /* Phase one of placement construction: storage for one T. Fails with
   * TSLAB_ERR_LIMIT when a bounded pool is full, else with the status of
   * the allocation (a closed, stale or unknown epoch, no memory). */
  result<reservation<T>> reserve() noexcept {
    tslab_handle_t h;
    void* block;
    tslab_status_t status = take_block<T>(&h, &block);
    if (status != TSLAB_OK) return result<reservation<T>>::failure(status);
    return reservation<T>(this, h, block);
  }

  /* A new object built from args, in place. */
  template <class... A>
  result<slot<T>> emplace(A&&... args) {
    result<reservation<T>> r = reserve();
    if (!r) return result<slot<T>>::failure(r.status());
    return r->construct(std::forward<A>(args)...);
  }

  /* A new object built from args, shared: one owner so far. */
  template <class... A>
  result<rc_slot<T>> emplace_shared(A&&... args) {
    tslab_handle_t h;
    void* block;
    tslab_status_t status = take_block<detail::rc_box<T>>(&h, &block);
    if (status != TSLAB_OK) return result<rc_slot<T>>::failure(status);
    /* A reservation gives its block back if dropped, whatever was to be
     * built in it: so the block goes back if the constructor throws. */
    reservation<T> guard(this, h, block);
    ::new (static_cast<void*>(detail::block_layout<detail::rc_box<T>>::object(block)))
        detail::rc_box<T>(std::forward<A>(args)...);
    guard.block_ = nullptr;
    return rc_slot<T>(this, h);
  }

  /* The object, or null (tslab_last_error() TSLAB_ERR_INVALID_HANDLE) when
   * the slot is empty or stale. */
  T* get(const slot<T>& s) const noexcept { return find<T>(s.h_); }

  /* Destroy the object and free its slot; the slot is empty afterwards.
   * TSLAB_ERR_INVALID_HANDLE for a stale slot (nothing is destroyed: its
   * object is gone already), TSLAB_ERR_INVALID_ARGUMENT for an empty one. */
  tslab_status_t free(slot<T>&& s) noexcept {
    tslab_handle_t h = std::exchange(s.h_, 0);
    if (h == 0) return TSLAB_ERR_INVALID_ARGUMENT;
    if constexpr (std::is_trivially_destructible_v<T>) {
      if (!tslab_free_handle(a_, h)) return TSLAB_ERR_INVALID_HANDLE;
      retire();
    } else {
      void* block = find_block(h);
      if (!block) return TSLAB_ERR_INVALID_HANDLE;
      detail::block_layout<T>::object(block)->~T();
      give_block(block);
    }
    return TSLAB_OK;
  }

  /* Move the object out, destroy what is left of it and free its slot. A
   * stale slot gives TSLAB_ERR_INVALID_HANDLE and is emptied; when T's move
   * constructor throws, the slot keeps its object. */
  result<T> take(slot<T>&& s) noexcept(std::is_nothrow_move_constructible_v<T>) {
    void* block = s.h_ ? find_block(s.h_) : nullptr;
    if (!block) {
      tslab_status_t status = s.h_ ? TSLAB_ERR_INVALID_HANDLE : TSLAB_ERR_INVALID_ARGUMENT;
      s.h_ = 0;
      return result<T>::failure(status);
    }
    return take_from(s, block);
  }

 private:
  friend class reservation<T>;
  friend class rc_slot<T>;

  /* A block for one U in the epoch, admitted by a bounded pool. */
  template <class U>
  tslab_status_t take_block(tslab_handle_t* h, void** block) noexcept {
    if (!admit()) {
      /* Full, unless the epoch ended (a free-all close ends objects without
       * telling the pool): then the epoch's own status says why. */
      int st = tslab_epoch_status(a_, e_);
      return st != TSLAB_OK ? static_cast<tslab_status_t>(st) : TSLAB_ERR_LIMIT;
    }
    *block = tslab_alloc_handle(a_, detail::block_layout<U>::bytes, e_, h);
    if (*block) return TSLAB_OK;
    retire();
    return detail::last_status();
  }

  /* The block a handle names, or null when it is stale or 0. */
  void* find_block(tslab_handle_t h) const noexcept { return tslab_handle_get(a_, h); }
  template <class U>
  U* find(tslab_handle_t h) const noexcept {
    void* block = find_block(h);
    return block ? detail::block_layout<U>::object(block) : nullptr;
  }

  /* Free a block (its start, not the object in it) whose object is
   * destroyed or was never built. */
  void give_block(void* block) noexcept {
    tslab_free(a_, block);
    retire();
  }

  /* take() once the block is found; one return, so the value is moved once. */
  result<T> take_from(slot<T>& s, void* block) noexcept(std::is_nothrow_move_constructible_v<T>) {
    T* object = detail::block_layout<T>::object(block);
    result<T> out(std::in_place, std::move(*object));
    s.h_ = 0;
    object->~T();
    give_block(block);
    return out;
  }

  /* Bounded pools count live objects; a compare-and-swap loop never lets
   * the count pass the capacity, so no caller is refused spuriously. */
  bool admit() noexcept {
    if (!bounded()) return true;
    std::size_t n = live_.load(std::memory_order_relaxed);
    do {
      if (n >= capacity_) return false;
    } while (!live_.compare_exchange_weak(n, n + 1, std::memory_order_relaxed));
    return true;
  }
  void retire() noexcept {
    if (bounded()) live_.fetch_sub(1, std::memory_order_relaxed);
  }

  tslab_t* a_;
  tslab_epoch_t e_;
  std::size_t capacity_;
  std::atomic<std::size_t> live_{0};
};

}  // namespace tslab

#endif /* TSLAB_HPP */
