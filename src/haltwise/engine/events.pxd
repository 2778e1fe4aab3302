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

# The governor's check of each event where it comes in, and its parts, called in C.
cpdef object check(object event)
cdef object _check_model_request(ModelRequest request)
cdef object _check_model_response(ModelResponse response)
cdef object _check_tool_call(ToolCall call)
cdef object _check_tool_result(ToolResult result)
cdef bint _text(object value)
cdef bint _text_or_none(object value)
cdef bint _flag(object value)
cdef bint _integer(object value)
cdef bint _count(object value) except -1
cdef bint _count_or_none(object value) except -1
cdef bint _dollars_or_none(object value) except -1
