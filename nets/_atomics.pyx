# cython: language_level=3, boundscheck=False, wraparound=False
"""Atomic int64 operations on shared-memory buffers (GCC/Clang ``__atomic`` builtins).

The inference server and its workers exchange sequence numbers through a
``multiprocessing.shared_memory`` block. A request slot is published by writing its
payload first and then ``store_release`` on its sequence word; the reader uses
``load_acquire`` and only then reads the payload, so it never sees a half-written
request. ``spin_until_changed`` spins briefly (cheaper than a semaphore when the
peer answers within microseconds) and gives up after ``max_spins`` so the caller
can block on its OS semaphore instead of burning a core.

All functions take a writable buffer of int64 (e.g. ``np.ndarray`` of dtype int64
over shared memory) and an index into it.
"""

from libc.stdint cimport int64_t

cdef extern from *:
    """
    static inline long long c4_load_acquire(long long *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    static inline void c4_store_release(long long *p, long long v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
    static inline long long c4_fetch_add(long long *p, long long v) { return __atomic_fetch_add(p, v, __ATOMIC_ACQ_REL); }
    static inline int c4_cas(long long *p, long long expected, long long desired) {
        return __atomic_compare_exchange_n(p, &expected, desired, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
    }
    static inline void c4_pause(void) {
    #if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
    #elif defined(__aarch64__)
        __asm__ __volatile__("yield");
    #endif
    }
    """
    long long c4_load_acquire(long long *p) nogil
    void c4_store_release(long long *p, long long v) nogil
    long long c4_fetch_add(long long *p, long long v) nogil
    int c4_cas(long long *p, long long expected, long long desired) nogil
    void c4_pause() nogil


cdef inline long long* _ptr(long long[::1] buf, Py_ssize_t i) except NULL:
    if i < 0 or i >= buf.shape[0]:
        raise IndexError(f"index {i} out of range for a buffer of {buf.shape[0]} int64")
    return &buf[i]


def load_acquire(long long[::1] buf, Py_ssize_t i):
    """Atomically read buf[i] (acquire: later reads see what the writer wrote before)."""
    return c4_load_acquire(_ptr(buf, i))


def store_release(long long[::1] buf, Py_ssize_t i, long long value):
    """Atomically write buf[i] (release: earlier writes become visible first)."""
    c4_store_release(_ptr(buf, i), value)


def fetch_add(long long[::1] buf, Py_ssize_t i, long long delta):
    """Atomically add `delta` to buf[i]; returns the previous value."""
    return c4_fetch_add(_ptr(buf, i), delta)


def compare_exchange(long long[::1] buf, Py_ssize_t i, long long expected, long long desired):
    """Atomically set buf[i] = desired if it equals `expected`; returns True on success."""
    return bool(c4_cas(_ptr(buf, i), expected, desired))


def spin_until_changed(long long[::1] buf, Py_ssize_t i, long long old, long long max_spins):
    """Spin (without the GIL) until buf[i] != old or `max_spins` pauses pass; returns buf[i]."""
    cdef long long* p = _ptr(buf, i)
    cdef long long v = c4_load_acquire(p)
    cdef long long n = 0
    with nogil:
        while v == old and n < max_spins:
            c4_pause()
            v = c4_load_acquire(p)
            n += 1
    return v
