# dispatch.py's classes as extension types, with the events, tallies and slots they read typed
# (events.pxd, state.pxd), so that the LLM-call handlers read and write C struct members.

cimport cython
from cpython.pythread cimport PyThread_get_thread_ident
from posix.time cimport CLOCK_MONOTONIC, clock_gettime, timespec

from haltwise.engine.events cimport ModelRequest, ModelResponse, ToolCall, ToolResult, check
# ``wide``: a C integer of 128 bits, in which a product of two C long longs below 2^62, or a sum
# of a few such, fits.
from haltwise.engine.state cimport InFlight, Slot, Tally, wide

cdef wide _COST_ROOM, _MAX_CALL

cdef class Lock

cdef class Check:
    cdef readonly int kind
    cdef readonly object maximum
    cdef wide cap
    cdef readonly bint fits
    cdef readonly Slot slot
    cdef readonly Tally tally
    cdef readonly bint on_run

cdef class Dispatch:
    cdef readonly object governor
    cdef readonly object clock
    cdef readonly bint monotonic
    cdef public object due, hot, early, evidence
    cdef public tuple locking
    cdef readonly Lock own_lock
    cdef public bint plain
    cdef readonly bint fast_request, fast_response, fast_call, fast_result
    cdef readonly tuple call_pre, call_post, result_pre, result_post, shared_call
    cdef readonly Tally run, session
    cdef readonly InFlight flight
    cdef readonly tuple before_checks, after_checks
    cdef readonly bint priced, run_prices
    cdef readonly object worst_units, unit_price
    cdef readonly dict flat

    # The checks before and after an event, with the slot each reads typed.
    @cython.locals(slot=Slot)
    cpdef object pre(self, tuple checks, object event)
    @cython.locals(slot=Slot)
    cpdef object post(self, tuple checks, object event)

    # The LLM-call handlers, their locals typed: each attribute they read is a struct member.
    @cython.locals(check=Check, slot=Slot, tally=Tally, run=Tally, session=Tally, flight=InFlight,
                   kind=int, refused=bint, wanted=cython.longlong, asked=cython.longlong,
                   prompt_run=cython.longlong, prompt_session=cython.longlong,
                   prompt=cython.longlong, cap=wide, free=wide, used=wide, worst=wide,
                   room=wide, requests=list)
    cpdef object on_model_request(self, ModelRequest event)
    @cython.locals(found=tuple)
    cdef wide _worst(self, object model, long long prompt, long long wanted) except? -2
    @cython.locals(check=Check, slot=Slot, tally=Tally, run=Tally, session=Tally, flight=InFlight,
                   kind=int, used=wide, priced=wide, known=bint, index=Py_ssize_t, requests=list,
                   counted=cython.longlong, reservation=tuple, held_prompt=cython.longlong,
                   held_output=cython.longlong)
    cpdef object on_model_response(self, ModelResponse event)

    # A tool call's two events, their tallies typed.
    @cython.locals(run=Tally, session=Tally, by_name=dict)
    cpdef object on_tool_call(self, ToolCall event)
    cpdef object on_tool_result(self, ToolResult event)

# ``time.monotonic()``, read as Python 3.11 to 3.13 read it (``_PyTime_AsSecondsDouble``).
cdef inline double _monotonic() noexcept nogil:
    cdef timespec now
    clock_gettime(CLOCK_MONOTONIC, &now)
    cdef long long nanoseconds = now.tv_sec * 1000000000LL + now.tv_nsec
    if nanoseconds % 1000000000LL == 0:
        return <double>(nanoseconds // 1000000000LL)
    return <double>nanoseconds / 1e9

# The governor's reentrant lock (dispatch.py's Lock). Each step below runs while the interpreter
# lock is held, with no Python call between reading a field and writing one, so that no other
# thread sees it half made; only a wait for ``_real`` lets other threads run.
cdef class Lock:
    cdef unsigned long _owner
    cdef Py_ssize_t _count, _waiting
    cdef bint _held
    cdef object _real

cdef inline bint _take(Lock lock, bint blocking, object timeout) except -1:
    cdef unsigned long me = PyThread_get_thread_ident()
    if lock._count:
        if lock._owner == me:
            lock._count += 1
            return True
    elif not lock._waiting:
        lock._owner = me
        lock._count = 1
        return True
    return _wait(lock, me, blocking, timeout)

# Held by another thread, or others wait for it: wait for ``_real``, taken for the holder first if
# it holds the lock without it (then ``_real`` is free: the holder lets it go with the lock).
cdef inline bint _wait(Lock lock, unsigned long me, bint blocking, object timeout) except -1:
    if lock._count and not lock._held:
        lock._real.acquire(False)
        lock._held = True
    lock._waiting += 1
    try:
        taken = lock._real.acquire(blocking, timeout)
    finally:
        lock._waiting -= 1
    if not taken:
        return False
    lock._owner = me
    lock._count = 1
    lock._held = True
    return True

cdef inline bint _owned(Lock lock) noexcept:
    return lock._count > 0 and lock._owner == PyThread_get_thread_ident()

cdef inline object _let_go_all(Lock lock):
    if not _owned(lock):
        raise RuntimeError("cannot release un-acquired lock")
    cdef Py_ssize_t count = lock._count
    lock._count = 1
    _give(lock)
    return count

cdef inline int _take_back(Lock lock, object state) except -1:
    _take(lock, True, -1)
    lock._count = state
    return 0

cdef inline int _give(Lock lock) except -1:
    if lock._count == 0 or lock._owner != PyThread_get_thread_ident():
        raise RuntimeError("cannot release un-acquired lock")
    lock._count -= 1
    if lock._count == 0:
        lock._owner = 0
        if lock._held:
            lock._held = False
            lock._real.release()
    return 0

# dispatch.py's ``_natural`` and ``_whole``, inline: the handlers convert a dozen values an LLM
# call.
cdef inline long long _natural(object value) except? -1:
    if type(value) is not int:
        raise TypeError(value)
    cdef long long natural = value
    if natural >> 62:
        raise OverflowError(value)
    return natural

cdef inline wide _whole(object value) except? -1:
    if type(value) is not int:
        raise TypeError(value)
    cdef wide whole = value
    if not -1 <= whole >> 120 <= 0:
        raise OverflowError(value)
    return whole

@cython.locals(narrow=cython.longlong)
cdef object _money(wide value)
@cython.locals(read=cython.longlong, written=cython.longlong, plain=cython.longlong, cost=wide)
cdef wide _flat_cost(tuple found, object input_tokens, object output_tokens, object cache_read,
                     object cache_write) except? -2
