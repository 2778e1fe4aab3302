# The fields of the events the compiled dispatch (dispatch.py) reads as C struct members.
# Every field is a Python object, as in events.py.

cdef class ModelRequest:
    cdef readonly object model, max_tokens, input_tokens, request_id, adjustable

cdef class ModelResponse:
    cdef readonly object model, input_tokens, output_tokens, cache_read_tokens
    cdef readonly object cache_write_tokens, cost, text, tool_calls, request_id, answered
