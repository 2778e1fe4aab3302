# dispatch.py's classes as extension types, with the events, tallies and slots they read typed
# (events.pxd, state.pxd), so that the LLM-call handlers read and write C struct members.

cimport cython
from fastrlock.rlock cimport lock_fastrlock, unlock_fastrlock

from haltwise.engine.events cimport ModelRequest, ModelResponse, check
from haltwise.engine.state cimport InFlight, Slot, Tally

# A C integer of 128 bits (GCC's and Clang's; where the compiler has none, setup.py installs pure
# Python): a run's dollars in engine units (10^-18 USD) pass 2^63 at $9.22, and a product of two
# C long longs below 2^62, or a sum of a few such, fits in it.
cdef extern from *:
    ctypedef long long wide "__int128"

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
    cdef public object clock, due, hot, early
    cdef public tuple locking
    cdef public bint plain
    cdef readonly bint fast_request, fast_response
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
                   room=wide)
    cpdef object on_model_request(self, ModelRequest event)
    @cython.locals(found=tuple)
    cdef wide _worst(self, object model, long long prompt, long long wanted) except? -2
    @cython.locals(check=Check, slot=Slot, tally=Tally, run=Tally, session=Tally, flight=InFlight,
                   kind=int, used=wide, priced=wide, counted=cython.longlong)
    cpdef object on_model_response(self, ModelResponse event)

# A FastRLock taken and let go from C (fastrlock's own functions), without a Python call.
cdef inline int _hold(object lock) except -1:
    return lock_fastrlock(lock, -1, True)

cdef inline int _let_go(object lock) except -1:
    return unlock_fastrlock(lock)

@cython.locals(natural=cython.longlong)
cdef long long _natural(object value) except? -1
@cython.locals(whole=wide)
cdef wide _whole(object value) except? -1
@cython.locals(narrow=cython.longlong)
cdef object _money(wide value)
@cython.locals(read=cython.longlong, written=cython.longlong, plain=cython.longlong, cost=wide)
cdef wide _flat_cost(tuple found, object input_tokens, object output_tokens, object cache_read,
                     object cache_write) except? -2
