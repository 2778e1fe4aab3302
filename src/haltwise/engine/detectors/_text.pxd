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
