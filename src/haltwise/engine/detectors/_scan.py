# cython: boundscheck=False, wraparound=False
"""Scans of a tool result's text written out by hand: above all its volatile spans.

``spans(text, rules)`` finds exactly what ``_keys._dispatched(rules).pattern`` finds in ASCII
text, in the same order (the leftmost match, the first branch that matches there, then on from
its end): the regular expression stays the definition, and ``tests/detectors`` compare the two
on generated texts made of every kind of span and of what comes near one. The regular
expression engine tries every branch that starts with a character at each position that holds
one, and a run of digits is read again by each branch that starts with a digit; here each
branch is a few comparisons of character codes, and most positions are passed over at the cost
of one.

The other scans read a result's lines for ``_keys``: ``folded_lines`` (each line without its
line number, its white space folded), ``masked_lines`` and ``line_hashes`` (each line's hash,
and its hash with its numbers masked, in one pass); ``exception_name`` finds the error a failed
result names last, and ``volatile_argument`` an id or a clock in a call's argument. Each does
what a regular expression and a few ``str`` methods per line do in ``_keys``, which the tests
compare it with, without making a Python object of what it only looks at.

Compiled (``_scan.pxd`` types every index and character as a C integer, a character is read
straight from where its str keeps it (``_view``, ``_char``), and every index is checked against
the text's length before it is read, so nothing checks it again), these scans are what
``_keys`` reads text with; interpreted, a loop over characters in Python costs more than the
regular expressions and ``str`` methods, and ``_keys`` uses those instead (``COMPILED``).
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .. import _pure as cython
else:
    try:
        import cython

        if not cython.compiled:
            raise ImportError
    except ImportError:
        from .. import _pure as cython

__all__ = [
    "COMPILED",
    "KINDS",
    "SHORT",
    "Needles",
    "all_ascii",
    "exception_name",
    "folded",
    "folded_lines",
    "line_hashes",
    "lowered",
    "mask",
    "mask_line",
    "masked_lines",
    "names_temp_path",
    "quoted",
    "same_words",
    "spans",
    "text_hash",
    "volatile_argument",
]

#: Whether this module runs compiled.
COMPILED: bool = cython.compiled


def _may_start(first: str, second: str, rules: bool) -> bool:
    """Whether a branch can start with ``first`` followed by ``second`` (NUL at the end of the
    text or past ASCII, where no branch needs it): ``spans`` tries one only there. A digit
    starts several whatever follows it; every other branch starts with a letter, a bracket, a
    slash or a rule's glyph that must be followed by a character of its own."""
    if "0" <= first <= "9":
        return True
    if first in "abcdefABCDEF":  # a uuid or a hex id, which go on with a hex digit
        return second in "0123456789abcdefABCDEF"
    if first in "pP":  # "pid", "process", "port", "PID"
        return second in "iroIO"
    if first in "tT":  # "thread", "tmp"
        return second == "h" or (second == "m" and first == "t")
    if first == "l":  # "localhost:"
        return second == "o"
    if first == "[":  # "[::1]:", "[::]:"
        return second == ":"
    if first == "s":  # "sh: line "
        return second == "h"
    if first == "/":  # "/tmp/", "/var/tmp/", "/private/var/folders/"
        return second in "tvp"
    return rules and first in _GLYPHS and second in _GLYPHS  # a rule: three glyphs or more


#: The glyphs a rule is drawn with.
_GLYPHS = "=_~*#-"
#: For each pair of ASCII characters, whether a branch can start with them (``_may_start``):
#: bit ``second % 8`` of byte ``rules * 2048 + first * 16 + second // 8``.
_PAIRS: bytes = cython.declare(
    bytes,
    bytes(
        sum(_may_start(chr(first), chr(8 * byte + bit), rules) << bit for bit in range(8))
        for rules in (False, True)
        for first in range(128)
        for byte in range(16)
    ),
)
#: The same table; compiled, a C pointer to its bytes, so that a scan reads it as an array.
_pairs = _PAIRS


def spans(text: str, rules: bool) -> list[int]:
    """The volatile spans of ``text`` (ASCII), as ``[start, end, start, end, ...]``; the rules
    drawn with ``=_~*#-`` among them only if ``rules``."""
    found: list[int] = []
    n = len(text)
    chars = _view(text)
    # The ends of the run of digits and of lowercase hex digits that hold ``i``, and what the
    # branches that read on from the run's end find there: each is read once per run, not
    # again from each of its positions (a long run that matches nothing would make the scan
    # quadratic).
    digits_end = hex_end = 0
    duration = after = -1
    i = 0
    while True:
        i = _skip(chars, n, i, rules)  # most characters start no branch
        if i == n:
            break
        c = _char(chars, i)
        end = -1
        # ``_skip`` stopped where a branch can start (``_may_start``): from here on, each
        # letter is followed by the character its branches need.
        if "0" <= c <= "9":
            if i >= digits_end:
                digits_end = _digits(chars, n, i)
                duration = after = -1
                if _goes_on(chars, n, digits_end):
                    duration = _duration(chars, n, digits_end)
                    after = _after_run(chars, n, digits_end)
            # Nor can any start here, short of a run of 7 digits or more (a hex id): every
            # other branch from a digit reads on as a duration or the like, or needs the run to
            # meet what ``_inert_run`` rules out.
            short = digits_end - i < 7
            if short and duration < 0 and after < 0 and _inert_run(chars, n, digits_end):
                i = digits_end
                continue
            if i >= hex_end:
                hex_end = _hex_run(chars, n, i)
            end = _from_digit(chars, n, i, hex_end, duration, after)
            if end < 0 and _inert_run(chars, n, digits_end):
                i = digits_end
                continue
        elif "a" <= c <= "f":
            end = _uuid(chars, n, i)
            if end < 0:
                if i >= hex_end:
                    hex_end = _hex_run(chars, n, i)
                if hex_end - i >= 7:
                    end = _hex_id(chars, n, i, hex_end)
        elif "A" <= c <= "F":
            end = _uuid(chars, n, i)
        elif c == "p" or c == "P":
            end = _numbered(chars, n, i)
        elif c == "t" or c == "T":  # "th", or "tm"
            tmp = _next(chars, n, i) == "m"
            end = _temp_name(chars, n, i) if tmp else _numbered(chars, n, i)
        elif c == "l":
            end = _port(chars, n, i, "localhost:")
        elif c == "[":
            end = _port(chars, n, i, "[::1]:")
            if end < 0:
                end = _port(chars, n, i, "[::]:")
        elif c == "s":
            end = _shell_line(chars, n, i)
        elif c == "/":
            end = _temp_path(chars, n, i)
        else:
            end = _rule(chars, n, i)
        if end > i:
            found.append(i)
            found.append(end)
            i = end
        else:
            i += 1
    return found


#: Below this length (of the lines scanned, joined) every text is scanned for rules too, and
#: every branch is tried on a text that is not ASCII: the scan costs less than the substring
#: tests that would choose the branches.
SHORT = 256


def names_temp_path(lines: list[str]) -> bool:
    """Whether one of ``lines`` (strs) holds ``tmp`` or ``/var/folders``, as ``_keys._mask_text``
    asks of them joined (neither holds a line break): compiled, a line of one byte per
    character is read eight at a time for an ``m`` or a ``/``, and only there compared."""
    for line in lines:  # noqa: SIM110 (compiled, any() over a generator costs more)
        if _names_temp(line):
            return True
    return False


def all_ascii(lines: list[str]) -> bool:
    """Whether every one of ``lines`` (strs) is ASCII: compiled, the flag each str keeps."""
    for line in lines:  # noqa: SIM110
        if not line.isascii():
            return False
    return True


if cython.compiled:

    def lowered(text: str, /) -> str:
        """``text.lower()``: ``text`` itself when it is a str of ASCII with no capital letter,
        as most names and keys are, rather than a copy of it."""
        if type(text) is str:
            plain = text  # typed: its characters are read in C
            for c in plain:
                if "A" <= c <= "Z" or c > "\x7f":
                    return text.lower()
            return text
        return text.lower()

else:
    # Interpreted, the method itself: a test written in Python would cost more than the copy.
    lowered = str.lower


def masked_lines(lines: list[str], every: bool) -> list[str]:
    """``lines`` (ASCII), each volatile span of each replaced by its mask (``mask``), as
    ``_keys._mask_text`` masks them joined: every line if ``every`` (the text names a temp
    path), else those with a digit; and the rules among the spans only if the lines scanned
    come to under ``SHORT`` characters joined or one of them holds three of a rule's glyphs in
    a row (``_keys._pattern``). ``lines`` itself when no line changed."""
    scanned = 0
    size = -1
    chosen: list[bool] = []  # whether each line is scanned: read once, not again to mask it
    for line in lines:
        if every or _has_digit(line):
            scanned += 1
            size += len(line) + 1
            chosen.append(True)
        else:
            chosen.append(False)
    if scanned == 0:
        return lines
    rules = size < SHORT
    if not rules:
        for index, line in enumerate(lines):
            if chosen[index] and _draws_rule(line):
                rules = True
                break
    masked: list[str] = []
    changed = False
    for index, line in enumerate(lines):
        if chosen[index]:
            done = mask_line(line, rules)
            # A span that is no volatile detail is masked as itself: a new str, the same text.
            if done is not line and done != line:
                changed = True
            masked.append(done)
        else:
            masked.append(line)
    return masked if changed else lines


def folded_lines(text: str, most: int) -> list[str]:
    """The distinct lines of ``text`` in order, each without the line number a file viewer
    prints before it, with its white space folded (``" ".join(line.split())``) and cut to
    ``most`` characters; empty ones left out. Any text, not only ASCII: what ``_keys`` finds
    with a regular expression and ``str.split`` per line, each line folded from where it lies
    in ``text`` (``_fold``), without making a str of the line as it was or of its words."""
    lines: list[str] = []
    chars = _view(text)
    n = len(text)
    begin = 0
    while begin <= n:
        end = _line_end(text, begin, n)
        line = _fold(chars, _line_number_end(chars, begin, end), end, most)
        if line:
            lines.append(line)
        begin = end + 1
    return _distinct_lines(lines)


def folded(text: str) -> str:
    """``" ".join(text.split())``: ``text`` itself when it is folded already."""
    n = len(text)
    return text if _is_folded(text, 0) else _fold(_view(text), 0, n, n)


def _is_folded(text: str, start: int) -> bool:
    """Whether ``text`` from ``start`` on holds no white space but single spaces between
    words."""
    spaced = True  # whether the character before is a space, or the start
    for i, c in enumerate(text):
        if i >= start:
            if not c.isspace():
                spaced = False
            elif c != " " or spaced:
                return False
            else:
                spaced = True
    return not spaced or len(text) == start


def same_words(first: str, second: str) -> bool:
    """Whether ``first.split() == second.split()`` (the two fold to the same text), read word
    by word from where the texts lie: two texts that differ mostly do so in their first words,
    and neither is folded or split to say so."""
    i = j = 0
    n = len(first)
    m = len(second)
    chars = _view(first)
    others = _view(second)
    while True:
        while i < n and _char(chars, i).isspace():
            i += 1
        while j < m and _char(others, j).isspace():
            j += 1
        if i == n or j == m:
            return i == n and j == m
        while i < n and j < m and not _char(chars, i).isspace():
            if _char(chars, i) != _char(others, j):
                return False
            i += 1
            j += 1
        # One word ended (or both): the other must end there too.
        if (i < n and not _char(chars, i).isspace()) or (j < m and not _char(others, j).isspace()):
            return False


def line_hashes(lines: list[str]) -> bytes:
    r"""For each of ``lines``, two hashes made in one pass over it: one that two lines share
    when they are equal, and one that they share when ``re.sub(r"\d+", "#", line)`` makes them
    equal; each shared otherwise one time in 2^64. They are packed, 16 bytes a line: the two
    as signed 64-bit integers in the machine's byte order (``array("q")`` reads them back), so
    that no Python int or tuple is made for a line that is only compared.

    Each hashes a stream of bytes: the line's code points (one byte each below 128; else 0x80
    and three bytes of the code point), the second with each run of decimal digits as one
    ``#``. The stream is read eight bytes at a time (``_mix``); compiled, eight ASCII
    characters read straight from the str go into the first hash as one word, and into the
    second too when none is a digit. A word mixed in is a bijection of the state, so two lines
    whose streams differ in one word never share a hash. The hashes start from ``_SEED``,
    which changes from process to process as ``hash``'s strings do."""
    return _packed_hashes(lines)


def text_hash(text: str) -> int:
    """A hash of ``text`` that two texts share when they are equal, and otherwise one time in
    2^64, as a signed 64-bit integer. Compiled, it reads the bytes in which the str keeps its
    characters, eight at a time (``_mix``, then ``_finished`` with their count): half the
    instructions of ``hash``'s SipHash (1,100 against 2,300 for a test run's 757 characters,
    each called from Python). Interpreted, it is ``hash``: there, reading words in Python
    would cost more. It changes from process to process."""
    return _text_hash(text)


#: What each line hash starts from, drawn from Python's own string hash: it changes from
#: process to process (and stays put under ``PYTHONHASHSEED``).
_SEED: int = cython.declare(cython.ulonglong, hash("haltwise: line hashes") & 0xFFFFFFFFFFFFFFFF)
#: The odd multiplier of ``_mix``, and the two of ``_finished`` (MurmurHash3's finalizer).
_MULTIPLIER: int = cython.declare(cython.ulonglong, 0x9E3779B97F4A7C15)
_FINAL_1: int = cython.declare(cython.ulonglong, 0xFF51AFD7ED558CCD)
_FINAL_2: int = cython.declare(cython.ulonglong, 0xC4CEB9FE1A85EC53)
_LOW_64: int = cython.declare(cython.ulonglong, 0xFFFFFFFFFFFFFFFF)


if not cython.compiled:
    # Compiled, ``_scan.pxd`` does the same in C: each stream's state is a ``Stream``, fed a
    # word of eight ASCII characters at once where it can, and the hashes are written straight
    # into the bytes.

    def _names_temp(line: str) -> bool:
        """Whether ``line`` holds ``tmp`` or ``/var/folders``."""
        return "tmp" in line or "/var/folders" in line

    def _text_hash(text: str) -> int:
        """``text_hash``, interpreted."""
        return hash(text)

    def _distinct_lines(lines: list[str]) -> list[str]:
        """``lines`` without those equal to one before them: a dict's keys."""
        return list(dict.fromkeys(lines))

    def _packed_hashes(lines: list[str]) -> bytes:
        """``line_hashes``, interpreted."""
        return array("q", [h for line in lines for h in _line_pair(line)]).tobytes()

    def _line_pair(line: str) -> tuple[int, int]:
        """``line``'s two hashes (``line_hashes``)."""
        exact = bytearray()
        masked = bytearray()
        run = False  # whether the character before is a decimal digit
        for c in line:
            code = ord(c)
            encoded = bytes([code]) if code < 128 else bytes([0x80, *code.to_bytes(3, "little")])
            exact += encoded
            if _is_decimal(c):
                if not run:
                    masked.append(35)  # "#"
                run = True
            else:
                run = False
                masked += encoded
        return _stream_hash(bytes(exact)), _stream_hash(bytes(masked))

    def _stream_hash(stream: bytes) -> int:
        """The hash of a stream of bytes: its words of eight (little-endian, the last padded
        with zeros) mixed in turn, then its length, then the finalizer."""
        h = _SEED
        for start in range(0, len(stream), 8):
            h = _mix(h, int.from_bytes(stream[start : start + 8], "little"))
        return _finished(h ^ len(stream))

    def _mix(h: int, word: int) -> int:
        """The state ``h`` with eight more bytes of a stream (``word``) mixed in: for a given
        ``word``, a bijection of the state (an odd multiplier, then a shift folded back)."""
        h = ((h ^ word) * _MULTIPLIER) & _LOW_64
        return h ^ (h >> 29)

    def _finished(h: int) -> int:
        """A stream's final state, its bits spread over the hash (a bijection), as a signed 64-bit
        integer."""
        h ^= h >> 33
        h = (h * _FINAL_1) & _LOW_64
        h ^= h >> 33
        h = (h * _FINAL_2) & _LOW_64
        h ^= h >> 33
        return h - ((h >> 63) << 64)


def quoted(text: str) -> list[str]:
    r"""What ``_keys._QUOTED`` finds in ``text`` (``findall``, the group that matched): each
    string between two quotes of one kind on one line, of 3 to 200 characters, read from left to
    right. A quote opens where the first quote of its kind or line break after it is a quote
    of its kind, 4 to 201 characters on; else the next character is tried. Any text, not only
    ASCII."""
    found: list[str] = []
    n = len(text)
    chars = _view(text)
    i = 0
    while i < n:
        quote = _char(chars, i)
        if quote == '"' or quote == "'":
            end = i + 1
            limit = min(n, i + 202)
            while end < limit and _char(chars, end) != quote and _char(chars, end) != "\n":
                end += 1
            if end < limit and _char(chars, end) == quote and end - i > 3:
                found.append(text[i + 1 : end])
                i = end + 1
                continue
        i += 1
    return found


def volatile_argument(text: str) -> bool:
    """Whether ``text`` (ASCII) holds a uuid or a timestamp (a date and a time of day) where
    ``_keys`` looks for one in an argument: in a value of 10 characters or more, with two
    dashes or more and a digit among its first 64 characters. What ``_keys._ARGUMENT_VOLATILE``
    finds there, found from the dashes: a uuid's first stands 8 characters from its start, a
    date's 4."""
    n = len(text)
    if n < 10:
        return False
    chars = _view(text)
    dashes = 0
    digit = False
    i = 0
    while i < n:
        c = _char(chars, i)
        if c == "-":
            dashes += 1
        elif i < 64 and "0" <= c <= "9":
            digit = True
        i += 1
    if dashes < 2 or not digit:
        return False
    i = 4
    while i < n:
        if _char(chars, i) == "-" and (
            (i >= 8 and _uuid(chars, n, i - 8) >= 0) or _date(chars, n, i - 4) >= i + 12
        ):
            return True
        i += 1
    return False


class Needles:
    """Words to look for in a text in any case, all in one scan of it: ``found(text)`` says
    which occur, as ``sum(1 << k for k, word in enumerate(words) if word in text.lower())``.

    Compiled, the scan reads a text of one byte per character (ASCII or Latin-1, where
    ``str.lower`` lowers only ASCII letters to ASCII) once, two characters at a time: a table
    says which words start with each pair of ASCII characters, in either case, and only those
    are compared from there. A few pairs start a word (most text pairs none), so a character
    costs a load and a test, where a substring search of the lowered text for each word costs
    a pass of its own, and lowering it another. Any other text is lowered and searched.
    Interpreted, it always is.
    """

    def __init__(self, words: tuple[str, ...]) -> None:
        if not 0 < len(words) <= 16 or not all(
            len(word) >= 2 and word.isascii() and word == word.lower() for word in words
        ):
            raise ValueError(f"1 to 16 lower-case ASCII words of 2 characters or more: {words!r}")
        #: The words, in the order of their bits in ``found``'s answer.
        self.words = words
        _index(self)

    def found(self, text: str) -> int:
        """Which of the words ``text`` holds, in any case: bit ``k`` for ``words[k]``."""
        return _found(self, text)


def _found_lowered(words: tuple[str, ...], lowered: str) -> int:
    """Which of ``words`` the lowered text ``lowered`` holds, one search each."""
    found = 0
    bit = 1
    for word in words:
        if word in lowered:
            found |= bit
        bit <<= 1
    return found


if not cython.compiled:
    # Compiled, ``_scan.pxd`` keeps a table of the pairs each word starts with, and scans.

    def _index(needles: Needles) -> None:
        """Nothing to index: the words are searched for one by one."""

    def _found(needles: Needles, text: str) -> int:
        """Which of the words ``text`` holds: its lowered copy searched for each."""
        return _found_lowered(needles.words, text.lower())


#: The words an exception's name ends with (``_keys._EXCEPTION`` is made of them).
KINDS: tuple[str, ...] = ("Error", "Exception", "Exit", "Interrupt")


def exception_name(text: str) -> str | None:
    """The exception class that the last line of ``text`` to start with one starts with
    (``ValueError: ...``, ``pkg.mod.TimeoutError``): what ``_keys._EXCEPTION`` matches at the
    start of a line, read from the last line back. A line starts with one when its leading run
    of word characters and dots ends the line or meets a colon, and the run's last part (after
    its last dot, which must not be the line's first character) is a capital letter, word
    characters, and one of ``KINDS``."""
    chars = _view(text)
    end = len(text)
    while end >= 0:
        start = _line_start(text, end)
        run = start
        dot = -1
        while run < end:
            c = _char(chars, run)
            if c == ".":
                dot = run
            elif not (_is_word(c) if c < "\x80" else c.isalnum()):
                break
            run += 1
        first = dot + 1 if dot > start else start
        if (
            (run == end or _char(chars, run) == ":")
            and (dot < 0 or dot > start)
            and first < run
            and "A" <= _char(chars, first) <= "Z"
        ):
            for kind in KINDS:
                if run - first > len(kind) and _at(chars, run, run - len(kind), kind):
                    return text[first:run]
        end = start - 1
    return None


def mask_line(line: str, rules: bool) -> str:
    """``line`` (ASCII) with its volatile spans masked, the rules among them only if
    ``rules``."""
    found = spans(line, rules)
    if not found:
        return line
    pieces: list[str] = []
    last = 0
    for index in range(0, len(found), 2):
        start = found[index]
        pieces.append(line[last:start])
        pieces.append(mask(line, start, found[index + 1]))
        last = found[index + 1]
    pieces.append(line[last:])
    return "".join(pieces)


def mask(text: str, start: int, end: int) -> str:
    """What the volatile span ``text[start:end]`` that ``spans`` found in ``text`` (ASCII) is
    masked with: what ``_keys._masked`` (the definition, which the tests compare this with)
    gives, decided from the characters where they lie rather than with a str of the span and
    its methods. The span is itself where it is no volatile detail (part of a word, a number
    that is no id)."""
    chars = _view(text)
    first = _char(chars, start)
    size = end - start
    if first == "=" or first == "-" or first == "_" or first == "~" or first == "*" or first == "#":
        return _RULES[first]  # a rule: drawn to fit the text around it
    glued = start > 0 and _is_word(_char(chars, start - 1))
    if first == "/":
        return "<tmp>"
    if _at(chars, end, start, "sh: line"):
        return "sh: line <n>:"
    if first == "p" or first == "P" or first == "t" or first == "T":
        # pid 42, process=42, thread #42, port 8080; or a temp name, tmpab12cd3x.
        if glued:
            return text[start:end]
        if _at(chars, end, start, "tmp"):
            return "<tmp>"
        return _numbers_as_n(chars, start, end)
    colon = end - 1
    while colon >= start and _char(chars, colon) != ":":
        colon -= 1
    if colon >= start and _local_host(chars, start, colon):
        return text[start:colon] + ":<port>"
    if glued:
        return text[start:end]
    if size == 36 and _char(chars, start + 8) == "-":
        return "<uuid>"
    second = _char(chars, start + 1) if size >= 2 else "\x00"
    if first == "0" and (second == "x" or second == "X"):
        return "<hex>"
    if colon >= start or (size >= 10 and _char(chars, start + 4) == "-"):
        return "<time>"
    if size >= 2 and _char(chars, end - 2) == "/" and _char(chars, end - 1) == "s":
        return "<rate>"
    last = _char(chars, end - 1)
    if ("a" <= last <= "z" or "A" <= last <= "Z") and not _has_hex_letter(
        chars, start, _unit_start(chars, start, end - 1), False
    ):
        return "<duration>"
    # A bare hex id: at least one digit and one letter (a plain number is not an id).
    if _has_decimal(chars, start, end) and _has_hex_letter(chars, start, end, True):
        return "<hex>"
    return text[start:end]


#: A rule's mask, by its glyph: three of it.
_RULES: dict[str, str] = {glyph: glyph * 3 for glyph in "=-_~*#"}


def _numbers_as_n(text: str, start: int, end: int) -> str:
    """The characters from ``start`` to ``end`` of what ``_view`` gave, each run of digits as
    ``<n>``."""
    pieces: list[str] = []
    i = start
    while i < end:
        c = _char(text, i)
        if "0" <= c <= "9":
            pieces.append("<n>")
            while i < end and "0" <= _char(text, i) <= "9":
                i += 1
        else:
            pieces.append(c)
            i += 1
    return "".join(pieces)


def _local_host(text: str, start: int, end: int) -> bool:
    """Whether the characters from ``start`` to ``end`` name this machine (``localhost``,
    ``127.0.0.1``, ``0.0.0.0``, ``[::1]``, ``[::]``)."""
    size = end - start
    if size == 9:
        return _at(text, end, start, "localhost") or _at(text, end, start, "127.0.0.1")
    if size == 7:
        return _at(text, end, start, "0.0.0.0")
    if size == 5:
        return _at(text, end, start, "[::1]")
    return size == 4 and _at(text, end, start, "[::]")


def _unit_start(text: str, start: int, end: int) -> int:
    """Where the characters from ``start`` to ``end`` end once the letters of a unit of time
    (``msecondhru``) and spaces are stripped from their right."""
    while end > start and _char(text, end - 1) in "msecondhru ":
        end -= 1
    return end


def _has_hex_letter(text: str, start: int, end: int, lower_only: bool) -> bool:
    """Whether a letter from a to f (or A to F, unless ``lower_only``) stands from ``start`` to
    ``end``."""
    i = start
    while i < end:
        c = _char(text, i)
        if "a" <= c <= "f" or (not lower_only and "A" <= c <= "F"):
            return True
        i += 1
    return False


def _has_decimal(text: str, start: int, end: int) -> bool:
    """Whether an ASCII digit stands from ``start`` to ``end``."""
    i = start
    while i < end:
        if "0" <= _char(text, i) <= "9":
            return True
        i += 1
    return False


if not cython.compiled:
    # Compiled, ``_scan.pxd`` reads a line of one byte per character as bytes, eight at a time
    # for the rules.

    def _has_digit(line: str) -> bool:
        """Whether ``line`` holds an ASCII digit."""
        for c in line:  # noqa: SIM110
            if "0" <= c <= "9":
                return True
        return False

    def _draws_rule(line: str) -> bool:
        """Whether three of a rule's glyphs stand in a row in ``line``, all the same one."""
        same = 0  # how many glyphs in a row are the same one, up to this character
        last = "\x00"
        for c in line:
            if c == "=" or c == "-" or c == "_" or c == "~" or c == "*" or c == "#":
                same = same + 1 if c == last else 1
                if same == 3:
                    return True
            else:
                same = 0
            last = c
        return False


def _line_number_end(text: str, start: int, end: int) -> int:
    r"""Where the line ``text[start:end]`` goes on after the line number it starts with, as a
    file viewer prints it (``12:``, ``  12 |``, ``12\t``: ``[ \t]*\d+(?::|[ \t]*[|│]|\t)``);
    ``start`` if it starts with none."""
    i = start
    while i < end and (_char(text, i) == " " or _char(text, i) == "\t"):
        i += 1
    digits = i
    while i < end and _is_decimal(_char(text, i)):
        i += 1
    if i in (digits, end):
        return start
    if _char(text, i) == ":":
        return i + 1
    bar = i
    while bar < end and (_char(text, bar) == " " or _char(text, bar) == "\t"):
        bar += 1
    if bar < end and (_char(text, bar) == "|" or _char(text, bar) == "│"):
        return bar + 1
    return i + 1 if _char(text, i) == "\t" else start


# --------------------------------------------------------------------------------------------
# Characters

if not cython.compiled:
    # Compiled, ``_scan.pxd`` defines these in C: a str's kind (the bytes each character
    # takes) and data, read once, and each character read from them, with no test of the str.

    def _view(text: str) -> str:
        """What ``_char`` reads ``text``'s characters from."""
        return text

    def _char(text: str, i: int) -> str:
        """The character at ``i`` of what ``_view`` gave."""
        return text[i]

    def _skip(text: str, n: int, i: int, rules: bool) -> int:
        """The first index from ``i`` on at which a branch can start in what ``_view`` gave
        (``_may_start``, read from ``_pairs``), or ``n``."""
        table = 2048 if rules else 0
        while i < n:
            first = ord(text[i])
            if first < 128:
                second = ord(text[i + 1]) if i + 1 < n else 0
                if second >= 128:
                    second = 0
                if _pairs[table + 16 * first + (second >> 3)] >> (second & 7) & 1:
                    break
            i += 1
        return i

    def _line_end(text: str, begin: int, n: int) -> int:
        """Where the line of ``text`` that holds ``begin`` ends: its next line break, or
        ``n``."""
        end = text.find("\n", begin)
        return n if end < 0 else end

    def _line_start(text: str, end: int) -> int:
        """Where the line of ``text`` that ends at ``end`` starts: after the line break before
        it, or 0."""
        return text.rfind("\n", 0, end) + 1

    def _fold(text: str, start: int, end: int, most: int) -> str:
        """``text[start:end]`` of what ``_view`` gave, with its white space folded, cut to
        ``most`` characters. Compiled, the characters are copied once into a buffer."""
        return " ".join(text[start:end].split())[:most]


def _is_decimal(c: str) -> bool:
    """Whether ``c`` is a decimal digit (``str.isdecimal``), asking Unicode only past ASCII."""
    return "0" <= c <= "9" or (c >= "\x80" and c.isdecimal())


def _is_digit(c: str) -> bool:
    return "0" <= c <= "9"


def _is_hex(c: str) -> bool:
    return "0" <= c <= "9" or "a" <= c <= "f" or "A" <= c <= "F"


def _is_word(c: str) -> bool:
    return "a" <= c <= "z" or "A" <= c <= "Z" or "0" <= c <= "9" or c == "_"


def _next(text: str, n: int, i: int) -> str:
    """The character after ``i``, or NUL at the end."""
    return _char(text, i + 1) if i + 1 < n else "\x00"


def _boundary(text: str, n: int, i: int) -> bool:
    r"""Whether a word that ends before ``i`` ends there (``\b`` after a word character)."""
    return i >= n or not _is_word(_char(text, i))


def _digits(text: str, n: int, i: int) -> int:
    """The end of the run of digits from ``i`` (``i`` itself if none)."""
    while i < n and "0" <= _char(text, i) <= "9":
        i += 1
    return i


def _count(text: str, n: int, i: int, many: int, hex_digits: bool) -> bool:
    """Whether ``many`` digits (hex digits if ``hex_digits``) stand from ``i``."""
    if i + many > n:
        return False
    end = i + many
    while i < end:
        if not (_is_hex(_char(text, i)) if hex_digits else _is_digit(_char(text, i))):
            return False
        i += 1
    return True


def _at(text: str, n: int, i: int, word: str) -> bool:
    """Whether ``word`` stands at ``i`` (compared character by character: compiled, a call of
    ``str.startswith`` would cost more than the comparisons)."""
    size = len(word)
    if i + size > n:
        return False
    k = 0
    while k < size:
        if _char(text, i + k) != word[k]:
            return False
        k += 1
    return True


def _fraction(text: str, n: int, i: int, comma: bool) -> int:
    r"""The end of ``\.\d+`` (``[.,]\d+`` with ``comma``) at ``i``, or ``i`` if there is
    none."""
    if (
        i + 1 < n
        and (_char(text, i) == "." or (comma and _char(text, i) == ","))
        and _is_digit(_char(text, i + 1))
    ):
        return _digits(text, n, i + 1)
    return i


# --------------------------------------------------------------------------------------------
# The branches, each the end of its match at ``i`` or -1


def _from_digit(text: str, n: int, i: int, hex_end: int, duration: int, after: int) -> int:
    """The branches that start with a digit, in the pattern's order. ``hex_end`` is the end of
    the run of lowercase hex digits from ``i``; ``duration`` and ``after`` are what
    ``_duration`` and ``_after_run`` find after its run of digits."""
    end = _uuid(text, n, i)
    if end < 0:
        end = _date(text, n, i)
    if end < 0:
        end = _clock(text, n, i)
    c = _char(text, i)
    if (
        end < 0
        and c == "0"
        and i + 2 < n
        and _char(text, i + 1) == "x"
        and _is_hex(_char(text, i + 2))
    ):
        end = i + 3
        while end < n and _is_hex(_char(text, end)):
            end += 1
    if end < 0:
        end = duration
    if end < 0:
        end = _hex_id(text, n, i, hex_end)
    if end < 0 and c == "1" and _next(text, n, i) == "2":
        end = _port(text, n, i, "127.0.0.1:")
    if end < 0 and c == "0" and _next(text, n, i) == ".":
        end = _port(text, n, i, "0.0.0.0:")
    if end < 0:
        end = after
    return end


def _inert_run(text: str, n: int, run: int) -> bool:
    """Whether no branch can start at a digit of the run of digits that ends at ``run`` when
    none started at an earlier one. Those that read the run to its end (a duration, a progress
    bar, a rate) find there what they found from the earlier digit, and so does a hex id, which
    would have been longer there; every other needs the run to meet a ``-``, ``:``, ``x`` or
    ``.`` (a uuid, a date, a clock, ``0x``, an address) or a hex letter (a uuid)."""
    c = _char(text, run) if run < n else "\x00"
    return not (c in "-:x." or "a" <= c <= "f" or "A" <= c <= "F")


def _goes_on(text: str, n: int, run: int) -> bool:
    """Whether the run of digits that ends at ``run`` can go on with a branch that reads it to
    its end (a duration, a rate, a progress bar, minutes): it meets a fraction's dot, a colon,
    or the first letter of a unit (of ASCII text: not µs), or a space or a tab and then one."""
    if run >= n:
        return False
    c = _char(text, run)
    if c == " " or c == "\t":
        return run + 1 < n and _char(text, run + 1) in "munshikKMGB"
    return c in ".:munshikKMGB"


def _after_run(text: str, n: int, run: int) -> int:
    """The last branches that start with a digit, each reading on from the end of its run."""
    end = _progress(text, n, run)
    if end < 0:
        end = _rate(text, n, run)
    if end < 0:
        end = _minutes(text, n, run)
    return end


def _uuid(text: str, n: int, i: int) -> int:
    """``[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}``"""
    if i + 36 > n:
        return -1
    # The dashes first: a hex letter starts most words, and a word is rarely followed by one.
    if not (
        _char(text, i + 8) == "-"
        and _char(text, i + 13) == "-"
        and _char(text, i + 18) == "-"
        and _char(text, i + 23) == "-"
        and _count(text, n, i, 8, True)
        and _count(text, n, i + 9, 4, True)
        and _count(text, n, i + 14, 4, True)
        and _count(text, n, i + 19, 4, True)
        and _count(text, n, i + 24, 12, True)
    ):
        return -1
    return i + 36


def _date(text: str, n: int, i: int) -> int:
    r"""``\d{4}-\d\d-\d\d(?:[T ]\d\d:\d\d(?::\d\d(?:[.,]\d+)?)?(?:Z|[+-]\d\d:?\d\d)?)?``"""
    if not (
        i + 10 <= n
        and _char(text, i + 4) == "-"
        and _char(text, i + 7) == "-"
        and _count(text, n, i, 4, False)
        and _count(text, n, i + 5, 2, False)
        and _count(text, n, i + 8, 2, False)
    ):
        return -1
    end = i + 10
    # The time of day, all of it optional: each part is taken when it is there in full.
    if not (
        end + 6 <= n
        and (_char(text, end) == "T" or _char(text, end) == " ")
        and _count(text, n, end + 1, 2, False)
        and _char(text, end + 3) == ":"
        and _count(text, n, end + 4, 2, False)
    ):
        return end
    end += 6
    if end + 3 <= n and _char(text, end) == ":" and _count(text, n, end + 1, 2, False):
        end = _fraction(text, n, end + 3, True)
    if end < n and _char(text, end) == "Z":
        return end + 1
    if (
        end + 3 <= n
        and (_char(text, end) == "+" or _char(text, end) == "-")
        and _count(text, n, end + 1, 2, False)
    ):
        zone = end + 3
        if zone + 3 <= n and _char(text, zone) == ":" and _count(text, n, zone + 1, 2, False):
            return zone + 3
        if _count(text, n, zone, 2, False):
            return zone + 2
    return end


def _clock(text: str, n: int, i: int) -> int:
    r"""``\d\d?:\d\d:\d\d(?:[.,]\d+)?``"""
    colon = i + 2 if i + 1 < n and _is_digit(_char(text, i + 1)) else i + 1
    if not (
        colon + 6 <= n
        and _char(text, colon) == ":"
        and _count(text, n, colon + 1, 2, False)
        and _char(text, colon + 3) == ":"
        and _count(text, n, colon + 4, 2, False)
    ):
        return -1
    return _fraction(text, n, colon + 6, True)


def _duration(text: str, n: int, run: int) -> int:
    r"""``\d+(?:\.\d+)?[ \t]?UNIT\b`` after the run of digits ending at ``run``: the unit is
    a whole word, so it is the word that stands there."""
    i = _fraction(text, n, run, False)
    if i < n and (_char(text, i) == " " or _char(text, i) == "\t"):
        i += 1
    end = i
    # No unit is longer than 7 letters: a longer word is none, however long it is.
    while end < n and end - i <= 7 and _is_word(_char(text, end)):
        end += 1
    return end if end > i and _is_unit(text, n, i, end - i) else -1


def _is_unit(text: str, n: int, i: int, size: int) -> bool:
    """Whether the ``size`` characters at ``i`` are a unit of time: ``ms``, ``us``, ``ns``,
    ``s``, ``sec``, ``secs``, ``second(s)``, ``min(s)``, ``minute(s)``, ``h``, ``hr(s)``,
    ``hour(s)`` (``µs`` is not ASCII)."""
    c = _char(text, i)
    if c == "s":
        return (
            size == 1
            or (size == 3 and _at(text, n, i, "sec"))
            or (size == 4 and _at(text, n, i, "secs"))
            or (size == 6 and _at(text, n, i, "second"))
            or (size == 7 and _at(text, n, i, "seconds"))
        )
    if c == "m":
        return (
            (size == 2 and _char(text, i + 1) == "s")
            or (size == 3 and _at(text, n, i, "min"))
            or (size == 4 and _at(text, n, i, "mins"))
            or (size == 6 and _at(text, n, i, "minute"))
            or (size == 7 and _at(text, n, i, "minutes"))
        )
    if c == "u" or c == "n":
        return size == 2 and _char(text, i + 1) == "s"
    if c == "h":
        return (
            size == 1
            or (size == 2 and _char(text, i + 1) == "r")
            or (size == 3 and _at(text, n, i, "hrs"))
            or (size == 4 and _at(text, n, i, "hour"))
            or (size == 5 and _at(text, n, i, "hours"))
        )
    return False


def _hex_run(text: str, n: int, i: int) -> int:
    """The end of the run of lowercase hex digits from ``i``."""
    while i < n and ("0" <= _char(text, i) <= "9" or "a" <= _char(text, i) <= "f"):
        i += 1
    return i


def _hex_id(text: str, n: int, i: int, end: int) -> int:
    r"""``[0-9a-f]{7,}\b``, where the run of lowercase hex digits from ``i`` ends at ``end``."""
    if end - i >= 7 and _boundary(text, n, end):
        return end
    return -1


def _progress(text: str, n: int, run: int) -> int:
    r"""``\d+:\d\d<\d+:\d\d`` (a progress bar's elapsed and remaining time)."""
    if not (
        run + 4 <= n
        and _char(text, run) == ":"
        and _count(text, n, run + 1, 2, False)
        and _char(text, run + 3) == "<"
    ):
        return -1
    left = _digits(text, n, run + 4)
    if (
        left > run + 4
        and left + 3 <= n
        and _char(text, left) == ":"
        and _count(text, n, left + 1, 2, False)
    ):
        return left + 3
    return -1


def _rate(text: str, n: int, run: int) -> int:
    r"""``\d+(?:\.\d+)?[ \t]?(?:it|[kKMG]?i?B)/s\b``"""
    i = _fraction(text, n, run, False)
    if i < n and (_char(text, i) == " " or _char(text, i) == "\t"):
        i += 1
    if _at(text, n, i, "it"):
        i += 2
    else:
        if i < n and (
            _char(text, i) == "k"
            or _char(text, i) == "K"
            or _char(text, i) == "M"
            or _char(text, i) == "G"
        ):
            i += 1
        if i < n and _char(text, i) == "i":
            i += 1
        if not (i < n and _char(text, i) == "B"):
            return -1
        i += 1
    if _at(text, n, i, "/s") and _boundary(text, n, i + 2):
        return i + 2
    return -1


def _minutes(text: str, n: int, run: int) -> int:
    r"""``\d+m\d+(?:\.\d+)?s\b``"""
    if not (run + 1 < n and _char(text, run) == "m" and _is_digit(_char(text, run + 1))):
        return -1
    i = _fraction(text, n, _digits(text, n, run + 1), False)
    if i < n and _char(text, i) == "s" and _boundary(text, n, i + 1):
        return i + 1
    return -1


def _port(text: str, n: int, i: int, host: str) -> int:
    """``host`` (ending with a colon) and a port number."""
    if not _at(text, n, i, host):
        return -1
    start = i + len(host)
    end = _digits(text, n, start)
    return end if end > start else -1


def _numbered(text: str, n: int, i: int) -> int:
    r"""A pid, a process, a port or a thread and its number: ``pid 42``, ``Process=7``,
    ``PORT:8080``, ``thread #3`` (``[ =:#]+\d+`` after the word)."""
    c = _char(text, i)
    word = 0
    if c == "p":
        for name in ("pid", "process", "port"):
            if _at(text, n, i, name):
                word = len(name)
                break
    elif c == "P":
        for name in ("PID", "Pid", "Process", "Port", "PORT"):
            if _at(text, n, i, name):
                word = len(name)
                break
    elif _at(text, n, i + 1, "hread"):
        word = 6
    if word == 0:
        return -1
    start = i + word
    end = start
    while end < n and (
        _char(text, end) == " "
        or _char(text, end) == "="
        or _char(text, end) == ":"
        or _char(text, end) == "#"
    ):
        end += 1
    if end == start:
        return -1
    last = _digits(text, n, end)
    return last if last > end else -1


def _temp_name(text: str, n: int, i: int) -> int:
    """``tmp[a-z0-9_]{6,}``"""
    if not _at(text, n, i, "tmp"):
        return -1
    end = i + 3
    while end < n and (
        "a" <= _char(text, end) <= "z" or "0" <= _char(text, end) <= "9" or _char(text, end) == "_"
    ):
        end += 1
    return end if end - (i + 3) >= 6 else -1


def _shell_line(text: str, n: int, i: int) -> int:
    r"""``sh: line \d+:``"""
    if not _at(text, n, i, "sh: line "):
        return -1
    end = _digits(text, n, i + 9)
    if end > i + 9 and end < n and _char(text, end) == ":":
        return end + 1
    return -1


def _temp_path(text: str, n: int, i: int) -> int:
    """A temporary file's path: under ``/tmp/``, ``/var/tmp/``, ``/var/folders/`` (up to a
    space, a quote or a separator), or ``/private/var/folders/`` (up to a space)."""
    second = _next(text, n, i)  # each path is compared only where its second character stands
    if second == "t" and _at(text, n, i, "/tmp/"):
        start = i + 5
    elif second == "v" and _at(text, n, i, "/var/tmp/"):
        start = i + 9
    elif second == "v" and _at(text, n, i, "/var/folders/"):
        start = i + 13
    elif second == "p" and _at(text, n, i, "/private/var/folders/"):
        start = end = i + 21
        while end < n and not _is_space(_char(text, end)):
            end += 1
        return end if end > start else -1
    else:
        return -1
    end = start
    while end < n and not _is_space(_char(text, end)) and _char(text, end) not in "'\"`:,)]":
        end += 1
    return end if end > start else -1


def _is_space(c: str) -> bool:
    return c == " " or "\t" <= c <= "\r"


def _rule(text: str, n: int, i: int) -> int:
    """A rule drawn with ``=_~*#-``: three of them or more."""
    end = i
    while end < n and _char(text, end) in "=_~*#-":
        end += 1
    return end if end - i >= 3 else -1
