# _keys.py's analyses of a call and of a result as extension types, so that the detectors that
# read them (_base.pxd) read their fields as C struct members. Every field is as in _keys.py.

cdef class ActionInfo:
    cdef readonly object key, name  # the tool's name as the driver gave it
    cdef readonly str preview
    cdef readonly tuple echoes
    cdef readonly bint edit

cdef class ResultInfo:
    cdef readonly object fingerprint, error
    cdef readonly tuple lines
    cdef readonly frozenset exact, masked
    cdef readonly str preview
    cdef readonly bint echo_only

# The one-entry memos of the last call's and result's analyses: C variables, written without
# changing the module's dictionary (which would send every global name read after it to be
# looked up there again).
cdef object _last_call, _last_result
