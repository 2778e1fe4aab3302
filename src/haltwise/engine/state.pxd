# state.py's classes, compiled as extension types whose attributes the compiled dispatch
# (dispatch.py) reads and writes as C struct members. Every attribute is a Python object, as
# in state.py, and public: limits and the governor use them as Python attributes.

cdef class Tally:
    cdef public object cache_read_tokens, cache_write_tokens, cost, cost_known, in_flight
    cdef public object input_tokens, last_input_tokens, model_calls, output_tokens, started_at
    cdef public object tool_calls, tool_calls_by_name, turns

cdef class InFlight:
    cdef public object cost, input_tokens, output_tokens, requests

cdef class Slot:
    cdef public object baseline, extra, state, tally, tripped, warned
