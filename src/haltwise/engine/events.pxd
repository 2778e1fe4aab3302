# The fields of the events the compiled dispatch (dispatch.py) and the check of each event read
# as C struct members.
# Every field is a Python object, as in events.py.

cdef class ModelRequest:
    cdef readonly object model, max_tokens, input_tokens, request_id, adjustable

cdef class ModelResponse:
    cdef readonly object model, input_tokens, output_tokens, cache_read_tokens
    cdef readonly object cache_write_tokens, cost, text, tool_calls, request_id, answered

cdef class ToolCall:
    cdef readonly object name, arguments, call_id

cdef class ToolResult:
    cdef readonly object name, content, call_id, is_error, exit_code

# The governor's check of each event where it comes in, and its tests of the common case.
cpdef object check(object event)
cdef bint _plain_tool_result(ToolResult result) except -1
cdef bint _plain_tool_call(ToolCall call) except -1
cdef bint _plain_model_response(ModelResponse response) except -1
cdef bint _plain_model_request(ModelRequest request) except -1
