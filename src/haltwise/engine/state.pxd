# state.py's classes, compiled as extension types whose attributes the compiled dispatch
# (dispatch.py) reads and writes as C struct members. Every attribute is public: limits and the
# governor use them as Python attributes. The counts are C long longs (at most MAX_TALLY, which
# state.py keeps them under in both builds), the dollars C integers of 128 bits (at most
# MAX_COST, likewise); the rest are Python objects, as in state.py.

# A C integer of 128 bits (GCC's and Clang's; where the compiler has none, setup.py installs pure
# Python): a run's dollars in engine units (10^-18 USD) pass 2^63 at $9.22.
cdef extern from *:
    ctypedef long long wide "__int128"

cdef class Tally:
    cdef public long long turns, model_calls, tool_calls, input_tokens, output_tokens
    cdef public long long cache_read_tokens, cache_write_tokens, last_input_tokens
    cdef public wide cost
    cdef public object cost_known, in_flight, started_at, tool_calls_by_name

cdef class InFlight:
    cdef public long long input_tokens, output_tokens
    cdef public wide cost
    cdef public object requests

    # Called by the compiled dispatch without a method lookup.
    cpdef Py_ssize_t index(self, object request_id) except -1

cdef class Slot:
    cdef public object baseline, extra, state, tally, tripped, warned
    cdef public bint soft, asleep
