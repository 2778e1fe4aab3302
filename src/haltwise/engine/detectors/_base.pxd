# _base.py's window of recent results and a detector's state on its ladder as extension types,
# their fields and the results they hold typed (_keys.pxd), so that judging and keeping a result
# reads and writes C struct members. A value a field holds is as in _base.py.

cimport cython
from libc.string cimport memcpy

from haltwise.engine.detectors._keys cimport (ActionInfo, ResultInfo, analyze_call,
                                           analyze_result, holds)
from haltwise.engine.events cimport ToolCall, ToolResult
from haltwise.engine.state cimport Slot

# The memos written at every tool result are C variables, not the module's attributes: writing
# one of those would change the module's dictionary, and every global name read after it would
# be looked up there again instead of in Cython's cache.
cdef object _judged, _noted

cdef class Recent:
    cdef public Py_ssize_t size
    cdef list _items
    cdef Py_ssize_t _oldest
    cdef dict _keys
    cdef unsigned long long _signature

    @cython.locals(memo=tuple, signature=cython.ulonglong, size=Py_ssize_t, answer=bint)
    cpdef bint is_new(self, object key, ResultInfo result, bint edit=*) except -1
    @cython.locals(changed=Py_ssize_t, lines=bytes, infos=list, items=list)
    cdef bint _judge(self, object key, ResultInfo result, bint edit) except -1
    @cython.locals(info=ResultInfo, items=list, oldest=Py_ssize_t)
    cpdef push(self, object key, ResultInfo result)

# What a result (by its address, as ``id`` gives it) and the key of its action add to a window's
# signature, as 64-bit integers that wrap.
cdef inline unsigned long long _mixed(object result, object key) except? 0:
    return (<unsigned long long><size_t><void*>result) ^ <unsigned long long><long long>key

# _base.py's _line_count, _unseen_lines and _new_text over the packed line hashes (_scan.pxd's
# _packed_hashes) and the results' own tables: each hash read from the bytes as a C integer,
# then looked for in each table.
cdef inline bint _remembered(unsigned long long h, list infos, bint masked) noexcept:
    cdef ResultInfo info
    for info in infos:
        if holds(info, h, masked):
            return True
    return False

# The window's results, in a list made once for _unseen_lines and _new_text.
cdef inline list _results(list items):
    return [info for _, info in items]

cdef inline Py_ssize_t _line_count(bytes lines) noexcept:
    return len(lines) // 16

cdef inline Py_ssize_t _unseen_lines(bytes lines, list infos) except -1:
    cdef const char* pairs = lines
    cdef Py_ssize_t i, changed = 0
    cdef unsigned long long h
    for i in range(_line_count(lines)):
        memcpy(&h, pairs + 16 * i, 8)
        if not _remembered(h, infos, False):
            changed += 1
    return changed

cdef inline bint _new_text(bytes lines, list infos) except -1:
    cdef const char* pairs = lines
    cdef Py_ssize_t i
    cdef unsigned long long h
    for i in range(_line_count(lines)):
        memcpy(&h, pairs + 16 * i + 8, 8)
        if not _remembered(h, infos, True):
            return True
    return False

cdef class LadderState:
    cdef public object at, flagged, onset, what
    cdef public int level
    cdef public bint blocked

cdef class ToolState(LadderState):
    cdef public dict pending
    cdef public set refused
    cdef public Recent recent

@cython.locals(pending=dict, refused=set)
cdef ActionInfo _take_pending(ToolState state, ToolResult event)
