# _keys.py's analyses of a call and of a result as extension types, so that the detectors that
# read them (_base.pxd) read their fields as C struct members. Every field is as in _keys.py.

cimport cython
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy

# The scans' cpdef functions, called in C (``_scan.folded(text)`` and the like). Cimported by
# the module's full name: ``from haltwise.engine.detectors cimport _scan`` hides from cythonize
# that this module (and those that cimport it) must be translated again when _scan.pxd changes.
cimport haltwise.engine.detectors._scan as _scan
from haltwise.engine.events cimport ToolCall, ToolResult

cdef class ActionInfo:
    cdef readonly object key, name  # the tool's name as the driver gave it
    cdef str _preview  # the preview (a property); what it is made from until it is made
    cdef readonly tuple echoes
    cdef readonly bint edit
    cdef bint _made  # beside edit: the two fit in one word

cdef class ResultInfo:
    cdef readonly object error
    cdef readonly bytes lines  # packed (_scan.line_hashes)
    cdef str _preview  # as ActionInfo's
    cdef bint _made
    cdef readonly bint echo_only
    # The hashes of the lines remembered as seen, in memory of its own: the exact ones in the
    # first ``mask + 1`` rows, the masked ones in as many after them. A hash is looked for from
    # its own row on, row after row, until an empty one (0: a hash of 0 is kept as 1).
    cdef unsigned long long* table
    cdef Py_ssize_t mask

cdef inline Py_ssize_t _row(unsigned long long key, Py_ssize_t mask) noexcept:
    return <Py_ssize_t>((key ^ (key >> 32)) & <unsigned long long>mask)

# Whether the rows from ``rows`` on (``mask + 1`` of them) hold ``h``.
cdef inline bint _probe(unsigned long long* rows, Py_ssize_t mask, unsigned long long h) noexcept:
    cdef unsigned long long key = h if h else 1
    cdef Py_ssize_t row = _row(key, mask)
    while rows[row] != 0:
        if rows[row] == key:
            return True
        row = (row + 1) & mask
    return False

cdef inline void _put(unsigned long long* rows, Py_ssize_t mask, unsigned long long h) noexcept:
    cdef unsigned long long key = h if h else 1
    cdef Py_ssize_t row = _row(key, mask)
    while rows[row] != 0 and rows[row] != key:
        row = (row + 1) & mask
    rows[row] = key

# Each line's two hashes of ``pairs`` (packed) into the table's two halves.
cdef inline void _put_pairs(unsigned long long* table, Py_ssize_t mask, bytes pairs) noexcept:
    cdef const char* data = pairs
    cdef unsigned long long pair[2]
    cdef Py_ssize_t i
    for i in range(len(pairs) // 16):
        memcpy(pair, data + 16 * i, 16)
        _put(table, mask, pair[0])
        _put(table + mask + 1, mask, pair[1])

# _keys.py's _remember, _forget and _table_size in C: the table made (rows at most half full),
# freed and measured; and ``holds``, which reads it (_base.pxd's _remembered).
cdef inline int _remember(ResultInfo info, bytes lines, bytes middle) except -1:
    cdef Py_ssize_t size = 4, count = len(lines) // 16
    if middle is not None:
        count += len(middle) // 16
    while size < 2 * count:
        size *= 2
    cdef unsigned long long* table = <unsigned long long*>calloc(2 * size, sizeof(unsigned long long))
    if table == NULL:
        raise MemoryError()
    free(info.table)
    info.table = table
    info.mask = size - 1
    _put_pairs(table, size - 1, lines)
    if middle is not None:
        _put_pairs(table, size - 1, middle)
    return 0

cdef inline void _forget(ResultInfo info) noexcept:
    free(info.table)
    info.table = NULL

cdef inline Py_ssize_t _table_size(ResultInfo info) noexcept:
    return 0 if info.table == NULL else 2 * (info.mask + 1) * sizeof(unsigned long long)

cdef inline bint holds(ResultInfo info, unsigned long long h, bint masked) noexcept:
    if info.table == NULL:
        return False
    return _probe(info.table + (info.mask + 1 if masked else 0), info.mask, h)

# The one-entry memos of the last call's and result's analyses: C variables, written without
# changing the module's dictionary (which would send every global name read after it to be
# looked up there again).
cdef object _last_call, _last_result

cdef bint _SCANS
cdef bint _scannable(object text) noexcept

# Strs the analyses make themselves (slices, lines split off), typed so that their methods are
# C calls; never what a driver gave, which may be a subclass of str (a str local takes a str only).
@cython.locals(text=str)
cpdef str _masked(object string, Py_ssize_t start, Py_ssize_t end)
@cython.locals(line=str)
cpdef object _last_exception_name(object text)
cdef _scan.Needles _ERROR_WORDS
cdef int _KIND_WORDS, _PHRASE_WORDS, _FO
cdef tuple _PHRASES
@cython.locals(head=str, tail=str, lowered=str, words=int, needle=str, bit=int)
cpdef object error_class(object content, bint is_error=*, object exit_code=*)

# The analysis's own steps, called in C from one another (each is also a Python function).
cpdef object _masked_lines(object lines)
@cython.locals(marked=list, chosen=str, rules=bint, masked=list, wide=list, changed=bint,
               index=Py_ssize_t, line=str, done=str)
cpdef object _masked_mixed(object lines, bint every)
@cython.locals(needle=str)
cpdef bint _rule_drawn(object text) except -1
cpdef object _volatile_in(object value)
cpdef object _mask_value(object value)
@cython.locals(first=Py_UCS4, last=Py_UCS4)
cpdef object _is_flat(object arguments, object ignored)
cpdef object canonical_arguments(object arguments, object ignored=*)
cpdef object _json(object value, object option=*)
cpdef object _shorten(object text, object limit=*)
cpdef object folded(object text)
cpdef object _cut(object text, object limit=*)
cpdef str _shown(object arguments)
@cython.locals(first=Py_ssize_t)
cpdef str _preview_of(object name, str shown)
cpdef object _head_tail(object items, object most)
cpdef object _sample(object content)
@cython.locals(changed=Py_ssize_t, index=Py_ssize_t, line=str)
cpdef list _distinct(list masked, list lines)
cpdef object _line_hashes(object lines)
cpdef object _quoted(object text)
@cython.locals(found=dict, echoes=list)
cpdef object _echoes(object arguments)
@cython.locals(quoted=str, printed=str)
cdef _echoed(dict found, str text, bint value)
@cython.locals(head=str, first=str, needle=str)
cpdef object is_edit(object name, object arguments)
cpdef object _analyze_call(object name, object arguments, object ignored)
cpdef object _analyze_result(object content, object is_error, object exit_code, object echoes=*)
cdef class _Seen:
    cdef long long hash
    cdef object content  # a str, or a subclass of one a driver gave
    cdef object is_error, exit_code
    cdef tuple echoes
    cdef ResultInfo info
cdef list _results
@cython.locals(h=cython.longlong, entries=list, index=Py_ssize_t, seen=_Seen)
cpdef ResultInfo _analyze_seen_result(object content, object is_error, object exit_code,
                                      tuple echoes)
# Typed: each field read is a C struct member's.
cpdef ActionInfo analyze_call(ToolCall event, object ignored=*)
cpdef ResultInfo analyze_result(ToolResult event, ActionInfo action=*)
