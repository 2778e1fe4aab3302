# _tools.py's detectors' states as extension types (subclasses of _base.pxd's ToolState), so
# that a detector's step reads and writes its counts as C struct members rather than through
# slot descriptors. Every field is as in _tools.py; all are public, as the tests and the paging
# detector read them.

from haltwise.engine.detectors._base cimport ToolState
from haltwise.engine.detectors._keys cimport ActionInfo, ResultInfo

cdef class _StreakState(ToolState):
    cdef public object last_key
    cdef public Py_ssize_t streak

cdef class _SameErrorState(ToolState):
    cdef public object last, tool
    cdef public Py_ssize_t streak, tool_streak

cdef class _CycleState(ToolState):
    cdef public list actions, matches
    cdef public Py_ssize_t since_new

cdef class _ScatteredState(ToolState):
    cdef public dict counts
    cdef public object steps

cdef class _NoProgressState(ToolState):
    cdef public bint acted, moved, only_polling
    cdef public dict keys
    cdef public Py_ssize_t streak
