# _text.py's search for a chanted chunk with its positions and lengths as C integers, and the
# strs and lists it reads typed, so that its loops over a segment's places run in C. Every
# segment and word is a str the search made itself (joined or split), never a subclass of str.

cimport cython

@cython.locals(seen=dict, position=Py_ssize_t, piece=str, found=list)
cpdef object _chant(str segment, list places, Py_ssize_t chunk, Py_ssize_t repeats,
                    Py_ssize_t max_gap)
@cython.locals(places=list, limit=Py_ssize_t, position=Py_ssize_t, following=Py_ssize_t)
cpdef list _chunk_starts(str segment, Py_ssize_t chunk)
@cython.locals(places=list, limit=Py_ssize_t, position=Py_ssize_t, word=str)
cpdef list _frequent_word_starts(str segment, list words, Py_ssize_t chunk, Py_ssize_t repeats)
@cython.locals(n=Py_ssize_t, count=Py_ssize_t, size=Py_ssize_t, mask=Py_ssize_t,
               words="long long[:]", table="unsigned long long[:]", h=cython.ulonglong,
               start=Py_ssize_t, word=Py_ssize_t, most=Py_ssize_t, seen=Py_ssize_t, index=Py_ssize_t,
               c=Py_UCS4, key=cython.ulonglong, row=Py_ssize_t, limit=Py_ssize_t, places=list)
cpdef object _hashed_word_starts(str segment, Py_ssize_t chunk, Py_ssize_t repeats)
cpdef object _word_starts(str segment, Py_ssize_t chunk, Py_ssize_t repeats)
