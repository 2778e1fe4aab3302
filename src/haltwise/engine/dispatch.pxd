# dispatch.py's classes as extension types, with the events, tallies and slots they read typed
# (events.pxd, state.pxd), so that the LLM-call handlers read and write C struct members.

cimport cython

from haltwise.engine.events cimport ModelRequest, ModelResponse
from haltwise.engine.state cimport InFlight, Slot, Tally

cdef class Check:
    cdef readonly int kind
    cdef readonly object maximum
    cdef readonly Slot slot
    cdef readonly Tally tally
    cdef readonly bint on_run

cdef class Dispatch:
    cdef readonly object governor
    cdef public object lock, clock, due, hot, early
    cdef public bint plain
    cdef readonly bint fast_request, fast_response
    cdef readonly Tally run, session
    cdef readonly InFlight flight
    cdef readonly tuple before_checks, after_checks
    cdef readonly bint priced, run_prices
    cdef readonly object worst_units, unit_price
    cdef readonly dict flat

    # The LLM-call handlers, their locals typed: each attribute they read is a struct member.
    @cython.locals(check=Check, slot=Slot, tally=Tally, run=Tally, session=Tally, flight=InFlight,
                   kind=int)
    cpdef object on_model_request(self, ModelRequest event)
    @cython.locals(check=Check, slot=Slot, tally=Tally, run=Tally, session=Tally, flight=InFlight,
                   kind=int)
    cpdef object on_model_response(self, ModelResponse event)
