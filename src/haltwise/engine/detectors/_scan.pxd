# _scan.py's functions with their indices and characters as C integers: compiled, the scan
# reads the text's code points one by one in C. A branch that does not match returns -1; -2 (never
# a position) is how one that fails would say so, and a test that cannot fail says nothing.

cimport cython
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from libc.string cimport memcmp, memcpy, memset
from cpython.unicode cimport (PyUnicode_1BYTE_KIND, PyUnicode_2BYTE_KIND, PyUnicode_DATA,
                              PyUnicode_FindChar, PyUnicode_FromKindAndData,
                              PyUnicode_GET_LENGTH, PyUnicode_KIND, PyUnicode_READ,
                              Py_UNICODE_ISDECIMAL, Py_UNICODE_ISSPACE)

ctypedef Py_ssize_t Index

cdef extern from *:
    """
    #include <string.h>
    /* Eight bytes from p as a little-endian word, wherever p points. */
    static inline unsigned long long haltwise_word(const unsigned char* p) {
        unsigned long long word;
        memcpy(&word, p, 8);
    #if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
        word = __builtin_bswap64(word);
    #endif
        return word;
    }
    """
    unsigned long long _word "haltwise_word"(const unsigned char* p) noexcept nogil

cdef extern from *:
    """
    /* The index of the lowest bit set in bits (not 0). */
    #if defined(__GNUC__) || defined(__clang__)
    #define haltwise_lowest_bit(bits) ((unsigned int)__builtin_ctzll(bits))
    #else
    static inline unsigned int haltwise_lowest_bit(unsigned long long bits) {
        unsigned int k = 0;
        while (!(bits & 1u)) { bits >>= 1; k++; }
        return k;
    }
    #endif
    """
    unsigned int _lowest_bit "haltwise_lowest_bit"(unsigned long long bits) noexcept nogil

# The high bit of each byte of ``word`` that may be white space: at or below 0x20 (ASCII's white
# space is) or past ASCII; and now and then of a byte just above one of those (a borrow), never
# of one below the first.
cdef inline unsigned long long _maybe_blank(unsigned long long word) noexcept:
    return ((word - 0x2121212121212121ULL) | word) & 0x8080808080808080ULL

# The high bit of each byte of ``word`` that is zero, and of no other.
cdef inline unsigned long long _zero_bytes(unsigned long long word) noexcept:
    return ~(((word & 0x7F7F7F7F7F7F7F7FULL) + 0x7F7F7F7F7F7F7F7FULL) | word
             | 0x7F7F7F7F7F7F7F7FULL)

# How many bytes' high bits ``flagged`` (high bits only) holds: each made the low bit of its
# byte, then all the bytes summed into the highest by one multiplication.
cdef inline Py_ssize_t _flagged_count(unsigned long long flagged) noexcept:
    return <Py_ssize_t>(((flagged >> 7) * 0x0101010101010101ULL) >> 56)

# _scan.py's table of the pairs of characters that a branch can start with, read as a C array
# (_PAIRS holds it).
cdef const unsigned char* _pairs

# A str's characters where they lie: the bytes each takes (1, 2 or 4) and where they start. The
# scans read a text's characters through it, each with one switch on the kind, not with the
# tests of the str that indexing it repeats for every character. It does not hold the str: each
# is made from a str its caller holds, and which Python has read already (``len``, ``in``,
# ``isascii``), so it is in its final form (a str made by the C API before Python 3.12 may not
# be until then).
cdef struct Text:
    int kind
    void* data

cdef inline Text _view(str text) noexcept:
    return Text(PyUnicode_KIND(text), PyUnicode_DATA(text))

cdef inline Py_UCS4 _char(Text text, Index i) noexcept:
    return PyUnicode_READ(text.kind, text.data, i)

# Whether a branch can start with ``first`` followed by ``second`` (ASCII; ``second`` 0 at the
# end of the text or past ASCII), as ``_pairs`` says: one bit per pair, in the half of the table
# for a scan with the rules or the one without.
cdef inline bint _starts(const unsigned char* table, unsigned int first,
                         unsigned int second) noexcept:
    return (table[16 * first + (second >> 3)] >> (second & 7)) & 1

# The first index from ``i`` on at which a branch can start in ``text``, or ``n``: a text of one
# byte per character (every text ``spans`` reads) is read as bytes.
cdef inline Index _skip(Text text, Index n, Index i, bint rules) noexcept:
    cdef const unsigned char* chars = <const unsigned char*>text.data
    cdef const unsigned char* table = _pairs + (2048 if rules else 0)
    cdef unsigned int c, second
    if text.kind == PyUnicode_1BYTE_KIND:
        while i < n:
            c = chars[i]
            if c < 128:
                second = chars[i + 1] if i + 1 < n else 0
                if _starts(table, c, second if second < 128 else 0):
                    break
            i += 1
        return i
    while i < n:
        c = _char(text, i)
        if c < 128:
            second = _char(text, i + 1) if i + 1 < n else 0
            if _starts(table, c, second if second < 128 else 0):
                break
        i += 1
    return i

# Where the line of ``text`` that holds ``begin`` ends: its next line break, or ``n``.
cdef inline Index _line_end(str text, Index begin, Index n) except -2:
    cdef Index end = PyUnicode_FindChar(text, 10, begin, n, 1)
    return n if end < 0 else end

# Where the line of ``text`` that ends at ``end`` starts: after the line break before it, or 0.
cdef inline Index _line_start(str text, Index end) except -2:
    cdef Index before = PyUnicode_FindChar(text, 10, 0, end, -1)
    return 0 if before < 0 else before + 1

# Whether ``line`` holds an ASCII digit: a line of one byte per character read as bytes, eight
# at a time while they are ASCII (``_digits_in``).
cdef inline bint _has_digit(str line) noexcept:
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(line)
    cdef int kind = PyUnicode_KIND(line)
    cdef void* data = PyUnicode_DATA(line)
    cdef const unsigned char* chars = <const unsigned char*>data
    cdef Py_ssize_t i = 0
    cdef unsigned long long word
    cdef Py_UCS4 c
    if kind == PyUnicode_1BYTE_KIND:
        while i + 8 <= n:
            word = _word(chars + i)
            if word & 0x8080808080808080ULL:
                break  # past ASCII: read one by one from here
            if _digits_in(word):
                return True
            i += 8
        while i < n:
            if <unsigned char>(chars[i] - 48) < 10:
                return True
            i += 1
        return False
    for i in range(n):
        c = PyUnicode_READ(kind, data, i)
        if 48 <= c <= 57:
            return True
    return False

# Whether ``c`` is one of the glyphs a rule is drawn with: ``=-_~*#``.
cdef inline bint _is_glyph(Py_UCS4 c) noexcept:
    return c == 61 or c == 45 or c == 95 or c == 126 or c == 42 or c == 35

# Whether three of a rule's glyphs stand in a row in ``line``, all the same one (_scan.py's
# _draws_rule): where three characters in a row are the same one, whether it is a glyph. A line
# of one byte per character is read eight positions at a time: the bytes from each position,
# from the next and from the one after, as three words; a byte of the first that equals its
# two neighbours in the others makes a zero byte of their differences, and only those
# positions are asked about (in most lines, none).
cdef inline bint _draws_rule(str line) noexcept:
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(line)
    cdef int kind = PyUnicode_KIND(line)
    cdef void* data = PyUnicode_DATA(line)
    cdef const unsigned char* chars = <const unsigned char*>data
    cdef Py_ssize_t i = 0
    cdef unsigned long long first, differ, same
    cdef Py_UCS4 c
    if kind == PyUnicode_1BYTE_KIND:
        while i + 10 <= n:
            first = _word(chars + i)
            differ = (first ^ _word(chars + i + 1)) | (first ^ _word(chars + i + 2))
            same = _zero_bytes(differ)
            while same:
                if _is_glyph(chars[i + (_lowest_bit(same) >> 3)]):
                    return True
                same &= same - 1
            i += 8
    while i + 2 < n:
        c = PyUnicode_READ(kind, data, i)
        if (
            _is_glyph(c)
            and PyUnicode_READ(kind, data, i + 1) == c
            and PyUnicode_READ(kind, data, i + 2) == c
        ):
            return True
        i += 1
    return False

# The characters of a str as its kind lays them out (one, two or four bytes each), for the
# loops written once for every kind.
ctypedef fused Char:
    unsigned char
    unsigned short
    unsigned int

# ``_fold``'s loop, over the characters of one kind: it writes at most ``size`` of them to
# ``out`` and says how many it wrote.
cdef inline Index _fold_in(const Char* text, Index start, Index end, Char* out,
                           Index size) noexcept:
    cdef Index length = 0
    cdef bint spaced = False
    cdef Char c
    while start < end:
        c = text[start]
        start += 1
        if Py_UNICODE_ISSPACE(c):
            spaced = length > 0
            continue
        if spaced:
            if length >= size:
                break
            out[length] = 32
            length += 1
            spaced = False
        if length >= size:
            break
        out[length] = c
        length += 1
    return length

# ``_fold_in`` for a text of one byte per character, which copies a run of eight ASCII characters
# that are not white space (none at or below 0x20, the highest of ASCII's) at once: a word
# finds the first byte that is white space, a control or past ASCII, and that one is read
# alone. It writes past ``size`` (eight bytes at most: ``out`` has room), and says how many of
# those it wrote are kept.
cdef inline Index _fold_bytes(const unsigned char* text, Index start, Index end,
                              unsigned char* out, Index size) noexcept:
    cdef Index length = 0, run
    cdef bint spaced = False
    cdef unsigned long long word, special
    cdef unsigned char c
    while start < end and length < size:
        c = text[start]
        if Py_UNICODE_ISSPACE(c):
            spaced = length > 0
            start += 1
            continue
        if spaced:
            out[length] = 32
            length += 1
            spaced = False
            if length >= size:
                break
        while start + 8 <= end and length < size:
            word = _word(text + start)
            special = _maybe_blank(word)
            run = 8 if special == 0 else <Index>(_lowest_bit(special) >> 3)
            memcpy(out + length, text + start, 8)
            start += run
            length += run
            if run < 8:
                break
        if start < end and length < size and not Py_UNICODE_ISSPACE(text[start]):
            out[length] = text[start]
            length += 1
            start += 1
    return min(length, size)

# The characters of ``text`` from ``start`` to ``end`` with their white space folded as
# ``" ".join(...split())`` folds it (``Py_UNICODE_ISSPACE`` is what ``str.split`` splits at), cut
# to ``most`` characters: written once into a buffer of the text's kind, and made a str from it.
cdef inline str _fold(Text text, Index start, Index end, Index most):
    cdef Index size = min(end - start, most)
    cdef Index length = 0
    if size <= 0:
        return ""
    # A line (at most 240 characters, ``_keys.MAX_LINE_CHARS``) is written on the stack.
    cdef char line[1024]
    cdef void* data = line
    if size * text.kind + 8 > 1024:  # eight bytes over for ``_fold_bytes``
        data = PyMem_Malloc(size * text.kind + 8)
        if data == NULL:
            raise MemoryError()
    try:
        # Read and written as the kind lays them out, with no switch on the kind for each.
        if text.kind == PyUnicode_1BYTE_KIND:
            length = _fold_bytes(<unsigned char*>text.data, start, end, <unsigned char*>data, size)
        elif text.kind == PyUnicode_2BYTE_KIND:
            length = _fold_in(<unsigned short*>text.data, start, end, <unsigned short*>data, size)
        else:
            length = _fold_in(<unsigned int*>text.data, start, end, <unsigned int*>data, size)
        return PyUnicode_FromKindAndData(text.kind, data, length)
    finally:
        if data != <void*>line:
            PyMem_Free(data)

@cython.locals(n=Index, i=Index, end=Index, c=Py_UCS4, tmp=bint, short=bint,
               digits_end=Index, hex_end=Index, duration=Index, after=Index, chars=Text)
cpdef list spans(str text, bint rules)
@cython.locals(lines=list, line=str, n=Index, begin=Index, end=Index, chars=Text)
cpdef list folded_lines(str text, Index most)
@cython.locals(n=Index)
cpdef str folded(str text)
@cython.locals(spaced=bint, i=Index, c=Py_UCS4)
cdef bint _is_folded(str text, Index start) noexcept
@cython.locals(i=Index, j=Index, n=Index, m=Index, chars=Text, others=Text)
cpdef bint same_words(str first, str second) except -1
cpdef bytes line_hashes(list lines)
cpdef long long text_hash(str text)
cdef unsigned long long _SEED, _MULTIPLIER, _FINAL_1, _FINAL_2, _LOW_64
@cython.locals(line=str, scanned=Index, size=Index, rules=bint, chosen=list,
               index=Index, masked=list, changed=bint, done=str)
cpdef list masked_lines(list lines, bint every)
@cython.locals(plain=str, c=Py_UCS4)
cpdef object lowered(object text)
@cython.locals(line=str)
cpdef bint names_temp_path(list lines) except -1
@cython.locals(line=str)
cpdef bint all_ascii(list lines) except -1
@cython.locals(chars=Text, end=Index, start=Index, run=Index, dot=Index, first=Index, c=Py_UCS4,
               kind=str)
cpdef object exception_name(str text)
@cython.locals(n=Index, chars=Text, dashes=Index, digit=bint, i=Index, c=Py_UCS4)
cpdef bint volatile_argument(str text) except -1
@cython.locals(found=list, n=Index, chars=Text, i=Index, quote=Py_UCS4, end=Index, limit=Index)
cpdef list quoted(str text)
@cython.locals(found=list, pieces=list, last=Index, index=Index, start=Index)
cpdef str mask_line(str line, bint rules)
@cython.locals(chars=Text, first=Py_UCS4, size=Index, glued=bint, colon=Index, second=Py_UCS4,
               last=Py_UCS4)
cpdef str mask(str text, Index start, Index end)
cdef dict _RULES
@cython.locals(pieces=list, i=Index, c=Py_UCS4)
cdef str _numbers_as_n(Text text, Index start, Index end)
@cython.locals(size=Index)
cdef bint _local_host(Text text, Index start, Index end) noexcept
cdef Index _unit_start(Text text, Index start, Index end) noexcept
@cython.locals(i=Index, c=Py_UCS4)
cdef bint _has_hex_letter(Text text, Index start, Index end, bint lower_only) noexcept
@cython.locals(i=Index)
cdef bint _has_decimal(Text text, Index start, Index end) noexcept
@cython.locals(i=Index, digits=Index, bar=Index)
cdef Index _line_number_end(Text text, Index start, Index end) noexcept

# The tests of one character, inlined where the scans make them (at most characters they read).
cdef inline bint _is_decimal(Py_UCS4 c) noexcept
cdef inline bint _is_digit(Py_UCS4 c) noexcept
cdef inline bint _is_hex(Py_UCS4 c) noexcept
cdef inline bint _is_word(Py_UCS4 c) noexcept
cdef inline bint _is_space(Py_UCS4 c) noexcept
cdef inline Py_UCS4 _next(Text text, Index n, Index i) noexcept
cdef inline bint _boundary(Text text, Index n, Index i) noexcept
cdef Index _digits(Text text, Index n, Index i) noexcept
@cython.locals(c=Py_UCS4)
cdef inline bint _goes_on(Text text, Index n, Index run) noexcept
@cython.locals(c=Py_UCS4)
cdef inline bint _inert_run(Text text, Index n, Index run) noexcept
@cython.locals(end=Index)
cdef bint _count(Text text, Index n, Index i, Index many, bint hex_digits) noexcept
@cython.locals(size=Index, k=Index)
cdef bint _at(Text text, Index n, Index i, str word) noexcept
cdef Index _fraction(Text text, Index n, Index i, bint comma) noexcept

@cython.locals(end=Index, c=Py_UCS4)
cdef Index _from_digit(Text text, Index n, Index i, Index hex_end, Index duration,
                       Index after) except -2
@cython.locals(end=Index)
cdef Index _after_run(Text text, Index n, Index run) except -2
cdef Index _uuid(Text text, Index n, Index i) except -2
@cython.locals(end=Index, zone=Index)
cdef Index _date(Text text, Index n, Index i) except -2
@cython.locals(colon=Index)
cdef Index _clock(Text text, Index n, Index i) except -2
@cython.locals(i=Index, end=Index)
cdef Index _duration(Text text, Index n, Index run) except -2
@cython.locals(c=Py_UCS4)
cdef bint _is_unit(Text text, Index n, Index i, Index size) noexcept
cdef Index _hex_run(Text text, Index n, Index i) noexcept
cdef Index _hex_id(Text text, Index n, Index i, Index end) except -2
@cython.locals(left=Index)
cdef Index _progress(Text text, Index n, Index run) except -2
@cython.locals(i=Index)
cdef Index _rate(Text text, Index n, Index run) except -2
@cython.locals(i=Index)
cdef Index _minutes(Text text, Index n, Index run) except -2
@cython.locals(start=Index, end=Index)
cdef Index _port(Text text, Index n, Index i, str host) except -2
@cython.locals(c=Py_UCS4, word=Index, start=Index, end=Index, last=Index)
cdef Index _numbered(Text text, Index n, Index i) except -2
@cython.locals(end=Index)
cdef Index _temp_name(Text text, Index n, Index i) except -2
@cython.locals(end=Index)
cdef Index _shell_line(Text text, Index n, Index i) except -2
@cython.locals(start=Index, end=Index, second=Py_UCS4)
cdef Index _temp_path(Text text, Index n, Index i) except -2
@cython.locals(end=Index)
cdef Index _rule(Text text, Index n, Index i) except -2


# line_hashes's two streams (_scan.py), each hashed as it is fed: its state (``h``), the bytes
# fed since the last word was mixed in (``pending``, ``count`` of them) and its length.
cdef struct Stream:
    unsigned long long h
    unsigned long long pending
    int count
    Py_ssize_t size

cdef inline unsigned long long _mix(unsigned long long h, unsigned long long word) noexcept:
    h = (h ^ word) * _MULTIPLIER
    return h ^ (h >> 29)

cdef inline long long _finished(unsigned long long h) noexcept:
    h ^= h >> 33
    h *= _FINAL_1
    h ^= h >> 33
    h *= _FINAL_2
    h ^= h >> 33
    return <long long>h

# ``size`` bytes at once (at most eight, the low ones of ``data``).
cdef inline void _feed_bytes(Stream* stream, unsigned long long data, int size) noexcept:
    cdef int count = stream.count
    stream.size += size
    if count + size < 8:
        stream.pending |= data << (8 * count)
        stream.count = count + size
    elif count == 0:  # size is 8
        stream.h = _mix(stream.h, data)
    else:
        stream.h = _mix(stream.h, stream.pending | (data << (8 * count)))
        stream.pending = data >> (64 - 8 * count) if count + size > 8 else 0
        stream.count = count + size - 8

cdef inline void _feed_char(Stream* stream, Py_UCS4 c) noexcept:
    cdef unsigned long long code = <unsigned long long>c  # a number, not a character
    if code < 128:
        _feed_bytes(stream, code, 1)
    else:
        _feed_bytes(stream, 0x80, 1)
        _feed_bytes(stream, code & 0xFF, 1)
        _feed_bytes(stream, (code >> 8) & 0xFF, 1)
        _feed_bytes(stream, code >> 16, 1)

# One character into both streams, the second with a run of decimal digits as one "#"; whether
# it is a decimal digit (``run`` says whether the one before was).
cdef inline bint _feed_both(Stream* exact, Stream* masked, Py_UCS4 c, bint run) noexcept:
    _feed_char(exact, c)
    if (48 <= c <= 57) or (c >= 128 and Py_UNICODE_ISDECIMAL(c)):
        if not run:
            _feed_bytes(masked, 35, 1)
        return True
    _feed_char(masked, c)
    return False

# Eight ASCII bytes with a digit among them into the second stream alone (the first took them
# whole), masked in the word: the first digit of each run (the bytes' high bits in ``starts``)
# made ``#``, every other digit taken out, the bytes above it moved down; then fed at once.
# Whether the last is a digit (``run`` says whether the byte before the first was).
cdef inline bint _feed_masked(Stream* masked, unsigned long long word, bint run) noexcept:
    cdef unsigned long long digits = _digits_in(word)
    cdef unsigned long long before = (digits << 8) | (0x80ULL if run else 0)  # the byte before
    cdef unsigned long long starts = digits & ~before
    cdef unsigned long long dropped = digits & before
    cdef unsigned long long whole = (starts >> 7) * 0xFF  # each byte of a start, all ones
    cdef unsigned long long low
    cdef unsigned int bit
    cdef int size = 8
    word = (word & ~whole) | (0x2323232323232323ULL & whole)
    while dropped:
        bit = _lowest_bit(dropped)  # the high bit of the lowest byte taken out
        low = (1ULL << (bit - 7)) - 1  # the bytes below it
        word = (word & low) | ((word >> 8) & ~low)
        dropped = (dropped ^ (1ULL << bit)) >> 8  # the others, each moved down with its byte
        size -= 1
    _feed_bytes(masked, word, size)
    return (digits >> 63) != 0

cdef inline long long _hashed(Stream* stream) noexcept:
    cdef unsigned long long h = stream.h
    if stream.count:
        h = _mix(h, stream.pending)  # the last word, padded with zeros
    return _finished(h ^ <unsigned long long>stream.size)

# Whether ``tmp`` or ``/var/folders`` stands at ``i`` of the ``n`` bytes ``chars``, where an
# ``m`` or a ``/`` stands: the ``m`` of ``tmp``, or the ``/`` that ``/var/folders`` starts with.
cdef inline bint _temp_at(const unsigned char* chars, Py_ssize_t n, Py_ssize_t i) noexcept:
    if chars[i] == 109:  # m
        return 0 < i < n - 1 and chars[i - 1] == 116 and chars[i + 1] == 112
    return i + 12 <= n and chars[i + 1] == 118 and memcmp(chars + i, b"/var/folders", 12) == 0

# ``_names_temp`` (_scan.py): a line of one byte per character read eight at a time, each ``m``
# and ``/`` among them (most words hold neither) compared with what it may stand in; any other
# line searched for each.
cdef inline bint _names_temp(str line) except -1:
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(line), i = 0
    cdef const unsigned char* chars = <const unsigned char*>PyUnicode_DATA(line)
    cdef unsigned long long word, found
    if PyUnicode_KIND(line) != PyUnicode_1BYTE_KIND:
        return "tmp" in line or "/var/folders" in line
    while i + 8 <= n:
        word = _word(chars + i)
        found = (_zero_bytes(word ^ 0x6D6D6D6D6D6D6D6DULL)
                 | _zero_bytes(word ^ 0x2F2F2F2F2F2F2F2FULL))
        while found:
            if _temp_at(chars, n, i + (_lowest_bit(found) >> 3)):
                return True
            found &= found - 1
        i += 8
    while i < n:
        if (chars[i] == 109 or chars[i] == 47) and _temp_at(chars, n, i):
            return True
        i += 1
    return False

# ``text_hash`` (_scan.py): the bytes the str keeps its characters in (one, two or four each: equal
# strs have the same kind), eight at a time, the last few padded with zeros.
cdef inline long long _text_hash(str text) noexcept:
    cdef Py_ssize_t size = PyUnicode_GET_LENGTH(text) * PyUnicode_KIND(text)
    cdef const unsigned char* data = <const unsigned char*>PyUnicode_DATA(text)
    cdef unsigned long long h = _SEED, last = 0
    cdef Py_ssize_t i = 0
    while i + 8 <= size:
        h = _mix(h, _word(data + i))
        i += 8
    if i < size:
        memcpy(&last, data + i, size - i)
        h = _mix(h, last)
    return _finished(h ^ <unsigned long long>size)

# ``lines`` (strs) without those equal to one before them, in order, as a dict's keys would be:
# each line is looked for by its ``_text_hash`` in a table of the lines kept (their hashes and
# places, open addressing, at most half full; on the stack for up to 32 lines), and compared only
# with a line of the same hash. ``lines`` itself when they are all distinct.
cdef inline list _distinct_lines(list lines):
    cdef Py_ssize_t count = len(lines), size = 64, row, i
    if count < 2:
        return lines
    while size < 2 * count:
        size *= 2
    cdef long long stack_hashes[64]
    cdef Py_ssize_t stack_places[64]  # a line's index plus one; 0 for an empty row
    cdef long long* hashes = stack_hashes
    cdef Py_ssize_t* places = stack_places
    if size > 64:
        hashes = <long long*>PyMem_Malloc(size * sizeof(long long))
        places = <Py_ssize_t*>PyMem_Malloc(size * sizeof(Py_ssize_t))
        if hashes == NULL or places == NULL:
            PyMem_Free(hashes)
            PyMem_Free(places)
            raise MemoryError()
    memset(places, 0, size * sizeof(Py_ssize_t))
    cdef list kept = None  # made at the first line seen before
    cdef str line
    cdef long long h
    cdef bint seen
    try:
        for i in range(count):
            line = lines[i]
            h = _text_hash(line)
            row = <Py_ssize_t>(<unsigned long long>h & <unsigned long long>(size - 1))
            seen = False
            while places[row]:
                if hashes[row] == h and <str>lines[places[row] - 1] == line:
                    seen = True
                    break
                row = (row + 1) & (size - 1)
            if seen:
                if kept is None:
                    kept = lines[:i]
            else:
                hashes[row] = h
                places[row] = i + 1
                if kept is not None:
                    kept.append(line)
    finally:
        if size > 64:
            PyMem_Free(hashes)
            PyMem_Free(places)
    return lines if kept is None else kept

# The high bit of each byte of ``word`` (ASCII) that is a digit: 0x30 + 0x50 and 0x39 + 0x46
# are the first to reach 0x80, and no byte below 0x80 carries into the next.
cdef inline unsigned long long _digits_in(unsigned long long word) noexcept:
    return (word + 0x5050505050505050ULL) & ~(word + 0x4646464646464646ULL) & 0x8080808080808080ULL

# ``line``'s two hashes, written to ``out[0]`` and ``out[1]``.
cdef inline void _write_pair(str line, long long* out) noexcept:
    cdef Stream exact = Stream(_SEED, 0, 0, 0)
    cdef Stream masked = Stream(_SEED, 0, 0, 0)
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(line)
    cdef int kind = PyUnicode_KIND(line)
    cdef void* data = PyUnicode_DATA(line)
    cdef const unsigned char* chars = <const unsigned char*>data
    cdef Py_ssize_t i = 0, j
    cdef unsigned long long word
    cdef bint run = False
    if kind == PyUnicode_1BYTE_KIND:
        while i + 8 <= n:
            word = _word(chars + i)
            if word & 0x8080808080808080ULL:  # a character past ASCII
                for j in range(i, i + 8):
                    run = _feed_both(&exact, &masked, chars[j], run)
            else:
                _feed_bytes(&exact, word, 8)
                if _digits_in(word) == 0:
                    _feed_bytes(&masked, word, 8)
                    run = False
                else:
                    run = _feed_masked(&masked, word, run)
            i += 8
    while i < n:
        run = _feed_both(&exact, &masked, PyUnicode_READ(kind, data, i), run)
        i += 1
    out[0] = _hashed(&exact)
    out[1] = _hashed(&masked)

# ``line_hashes``: each line's two hashes, one after the other, in a bytes made for them.
cdef inline bytes _packed_hashes(list lines):
    cdef bytes packed = PyBytes_FromStringAndSize(NULL, 16 * len(lines))
    cdef char* out = PyBytes_AS_STRING(packed)
    cdef long long pair[2]
    cdef str line
    for line in lines:
        _write_pair(line, pair)
        memcpy(out, pair, 16)
        out += 16
    return packed


# Needles (_scan.py): its words as bytes (``_bytes``, which ``_word`` points into) and their
# lengths, and for each pair of ASCII characters (the first times 128 plus the second) the words
# that start with it, in either case, one bit each.
cdef class Needles:
    cdef readonly tuple words
    cdef tuple _bytes
    cdef const unsigned char* _word[16]
    cdef Py_ssize_t _size[16]
    cdef unsigned short _pairs[16384]
    cpdef int found(self, str text) except -1

@cython.locals(word=str, found=int, bit=int)
cdef int _found_lowered(tuple words, str lowered) except -1

cdef inline unsigned char _lower(unsigned char c) noexcept:
    return c | 0x20 if 65 <= c <= 90 else c

cdef inline int _index(Needles needles) except -1:
    cdef Py_ssize_t k
    cdef bytes word
    cdef unsigned char first, second
    memset(needles._pairs, 0, sizeof(needles._pairs))
    needles._bytes = tuple([text.encode("ascii") for text in needles.words])
    for k in range(len(needles._bytes)):
        word = needles._bytes[k]
        needles._word[k] = word
        needles._size[k] = len(word)
        first = word[0]
        second = word[1]
        for a in (first, first ^ 0x20 if 97 <= first <= 122 else first):
            for b in (second, second ^ 0x20 if 97 <= second <= 122 else second):
                needles._pairs[(a << 7) | b] |= 1 << k
    return 0

# Whether ``word`` (``size`` lower-case bytes) stands at ``i`` of the text ``chars`` (``n``
# bytes), in any case.
cdef inline bint _stands(const unsigned char* chars, Py_ssize_t n, Py_ssize_t i,
                         const unsigned char* word, Py_ssize_t size) noexcept:
    cdef Py_ssize_t j
    if i + size > n:
        return False
    for j in range(size):
        if _lower(chars[i + j]) != word[j]:
            return False
    return True

# A pair of characters is looked up by the low seven bits of each: a character past ASCII may
# pick a word that it does not start, which ``_stands`` then rejects.
cdef inline int _found(Needles needles, str text) except -1:
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(text), i
    cdef const unsigned char* chars
    cdef unsigned int found = 0, every, candidates, k, pair
    if PyUnicode_KIND(text) != PyUnicode_1BYTE_KIND:
        return _found_lowered(needles.words, text.lower())
    if n < 2:
        return 0
    every = (1u << len(needles.words)) - 1
    chars = <const unsigned char*>PyUnicode_DATA(text)
    pair = chars[0] & 0x7F
    for i in range(n - 1):
        pair = ((pair << 7) | (chars[i + 1] & 0x7F)) & 0x3FFF  # this character and the next
        candidates = needles._pairs[pair]
        if candidates == 0:
            continue
        candidates &= ~found
        while candidates:
            k = _lowest_bit(candidates)
            candidates &= candidates - 1
            if _stands(chars, n, i, needles._word[k], needles._size[k]):
                found |= 1u << k
        if found == every:
            break
    return <int>found
