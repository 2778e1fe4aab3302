"""Detectors over what the model writes: monologue (turns with no tool call) and degenerate
text (a chunk chanted over and over).

Degenerate text is looked for in prose only: fenced and indented code, tables and horizontal
rules are skipped (they repeat by nature), headings end a stretch of prose, and list items are
compared whole (a list of twelve identical items is degenerate; twelve items that share a
long prefix are a list).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from typing import TYPE_CHECKING, Any

from ..events import Injected, ModelResponse, Progress, ToolCall, ToolResult, TurnEnded
from ..limits import EventType, Limit, Scope
from ..policies import Policy
from ..state import Slot
from ._base import CLEAR, Detector, LadderState, Verdict, check_int
from ._base import options as _options
from ._keys import folded
from ._scan import same_words

if TYPE_CHECKING:
    from .. import _pure as cython
else:
    try:
        import cython

        if not cython.compiled:
            raise ImportError  # Cython's own stand-ins: haltwise's are the same everywhere
    except ImportError:
        from .. import _pure as cython

__all__ = ["degenerate_text", "find_degenerate", "monologue"]

#: How much of one text is examined: its end, where a degenerating model ends up.
_MAX_TEXT = 16_384

_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_RULE = re.compile(r"^\s{0,3}([-*_])(?:\s*\1){2,}\s*$")
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_ITEM = re.compile(r"^\s*(?:[-*+]|\d{1,9}[.)])\s+(.*)$")
_QUOTE = re.compile(r"^\s{0,3}>\s?")


def _split_markdown(text: str) -> tuple[list[str], list[str]]:
    """Prose segments and list items of ``text``, with code, tables and rules left out."""
    segments: list[str] = []
    items: list[str] = []
    current: list[str] = []
    in_code = False
    # Each pattern is tried only where the line's first character could start it: a fence
    # after at most three spaces (``\s``, as ``isspace`` has it), the rest after the line's
    # white space.
    for line in text.split("\n"):
        head = line[0] if line else "\x00"
        if (
            (head == "`" or head == "~" or head.isspace())
            and ("```" in line or "~~~" in line)
            and _FENCE.match(line)
        ):
            in_code = not in_code
            _flush(segments, current)
            continue
        if in_code or head == "\t" or (head == " " and line.startswith("    ")):
            continue
        stripped = line.strip()
        if not stripped:
            continue
        first = stripped[0]
        if (
            first == "|"
            or ("|" in stripped and stripped.count("|") >= 2)
            or (first in "-*_" and _RULE.match(line))
            or (first == "#" and _HEADING.match(line))
        ):
            _flush(segments, current)
            continue
        item = _ITEM.match(line) if first in "-*+" or first.isdecimal() else None
        if item:
            _flush(segments, current)
            items.append(folded(item.group(1)))
            continue
        if first == ">":
            stripped = _QUOTE.sub("", stripped)
        current.append(folded(stripped))
    _flush(segments, current)
    return segments, items


def _flush(segments: list[str], current: list[str]) -> None:
    """The stretch of prose in ``current`` ends: its lines, joined, are a segment."""
    if current:
        segments.append(" ".join(current))
        current.clear()


def find_degenerate(
    text: str, *, chunk: int = 50, repeats: int = 10, max_gap: int = 250
) -> tuple[str, int] | None:
    """The chunk ``text`` chants and how often, or None.

    Prose degenerates when one ``chunk``-character stretch (taken at word starts) comes back
    ``repeats`` times, each within ``max_gap`` characters of the last on average; a list, when
    ``repeats`` items in a row are the same. The numbers are checked as ``degenerate_text``
    checks them (``InvalidValueError``): a chunk under 8 characters long cannot be stepped
    through a word.
    """
    check_int(repeats, "find_degenerate(repeats)", 2)
    check_int(chunk, "find_degenerate(chunk)", 8)
    check_int(max_gap, "find_degenerate(max_gap)", chunk)
    return _find(text, chunk, repeats, max_gap)


def _find(text: str, chunk: int, repeats: int, max_gap: int) -> tuple[str, int] | None:
    """``find_degenerate`` with its numbers checked already (``degenerate_text`` did)."""
    text = text[-_MAX_TEXT:]
    if not _may_chant(text, chunk, repeats):
        return None
    return _search(text, chunk, repeats, max_gap)


def _may_chant(text: str, chunk: int, repeats: int) -> bool:
    """Whether ``text`` may chant. Two tests, each necessary for a chant; the cheaper first.

    A word of it (its leading ``>`` aside) comes back ``repeats`` times, or one is ``chunk``
    characters long or longer (``_repeated_word``): a chunk taken at a word start begins with
    that whole word, so it comes back at most as often as the word; a chunk is taken inside a
    word only in a word a chunk long; a list item is a line's words after its marker; and the
    words of a segment are those of its lines, a quote's ``>`` aside.

    And a chunk's beginning comes back ``repeats`` times (``_repeated_chunk``): at each place a
    chunk may be taken (a word's start; in a word a chunk long, every fifth of a chunk, as
    ``_chunk_starts`` takes them), what the chunk begins with there. That is the word's text from
    the place on, then the start of the next word as far as the chunk reaches (it is one space
    on in a segment); or the chunk's own characters, when they all lie in the word. A word that
    ends its line may be followed by any word in a segment (the lines between may be code), so
    it counts towards every beginning it starts; a word a chunk long that begins with ``>`` is
    taken to chant (a quote's mark taken off it would move its places). Most prose that repeats
    a word ten times does not repeat the pair of words.

    Compiled, both count hashes, in C (``_text.pxd``): beginnings that share one can only make
    it say yes where no chant is. Interpreted, only the first is made: the second, a loop over
    the words in Python, would cost more than the searches it spares."""
    return _repeated_word(text, chunk, repeats) and _repeated_chunk(text, chunk, repeats)


def _search(text: str, chunk: int, repeats: int, max_gap: int) -> tuple[str, int] | None:
    """``find_degenerate``'s search of ``text`` (its end already cut)."""
    segments, items = _split_markdown(text)
    same = 1
    for before, item in itertools.pairwise(items):
        same = same + 1 if item == before and len(item) >= 3 else 1
        if same >= repeats:
            return item, same
    for segment in segments:
        if len(segment) < chunk * 2:
            continue
        places = _word_starts(segment, chunk, repeats)
        if places is None:  # a word a chunk long or longer
            places = _chunk_starts(segment, chunk)
        found = _chant(segment, places, chunk, repeats, max_gap)
        if found is not None:
            return found
    return None


def _chant(
    segment: str, places: list[int], chunk: int, repeats: int, max_gap: int
) -> tuple[str, int] | None:
    """The first chunk of ``segment``, taken at ``places`` in order, to come back ``repeats``
    times within ``max_gap`` characters of each other on average; and how often it came."""
    seen: dict[str, list[int]] = {}
    for position in places:
        piece = segment[position : position + chunk]
        found = seen.get(piece)
        if found is None:
            seen[piece] = [position]
            continue
        found.append(position)
        if len(found) >= repeats and (position - found[-repeats]) / (repeats - 1) <= max_gap:
            return piece, len(found)
    return None


def _chunk_starts(segment: str, chunk: int) -> list[int]:
    """Where chunks are taken: at every word start, and every fifth of a chunk in a stretch
    with no spaces. (A list, not a generator: compiled, each step of a generator costs more
    than the list of a segment's places, which its length bounds.)"""
    places = []
    limit = len(segment) - chunk
    position = 0
    while position <= limit:
        places.append(position)
        following = segment.find(" ", position, position + chunk) + 1
        position = following if following > position else position + chunk // 5
    return places


def _word_starts(segment: str, chunk: int, repeats: int) -> list[int] | None:
    """The places of ``_frequent_word_starts``, or None when a word of ``segment`` is a chunk
    long or longer. Compiled (``_text.pxd``), each word is counted by a hash of it (FNV-1a over
    its code points) in a table of C integers, in one pass over the segment's characters: no
    str is made of a word. Words that share a hash are counted together, which can only add
    places where no chunk comes back often enough: a chunk begins with its whole first word, so
    it comes back at most as often as that word."""
    return _word_table(segment, chunk, repeats)


if not cython.compiled:

    def _repeated_word(text: str, chunk: int, repeats: int) -> bool:
        """``_may_chant``, interpreted. Compiled, ``_text.pxd`` writes it in C."""
        words = text.split()
        if not words:
            return False
        if max(map(len, words)) >= chunk:
            return True
        return max(Counter(word.lstrip(">") for word in words).values()) >= repeats

    def _repeated_chunk(text: str, chunk: int, repeats: int) -> bool:
        """``_may_chant``'s second test, interpreted: none. A loop in Python over a text's words
        costs more than the search it would spare (three times the search's time over the
        corpus's texts)."""
        return True

    def _word_table(segment: str, chunk: int, repeats: int) -> list[int] | None:
        """``_word_starts``, interpreted: the words counted exactly."""
        words = segment.split(" ")
        if max(map(len, words)) >= chunk:
            return None
        return _frequent_word_starts(segment, words, chunk, repeats)


def _frequent_word_starts(segment: str, words: list[str], chunk: int, repeats: int) -> list[int]:
    """``_chunk_starts`` of a segment whose every word is shorter than a chunk, less those no
    chant can begin at. Each word start is then a place a chunk is taken, and a chunk begins
    with the whole word there: it can come back ``repeats`` times only where its first word
    comes that often, so the chunks of every other word (in prose, nearly all of them) need
    not be taken."""
    counts = Counter(words)
    places: list[int] = []
    if max(counts.values()) < repeats:
        return places
    limit = len(segment) - chunk
    position = 0
    for word in words:
        if position > limit:
            break
        if counts[word] >= repeats:
            places.append(position)
        position += len(word) + 1
    return places


# --------------------------------------------------------------------------------------------
# monologue


class _MonologueState(LadderState):
    __slots__ = ("called", "same", "streak", "texted", "written")

    def __init__(self) -> None:
        super().__init__()
        #: Whether the current turn called a tool.
        self.called = False
        #: Turns in a row without a tool call; of them, how many wrote the same text.
        self.streak = 0
        self.same = 0
        #: The last text counted, as it was written.
        self.written: str | None = None
        #: Whether a response of the current turn wrote text: its end reports it again.
        self.texted = False

    def forget(self) -> None:
        self.streak = self.same = 0
        self.written = None


class _Monologue(Detector):
    __slots__ = ("n", "same")
    factory = "monologue"
    reason = "stuck.monologue"
    unit = "turns"
    pre_events: tuple[EventType, ...] = ()
    post_events: tuple[EventType, ...] = (ModelResponse, ToolCall, TurnEnded, Progress, Injected)

    def __init__(self, n: int, same: int, args: str, **kw: Any) -> None:
        self.n = n
        self.same = same
        super().__init__(args, **kw)

    def new_state(self) -> _MonologueState:
        return _MonologueState()

    def post(self, event: Any, slot: Slot | None, ctx: Any) -> Verdict:
        assert slot is not None
        state: _MonologueState = slot.state
        kind = type(event)
        if kind is ToolCall:
            state.called = True
            return None
        if kind is ModelResponse:
            if event.tool_calls:
                state.called = True
            if event.text:
                self._text(state, event.text)
                state.texted = True
            return None
        if kind is TurnEnded:
            # The turn's text, unless a response of it wrote text (counted then, not twice).
            if event.text and not state.texted:
                self._text(state, event.text)
            state.texted = False
            called, state.called = state.called, False
            if called:
                state.forget()
                self._progress(state)
                return None
            state.streak += 1
            if state.streak == 1 and state.level == CLEAR:
                state.onset = slot.tally.turns
            if state.same >= self.same:
                what = f"the same message was written {state.same} times in a row"
            elif state.streak >= self.n:
                what = f"{state.streak} turns in a row without a tool call"
            else:
                return None
            return self._detected(state, slot, what, (), state.onset)
        # Progress, Injected
        state.forget()
        self._progress(state)
        return None

    def _text(self, state: _MonologueState, text: str) -> None:
        """Count ``text``: the same message as the last one (once folded) or a new one."""
        written = state.written
        state.written = text
        if written is None or (text != written and not _same_words(text, written)):
            state.same = 1
        else:
            state.same += 1

    def _nudge(self, what: str) -> str:
        return f"You seem to be stuck: {what}. Act with a tool, or give your final answer."


def _same_words(first: str, second: str) -> bool:
    """Whether ``first`` and ``second`` fold to the same text: compiled, read in place
    (``same_words``) when both are strs; split otherwise (interpreted, where ``split`` runs in
    C and a loop over characters in Python would cost twenty times more; or a subclass of str,
    which a driver may hand over and the compiled scans do not take)."""
    if cython.compiled and type(first) is str and type(second) is str:
        return same_words(first, second)
    return first.split() == second.split()


def monologue(
    n: int = 8,
    *,
    same: int = 3,
    ladder: bool = True,
    scope: Scope = "run",
    on_limit: str | Policy = "abort",
    shadow: bool = False,
) -> Limit:
    """``n`` turns in a row without a tool call, or the same message ``same`` times in a row
    (``stuck.monologue``). A user message or reported progress starts the count again."""
    check_int(n, "monologue(n)")
    check_int(same, "monologue(same)", 2)
    shown = _options(
        same=(same, 3),
        ladder=(bool(ladder), True),
        scope=(scope, "run"),
        on_limit=(on_limit, "abort"),
        shadow=(bool(shadow), False),
    )
    return _Monologue(
        n,
        same,
        f"{n!r}{shown}",
        ladder=ladder,
        scope=scope,
        on_limit=on_limit,
        shadow=shadow,
        name="monologue",
    )


# --------------------------------------------------------------------------------------------
# degenerate text


class _DegenerateState(LadderState):
    __slots__ = ("last_text",)

    def __init__(self) -> None:
        super().__init__()
        self.last_text: str | None = None


class _Degenerate(Detector):
    __slots__ = ("chunk", "max_gap", "repeats")
    factory = "degenerate_text"
    reason = "stuck.degenerate"
    unit = "messages"
    pre_events: tuple[EventType, ...] = ()
    post_events: tuple[EventType, ...] = (ModelResponse, TurnEnded, ToolResult, Progress, Injected)

    def __init__(self, chunk: int, repeats: int, max_gap: int, args: str, **kw: Any) -> None:
        self.chunk = chunk
        self.repeats = repeats
        self.max_gap = max_gap
        super().__init__(args, **kw)

    def new_state(self) -> _DegenerateState:
        return _DegenerateState()

    def post(self, event: Any, slot: Slot | None, ctx: Any) -> Verdict:
        assert slot is not None
        state: _DegenerateState = slot.state
        kind = type(event)
        if kind is ModelResponse or kind is TurnEnded:
            text = event.text
            if not text or text is state.last_text or text == state.last_text:
                return None
            state.last_text = text
            found = _find(text, self.chunk, self.repeats, self.max_gap)
            if found is None:
                return None
            piece, count = found
            shown = piece if len(piece) <= 60 else piece[:59] + "…"
            what = f"the text {shown!r} was written {count} times over"
            return self._detected(state, slot, what)
        # A tool result, progress, or a user message: the model is doing something else.
        self._progress(state)
        return None

    def _nudge(self, what: str) -> str:
        return f"Your output is degenerating: {what}. Stop repeating it and continue the task."


def degenerate_text(
    repeats: int = 10,
    *,
    chunk: int = 50,
    max_gap: int = 250,
    ladder: bool = True,
    scope: Scope = "run",
    on_limit: str | Policy = "abort",
    shadow: bool = False,
) -> Limit:
    """A ``chunk``-character stretch of the model's prose written ``repeats`` times, each time
    within ``max_gap`` characters on average (``stuck.degenerate``); code, tables and list
    structure are not mistaken for it."""
    check_int(repeats, "degenerate_text(repeats)", 2)
    check_int(chunk, "degenerate_text(chunk)", 8)
    check_int(max_gap, "degenerate_text(max_gap)", chunk)
    shown = _options(
        chunk=(chunk, 50),
        max_gap=(max_gap, 250),
        ladder=(bool(ladder), True),
        scope=(scope, "run"),
        on_limit=(on_limit, "abort"),
        shadow=(bool(shadow), False),
    )
    return _Degenerate(
        chunk,
        repeats,
        max_gap,
        f"{repeats!r}{shown}",
        ladder=ladder,
        scope=scope,
        on_limit=on_limit,
        shadow=shadow,
        name="degenerate_text",
    )
