# cython: language_level=3, boundscheck=False, wraparound=False
"""Atomic int64 operations on shared-memory buffers (GCC/Clang ``__atomic`` builtins).

The inference server and its workers exchange sequence numbers through a
``multiprocessing.shared_memory`` block. A request slot is published by writing its
payload first and then ``store_release`` on its sequence word; the reader uses
``load_acquire`` and only then reads the payload, so it never sees a half-written
request. Waiting is done on OS semaphores (nets.shm_queue), not by spinning.

All functions take a writable buffer of int64 (e.g. ``np.ndarray`` of dtype int64
over shared memory) and an index into it.
"""

from libc.stdint cimport int64_t

cdef extern from *:
    """
    static inline long long c4_load_acquire(long long *p) { return __atomic_load_n(p, __ATOMIC_ACQUIRE); }
    static inline void c4_store_release(long long *p, long long v) { __atomic_store_n(p, v, __ATOMIC_RELEASE); }
    """
    long long c4_load_acquire(long long *p) nogil
    void c4_store_release(long long *p, long long v) nogil


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
