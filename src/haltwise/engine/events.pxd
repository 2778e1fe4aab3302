cimport cython
from cpython.long cimport PyLong_AsLongLongAndOverflow

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
@cython.locals(prompt_count=cython.longlong, read_count=cython.longlong,
               written_count=cython.longlong)
cdef bint _plain_model_response(ModelResponse response) except -1
cdef bint _plain_model_request(ModelRequest request) except -1

# ``value`` when it is an int (no subclass) from 0 to MAX_COUNT (2^53 - 1), else -1: a count read
# as a C integer. An int past a C long long's range is read as -1, without an exception.
cdef inline long long _count_of(object value) noexcept:
    cdef int overflow
    if type(value) is not int:
        return -1
    cdef long long count = PyLong_AsLongLongAndOverflow(value, &overflow)
    return count if 0 <= count <= 9007199254740991LL else -1
