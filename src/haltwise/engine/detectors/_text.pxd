# _text.py's search for a chanted chunk with its positions and lengths as C integers, and the
# strs and lists it reads typed, so that its loops over a segment's places run in C. Every
# segment and word is a str the search made itself (joined or split), never a subclass of str.
# Three of its functions are written here in C, over a str's characters where they lie and with
# a table in memory of its own, kept from one count to the next: the two counts of a text that
# decide whether it is searched at all, of its words (``_repeated_word``) and of the beginnings
# of its chunks (``_repeated_chunk``, compiled only), and the count of a segment's words
# (``_word_table``).

cimport cython
from cpython.mem cimport PyMem_Free, PyMem_Malloc
from cpython.unicode cimport PyUnicode_DATA, PyUnicode_KIND, PyUnicode_READ, Py_UNICODE_ISSPACE
from libc.stdlib cimport calloc, free
from libc.string cimport memset

from haltwise.engine.detectors._scan cimport (Char, _flagged_count, _lowest_bit, _maybe_blank,
                                              _mix, _word)

from haltwise.engine.detectors._keys cimport folded
from haltwise.engine.detectors._scan cimport same_words

@cython.locals(segments=list, items=list, current=list, in_code=bint, line=str, head=Py_UCS4,
               stripped=str, first=Py_UCS4)
cpdef tuple _split_markdown(str text)
cdef int _flush(list segments, list current) except -1
@cython.locals(seen=dict, position=Py_ssize_t, piece=str, found=list)
cpdef object _chant(str segment, list places, Py_ssize_t chunk, Py_ssize_t repeats,
                    Py_ssize_t max_gap)
@cython.locals(places=list, limit=Py_ssize_t, position=Py_ssize_t, following=Py_ssize_t)
cpdef list _chunk_starts(str segment, Py_ssize_t chunk)
@cython.locals(places=list, limit=Py_ssize_t, position=Py_ssize_t, word=str)
cpdef list _frequent_word_starts(str segment, list words, Py_ssize_t chunk, Py_ssize_t repeats)

# The table a text's or a segment's words are counted in (``_repeated_bytes``, ``_repeated_in``,
# ``_word_table``), kept from one count to the next rather than made and zeroed for each: rows
# of a hash and, in a second word, the stamp of the count that wrote it (its high 32 bits) and
# the hash's count. A row stamped by an earlier count is empty for this one. Only C runs while
# words are counted and their counts read (the GIL held, no Python called), so no two counts use
# it at once. It holds twice the words of the longest text counted, at most (``_MAX_TEXT``
# characters: 256 KB).
cdef unsigned long long* _rows
cdef Py_ssize_t _row_count
cdef unsigned long long _stamp

# The table for a count of ``entries`` words at most (a power of two of rows, at least twice the
# entries), stamped anew; or NULL when there is no memory for it. ``mask`` is set to its rows
# less one.
cdef inline unsigned long long* _stamped_table(Py_ssize_t entries, Py_ssize_t* mask) noexcept:
    global _rows, _row_count, _stamp
    cdef Py_ssize_t size = 16
    cdef unsigned long long* rows
    while size < 2 * entries:
        size *= 2
    if size > _row_count:
        rows = <unsigned long long*>calloc(2 * size, sizeof(unsigned long long))
        if rows == NULL:
            return NULL
        free(_rows)
        _rows = rows
        _row_count = size
        _stamp = 0  # the rows are zeroed: no count has stamped them
    _stamp += 1
    if _stamp > 0xFFFFFFFFULL:
        memset(_rows, 0, 2 * _row_count * sizeof(unsigned long long))
        _stamp = 1
    mask[0] = size - 1
    return _rows

# Count the hash ``h`` in ``table`` (a stamped one, probed from the hash's own row): its row.
cdef inline Py_ssize_t _counted(unsigned long long* table, Py_ssize_t mask,
                                unsigned long long h) noexcept:
    cdef unsigned long long mark = _stamp << 32
    cdef Py_ssize_t row = <Py_ssize_t>(h & <unsigned long long>mask)
    while (table[2 * row + 1] & 0xFFFFFFFF00000000ULL) == mark:
        if table[2 * row] == h:
            table[2 * row + 1] += 1
            return row
        row = (row + 1) & mask
    table[2 * row] = h
    table[2 * row + 1] = mark | 1
    return row

# How often the hash of ``row`` was counted.
cdef inline Py_ssize_t _count_at(unsigned long long* table, Py_ssize_t row) noexcept:
    return <Py_ssize_t>(table[2 * row + 1] & 0xFFFFFFFFULL)

# ``_text._word_starts`` in C: each word's start and row in memory of its own rather than in
# arrays made per segment, the words counted in the kept table.
cdef inline object _word_table(str segment, Py_ssize_t chunk, Py_ssize_t repeats):
    cdef Py_ssize_t n = len(segment)
    cdef int kind = PyUnicode_KIND(segment)
    cdef void* data = PyUnicode_DATA(segment)
    cdef Py_ssize_t count = 1
    cdef Py_ssize_t index, row, mask, seen, limit
    cdef Py_ssize_t start = 0
    cdef Py_ssize_t word = 0
    cdef Py_ssize_t most = 0
    # FNV-1a, 64 bits: its offset basis and prime.
    cdef unsigned long long basis = 0xCBF29CE484222325ULL
    cdef unsigned long long prime = 0x100000001B3ULL
    cdef unsigned long long h = basis
    cdef Py_UCS4 c
    cdef Py_ssize_t kept = 0
    for index in range(n):
        if PyUnicode_READ(kind, data, index) == 32:
            count += 1
    cdef Py_ssize_t* words = <Py_ssize_t*>PyMem_Malloc(2 * count * sizeof(Py_ssize_t))
    cdef unsigned long long* table = _stamped_table(count, &mask)
    try:
        if words == NULL or table == NULL:
            raise MemoryError()
        index = 0
        while index <= n:
            c = PyUnicode_READ(kind, data, index) if index < n else 32
            index += 1
            if c != 32:
                h = (h ^ <unsigned long long>c) * prime
                continue
            if index - 1 - start >= chunk:
                return None
            row = _counted(table, mask, h)
            seen = _count_at(table, row)
            if seen > most:
                most = seen
            words[2 * word] = start
            words[2 * word + 1] = row
            word += 1
            h = basis
            start = index
        if most < repeats:
            return []
        # The starts kept are gathered in C (over those read already) before a list is made of
        # them: no Python runs while the table is read.
        limit = n - chunk
        for word in range(count):
            start = words[2 * word]
            if start > limit:
                break
            if _count_at(table, words[2 * word + 1]) >= repeats:
                words[kept] = start
                kept += 1
        return [words[word] for word in range(kept)]
    finally:
        PyMem_Free(words)

# ``_text._may_chant`` in C: the words of ``text`` (runs of characters that are not white
# space) counted by an FNV-1a hash of each, its leading ``>`` aside, in a table of their own.
cdef inline bint _repeated_word(str text, Py_ssize_t chunk, Py_ssize_t repeats) except -1:
    cdef int kind = PyUnicode_KIND(text)
    cdef void* data = PyUnicode_DATA(text)
    if kind == 1:
        return _repeated_bytes(<const unsigned char*>data, len(text), chunk, repeats)
    if kind == 2:
        return _repeated_in(<const unsigned short*>data, len(text), chunk, repeats)
    return _repeated_in(<const unsigned int*>data, len(text), chunk, repeats)

# A word's bytes (from ``start`` to ``end``) hashed eight at a time, the last ones padded with
# zeros, then its length: each step a bijection of the state for what it mixes in.
cdef inline unsigned long long _bytes_hash(const unsigned char* text, Py_ssize_t start,
                                           Py_ssize_t end) noexcept:
    cdef unsigned long long h = 0
    cdef unsigned long long tail = 0
    cdef Py_ssize_t i = start, k
    while i + 8 <= end:
        h = _mix(h, _word(text + i))
        i += 8
    for k in range(end - i):
        tail |= (<unsigned long long>text[i + k]) << (8 * k)
    return _mix(_mix(h, tail), <unsigned long long>(end - start))

# ``_repeated_in`` for a text of one byte per character, eight bytes at a time where they can be
# read so. The table is sized from the bytes that may be white space (one more word than there
# are of them, at most), counted a word at a time, rather than from the words; a word's end is
# found by a word that flags such bytes, each then asked alone; its hash reads it eight bytes at
# a time.
cdef inline bint _repeated_bytes(const unsigned char* text, Py_ssize_t n, Py_ssize_t chunk,
                                 Py_ssize_t repeats) except -1:
    cdef Py_ssize_t blanks = 0, i = 0, start, hashed, mask
    cdef unsigned long long flagged
    while i + 8 <= n:
        blanks += _flagged_count(_maybe_blank(_word(text + i)))
        i += 8
    while i < n:
        blanks += text[i] <= 0x20 or text[i] >= 0x80
        i += 1
    # No more words than one in two characters, whatever the blanks.
    cdef unsigned long long* table = _stamped_table(min(blanks, n // 2) + 1, &mask)
    if table == NULL:
        raise MemoryError()
    i = 0
    while i < n:
        if Py_UNICODE_ISSPACE(text[i]):
            i += 1
            continue
        start = i
        while i < n and text[i] == 62:  # ">": a quote's marks are no part of the word
            i += 1
        hashed = i
        while i < n:
            if i + 8 <= n:
                flagged = _maybe_blank(_word(text + i))
                if flagged == 0:
                    i += 8
                    continue
                i += _lowest_bit(flagged) >> 3
            if Py_UNICODE_ISSPACE(text[i]):
                break
            i += 1
        if i - start >= chunk or repeats <= 1:
            return True
        if _count_at(table, _counted(table, mask, _bytes_hash(text, hashed, i))) >= repeats:
            return True
    return False

cdef inline bint _repeated_in(const Char* text, Py_ssize_t n, Py_ssize_t chunk,
                              Py_ssize_t repeats) except -1:
    cdef Py_ssize_t words = 0
    cdef Py_ssize_t index, mask, length
    cdef bint inside = False
    cdef bint leading = False
    cdef unsigned long long basis = 0xCBF29CE484222325ULL
    cdef unsigned long long prime = 0x100000001B3ULL
    cdef unsigned long long h = basis
    cdef unsigned int c
    for index in range(n):
        if Py_UNICODE_ISSPACE(text[index]):
            inside = False
        elif not inside:
            inside = True
            words += 1
    if words == 0:
        return False
    if repeats <= 1:
        return True
    cdef unsigned long long* table = _stamped_table(words, &mask)
    if table == NULL:
        raise MemoryError()
    inside = False
    length = 0
    for index in range(n + 1):
        c = text[index] if index < n else 32
        if Py_UNICODE_ISSPACE(c):
            if inside:
                if length >= chunk:
                    return True
                if _count_at(table, _counted(table, mask, h)) >= repeats:
                    return True
            inside = False
            continue
        if not inside:
            inside = True
            leading = True
            length = 0
            h = basis
        length += 1
        if leading and c == 62:  # ">"
            continue
        leading = False
        h = (h ^ c) * prime
    return False

# What ``_repeated_chunk`` counts, told apart in the one table: a word's beginning that ends its
# line, a beginning with the start of the word after it, a chunk that lies in one word.
cdef extern from *:
    """
    #define haltwise_ENDS 0x9E3779B97F4A7C15ULL
    #define haltwise_PAIRED 0xC2B2AE3D27D4EB4FULL
    #define haltwise_WHOLE 0x165667B19E3779F9ULL
    """
    const unsigned long long _ENDS "haltwise_ENDS"
    const unsigned long long _PAIRED "haltwise_PAIRED"
    const unsigned long long _WHOLE "haltwise_WHOLE"

# The characters of ``text`` from ``start`` to ``end`` hashed: a text of one byte per character
# eight at a time (``_bytes_hash``); any other, FNV-1a over its code points, then their count.
cdef inline unsigned long long _span_hash(const Char* text, Py_ssize_t start,
                                          Py_ssize_t end) noexcept:
    cdef unsigned long long h = 0xCBF29CE484222325ULL
    cdef Py_ssize_t i
    if sizeof(Char) == 1:
        return _bytes_hash(<const unsigned char*>text, start, end)
    for i in range(start, end):
        h = (h ^ <unsigned long long>text[i]) * 0x100000001B3ULL
    return _mix(h, <unsigned long long>(end - start))

# Where the word that goes on at ``i`` ends: its first white space, or ``n``. A text of one byte
# per character is read eight bytes at a time, and only a byte that may be white space asked.
cdef inline Py_ssize_t _word_end(const Char* text, Py_ssize_t i, Py_ssize_t n) noexcept:
    cdef unsigned long long flagged
    while i < n:
        if sizeof(Char) == 1 and i + 8 <= n:
            flagged = _maybe_blank(_word(<const unsigned char*>text + i))
            if flagged == 0:
                i += 8
                continue
            i += _lowest_bit(flagged) >> 3
        if Py_UNICODE_ISSPACE(text[i]):
            return i
        i += 1
    return n

# The words of the text ``_repeated_chunk`` reads, in memory kept from one text to the next (as
# the table is, and for the same reason): three numbers a word (its start, its end, 1 if its line
# ends after it) and two hashes (of its characters, and of them less its leading ``>``).
cdef Py_ssize_t* _spans
cdef unsigned long long* _hashes
cdef Py_ssize_t _span_room

cdef inline int _room_for(Py_ssize_t words) except -1:
    global _spans, _hashes, _span_room
    if words <= _span_room:
        return 0
    cdef Py_ssize_t size = max(words, 2 * _span_room)
    cdef Py_ssize_t* spans = <Py_ssize_t*>PyMem_Malloc(3 * size * sizeof(Py_ssize_t))
    cdef unsigned long long* hashes = <unsigned long long*>PyMem_Malloc(
        2 * size * sizeof(unsigned long long))
    if spans == NULL or hashes == NULL:
        PyMem_Free(spans)
        PyMem_Free(hashes)
        raise MemoryError()
    PyMem_Free(_spans)
    PyMem_Free(_hashes)
    _spans = spans
    _hashes = hashes
    _span_room = size
    return 0

# How often ``h`` was counted in ``table`` (a stamped one), without counting it.
cdef inline Py_ssize_t _count_of(unsigned long long* table, Py_ssize_t mask,
                                 unsigned long long h) noexcept:
    cdef unsigned long long mark = _stamp << 32
    cdef Py_ssize_t row = <Py_ssize_t>(h & <unsigned long long>mask)
    while (table[2 * row + 1] & 0xFFFFFFFF00000000ULL) == mark:
        if table[2 * row] == h:
            return _count_at(table, row)
        row = (row + 1) & mask
    return 0

# Count ``h`` in ``table``: whether it has come ``repeats`` times now.
cdef inline bint _reaches(unsigned long long* table, Py_ssize_t mask, unsigned long long h,
                          Py_ssize_t repeats) noexcept:
    return _count_at(table, _counted(table, mask, h)) >= repeats

# ``_text._repeated_chunk`` in C, by the width of the text's characters.
cdef inline bint _repeated_chunk(str text, Py_ssize_t chunk, Py_ssize_t repeats) except -1:
    cdef int kind = PyUnicode_KIND(text)
    cdef void* data = PyUnicode_DATA(text)
    if kind == 1:
        return _chunk_in(<const unsigned char*>data, len(text), chunk, repeats)
    if kind == 2:
        return _chunk_in(<const unsigned short*>data, len(text), chunk, repeats)
    return _chunk_in(<const unsigned int*>data, len(text), chunk, repeats)

# Its beginnings counted by hashes in the kept table. One pass finds each word (``_spans``);
# then the beginnings of words that end their lines are counted with the chunks that lie in one
# word, and last each beginning with the start of the word after it.
cdef inline bint _chunk_in(const Char* text, Py_ssize_t n, Py_ssize_t chunk,
                           Py_ssize_t repeats) except -1:
    cdef Py_ssize_t step = max(chunk // 5, 1)  # a chunk is 8 or more: never 0
    cdef Py_ssize_t words = 0, index = 0, start, end, position, begun, mask, reach
    cdef unsigned long long h, raw, pair
    _room_for((n + 1) // 2)  # no more words than one in two characters
    cdef Py_ssize_t* spans = _spans
    cdef unsigned long long* hashes = _hashes
    while index < n:
        if Py_UNICODE_ISSPACE(text[index]):
            if text[index] == 10 and words:
                spans[3 * words - 1] = 1
            index += 1
            continue
        start = index
        while index < n and text[index] == 62:  # ">"
            index += 1
        begun = index
        index = _word_end(text, index, n)
        spans[3 * words] = start
        spans[3 * words + 1] = index
        spans[3 * words + 2] = 0
        hashes[2 * words] = raw = _span_hash(text, start, index)
        hashes[2 * words + 1] = raw if begun == start else _span_hash(text, begun, index)
        words += 1
    if words == 0:
        return False
    spans[3 * words - 1] = 1  # the last word ends its line
    cdef unsigned long long* table = _stamped_table(2 * words + n // step + 1, &mask)
    if table == NULL:
        raise MemoryError()
    for index in range(words):
        start = spans[3 * index]
        end = spans[3 * index + 1]
        if end - start < chunk:
            if spans[3 * index + 2] and _reaches(table, mask, hashes[2 * index + 1] ^ _ENDS,
                                                 repeats):
                return True
            continue
        if text[start] == 62:
            return True  # a quote's mark may be taken off it: its places would move
        position = start
        while end - position >= chunk:
            if _reaches(table, mask, _span_hash(text, position, position + chunk) ^ _WHOLE,
                        repeats):
                return True
            position += step
        if spans[3 * index + 2] and _reaches(table, mask, _span_hash(text, position, end) ^ _ENDS,
                                             repeats):
            return True
    for index in range(words - 1):
        if spans[3 * index + 2]:
            continue
        start = spans[3 * index]
        end = spans[3 * index + 1]
        position = start
        if end - start < chunk:
            h = hashes[2 * index + 1]
        else:
            while end - position >= chunk:  # to the word's last place
                position += step
            h = _span_hash(text, position, end)
        # The word after, as far as a chunk begun here reaches it: its own hash when it reaches
        # all of it.
        begun = spans[3 * index + 3]
        reach = begun + chunk - 1 - (end - position)
        raw = hashes[2 * index + 2] if reach >= spans[3 * index + 4] else _span_hash(
            text, begun, reach)
        # Mixed in turn, the beginning first (``_mix`` of one word is no function of the order
        # of two: a pair and its reverse would share a hash).
        pair = _mix(_mix(_PAIRED, h), raw)
        if (_count_at(table, _counted(table, mask, pair))
                + _count_of(table, mask, h ^ _ENDS) >= repeats):
            return True
    return False

cpdef object _word_starts(str segment, Py_ssize_t chunk, Py_ssize_t repeats)
