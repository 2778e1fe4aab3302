# _keys.py's analyses of a call and of a result as extension types, so that the detectors that
# read them (_base.pxd) read their fields as C struct members. Every field is as in _keys.py.

cimport cython

cdef class ActionInfo:
    cdef readonly object key, name  # the tool's name as the driver gave it
    cdef readonly str preview
    cdef readonly tuple echoes
    cdef readonly bint edit

cdef class ResultInfo:
    cdef readonly object error
    cdef readonly tuple lines
    cdef readonly frozenset exact, masked
    cdef readonly str preview
    cdef readonly bint echo_only

# The one-entry memos of the last call's and result's analyses: C variables, written without
# changing the module's dictionary (which would send every global name read after it to be
# looked up there again).
cdef object _last_call, _last_result

# Strs the analyses make themselves (slices, lines split off), typed so that their methods are
# C calls; never what a driver gave, which may be a subclass of str (a str local takes a str only).
@cython.locals(text=str)
cpdef str _masked(object string, Py_ssize_t start, Py_ssize_t end)
@cython.locals(line=str)
cpdef object _last_exception_name(object text)
@cython.locals(head=str, tail=str, lowered=str)
cpdef object error_class(object content, bint is_error=*, object exit_code=*)
