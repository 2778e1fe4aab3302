"""monologue() and degenerate_text(): turns with no tool call, and text chanted over and over."""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from haltwise import (
    Governor,
    Injected,
    ModelResponse,
    RunStarted,
    Stop,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarting,
    Warn,
)
from haltwise.engine.decisions import Decision
from haltwise.engine.detectors import degenerate_text, find_degenerate, monologue
from haltwise.engine.detectors._scan import COMPILED, same_words
from haltwise.engine.detectors._text import (
    _chant,
    _chunk_starts,
    _find,
    _frequent_word_starts,
    _may_chant,
    _search,
    _word_starts,
)
from haltwise.engine.errors import InvalidValueError
from haltwise.engine.limits import Limit
from haltwise.testing import FakeClock


def _governor(limit: Limit) -> Governor:
    governor = Governor(limit, clock=FakeClock())
    governor.handle(RunStarted(prompt="go"))
    return governor


def _talk(governor: Governor, text: str) -> Decision:
    """A turn in which the model only writes ``text``; the strongest decision of the turn."""
    decisions = [
        governor.handle(TurnStarting()),
        governor.handle(ModelResponse(text=text)),
        governor.handle(TurnEnded(text=text)),
    ]
    for kinds in ((Stop,), (Warn,)):
        for decision in decisions:
            if isinstance(decision, kinds):
                return decision
    return decisions[-1]


# --------------------------------------------------------------------------------------------
# monologue


def test_turns_without_a_tool_call_nudge_then_stop() -> None:
    governor = _governor(monologue(3))
    decisions = [_talk(governor, f"Let me think about this, part {turn}.") for turn in range(5)]
    assert not isinstance(decisions[1], Warn)
    assert isinstance(decisions[2], Warn)
    assert "3 turns in a row without a tool call" in decisions[2].message
    assert isinstance(decisions[3], Warn)  # the last note before the stop
    assert isinstance(decisions[4], Stop)
    assert decisions[4].outcome.reason == "stuck.monologue"


def test_the_same_message_three_times_trips_sooner() -> None:
    governor = _governor(monologue(10))
    decisions = [_talk(governor, "I will now fix the bug.") for _ in range(3)]
    assert isinstance(decisions[-1], Warn)
    assert "the same message" in decisions[-1].message


@pytest.mark.parametrize(
    "text", ["I will now fix the bug.", "I will now\nfix the bug.", "Plan:\n\n1. fix  the bug\n"]
)
def test_a_message_reported_by_its_response_and_its_turn_counts_once(text: str) -> None:
    # Drivers report a turn's text with its response and again at its end. A text that folding
    # changes (lines, double spaces) was once counted twice a turn: 4 times after two turns.
    governor = _governor(monologue(10))
    assert not isinstance(_talk(governor, text), Warn)
    assert not isinstance(_talk(governor, text), Warn)
    third = _talk(governor, text)
    assert isinstance(third, Warn)
    assert "the same message was written 3 times in a row" in third.message


def test_a_message_is_the_same_whatever_its_white_space_and_however_it_is_reported() -> None:
    governor = _governor(monologue(10))
    governor.handle(TurnStarting())
    governor.handle(TurnEnded(text="I will now\nfix the bug."))  # no response text reported
    assert not isinstance(_talk(governor, "I will now fix  the bug."), Warn)
    governor.handle(TurnStarting())
    governor.handle(ModelResponse(text="I will now fix the bug."))
    third = governor.handle(TurnEnded(text="I will now fix the bug.\n"))
    assert isinstance(third, Warn)
    assert "written 3 times" in third.message


class _Text(str):
    """A subclass of str, as some frameworks hand a model's text over."""


def test_a_message_that_is_a_subclass_of_str_is_compared_by_its_words() -> None:
    governor = _governor(monologue(10))
    _talk(governor, _Text("I will now\nfix the bug."))
    _talk(governor, "I will now fix  the bug.")
    third = _talk(governor, _Text("I will now fix the bug. "))
    assert isinstance(third, Warn)
    assert "written 3 times" in third.message


#: Words and the white space between them, Unicode's too (``str.split`` splits on all of it).
_SPACED_WORDS = st.sampled_from(
    ["fix", "the", "bug", "fi", "x", " ", "  ", "\n", "\t", "\u3000", "\x1c", "é", "😀"]
)


@given(
    st.lists(_SPACED_WORDS, max_size=12).map("".join),
    st.lists(_SPACED_WORDS, max_size=12).map("".join),
)
def test_two_texts_have_the_same_words_exactly_when_they_split_alike(a: str, b: str) -> None:
    # Compiled, the words are compared where the texts lie; splitting them is the definition.
    # Both builds run it.
    assert same_words(a, b) == (a.split() == b.split())
    assert same_words(a, a)


@given(
    st.lists(
        st.tuples(_SPACED_WORDS, st.sampled_from(["", " ", "\n\t", "\u3000", None])), max_size=12
    )
)
def test_two_texts_that_space_the_same_pieces_apart_differently(pieces: list[Any]) -> None:
    # The second text drops, adds or changes the white space after each piece of the first:
    # words joined, split or left alone, at every place.
    first = "".join(piece for piece, _ in pieces)
    second = "".join(piece if after is None else piece + after for piece, after in pieces)
    assert same_words(first, second) == (first.split() == second.split())
    assert same_words(second, first) == (first.split() == second.split())


def test_a_tool_call_or_a_user_message_starts_the_count_again() -> None:
    governor = _governor(monologue(3))
    _talk(governor, "one")
    _talk(governor, "two")
    governor.handle(TurnStarting())
    governor.handle(ToolCall("ls", {}, call_id="x"))
    governor.handle(ToolResult("ls", "a", call_id="x"))
    governor.handle(TurnEnded())
    assert not isinstance(_talk(governor, "three"), Warn)
    _talk(governor, "four")
    governor.handle(Injected(text="any news?"))
    assert not isinstance(_talk(governor, "five"), Warn)


def test_a_conversation_with_a_user_is_not_a_monologue() -> None:
    governor = _governor(monologue(2))
    for turn in range(10):
        assert not isinstance(_talk(governor, f"Here is answer {turn}."), Warn | Stop)
        governor.handle(Injected(text=f"question {turn}"))


# --------------------------------------------------------------------------------------------
# degenerate text

CHANT = "I will now carefully fix the failing test. " * 14


def test_a_chant_is_found() -> None:
    found = find_degenerate("Looking at the issue.\n\n" + CHANT)
    assert found is not None
    piece, count = found
    assert "fix the failing test" in piece
    assert count >= 10


def test_a_chant_without_spaces_is_found() -> None:
    assert find_degenerate("ha" * 400) is not None


def test_ordinary_prose_is_not_degenerate() -> None:
    text = (
        "The parser reads the header first. Then it walks the body, one token at a time, and "
        "keeps a stack of open scopes. When a scope closes, its symbols are resolved against "
        "the enclosing scope; unresolved names are reported with their line and column. "
    ) * 3
    assert find_degenerate(text) is None


@pytest.mark.parametrize(
    "text",
    [
        # A table repeats its separators and cells.
        "| name | value | unit |\n|------|-------|------|\n"
        + "| retry_limit_for_each_remote_call | 3 | calls |\n" * 30,
        # Code repeats by nature.
        "```python\n" + "assert parse(example_input_value) == expected_output_value\n" * 30 + "```",
        # Indented code too.
        "Example:\n\n" + "    register_handler(event_type_name, callback_function)\n" * 30,
        # List items that share a long prefix are still a list.
        "\n".join(
            f"- Updated `src/haltwise/engine/detectors/module_{index}.py` to use the new key"
            for index in range(30)
        ),
        # A horizontal rule is not a chant.
        "Section one.\n\n" + "-" * 400 + "\n\nSection two.",
    ],
)
def test_markdown_structure_is_not_degenerate(text: str) -> None:
    assert find_degenerate(text) is None


#: Words that come back often (so chunks repeat), some sharing their first letters, and a few
#: rare ones.
_WORDS = st.sampled_from(
    ["the", "test", "tests", "fails", "again", "so", "I", "will", "fix", "it", "x" * 12, "fix:"]
)


@given(
    words=st.lists(_WORDS | st.text("abc", min_size=1, max_size=9), max_size=300),
    chunk=st.integers(13, 60),
    repeats=st.integers(2, 12),
    max_gap=st.integers(5, 300),
)
def test_the_word_scan_finds_what_the_full_scan_finds(
    words: list[str], chunk: int, repeats: int, max_gap: int
) -> None:
    # The scan that takes only the chunks of frequent words finds the same chunk, as often,
    # as the scan that takes every word start (its words are all shorter than a chunk).
    segment = " ".join(words)
    if len(segment) < chunk * 2:
        return
    frequent = _frequent_word_starts(segment, segment.split(" "), chunk, repeats)
    every = _chunk_starts(segment, chunk)
    found = _chant(segment, every, chunk, repeats, max_gap)
    assert _chant(segment, frequent, chunk, repeats, max_gap) == found
    # Counted by hashes (compiled), the places are the same, or more where words share one.
    hashed = _word_starts(segment, chunk, repeats)
    assert hashed is not None
    assert set(frequent) <= set(hashed)
    assert hashed == sorted(hashed)
    assert _chant(segment, hashed, chunk, repeats, max_gap) == found


@given(words=st.lists(st.text("ab", min_size=1, max_size=20), min_size=1, max_size=30))
def test_a_word_a_chunk_long_leaves_the_word_scan_to_the_full_scan(words: list[str]) -> None:
    segment = " ".join(words)
    longest = max(map(len, words))
    for chunk in (longest, longest + 1):
        expected = None if longest >= chunk else _frequent_word_starts(segment, words, chunk, 2)
        hashed = _word_starts(segment, chunk, 2)
        assert (hashed is None) == (expected is None)


#: Pieces of markdown prose, lists, quotes, code and tables, with white space of every kind.
_MARKDOWN = st.sampled_from(
    [
        *("the ", "fix ", "it ", "test ", "again. ", "x" * 12, "ha", "é ", "日本 ", "😀 "),
        *("> ", ">", ">> ", "- ", "1. ", "* ", "```\n", "    ", "| a | b |\n", "# ", "---\n"),
        *("\n", "\n\n", "  ", "\t", "\xa0", "\x1c", "\u3000"),
    ]
)


@given(
    text=st.lists(_MARKDOWN, max_size=400).map("".join),
    chunk=st.integers(8, 60),
    repeats=st.integers(2, 12),
    max_gap=st.integers(8, 300),
)
def test_a_text_in_which_no_word_comes_back_is_not_searched_and_holds_no_chant(
    text: str, chunk: int, repeats: int, max_gap: int
) -> None:
    found = _search(text, chunk, repeats, max_gap)
    if not _may_chant(text, chunk, repeats):
        assert found is None
    assert _find(text, chunk, repeats, max_gap) == found


#: What a model's text is made of near the words the compiled pre-filter reads eight bytes at a
#: time: words of eight characters and more, quote marks, Latin-1 white space and letters,
#: controls, and wider characters (read one at a time).
_PRE_FILTER_WORDS = st.sampled_from(
    [
        *("the ", "fix ", "abcdefgh", "abcdefghijk ", "x" * 9, ">", "> ", ">>quoted ", " "),
        *("\n", "\t", "\x85", "\xa0", "\x01", "é", "ÿÿÿÿÿÿÿÿ ", "\x1f", "日本 ", "word\x0b"),
    ]
)


def _beginnings(text: str, chunk: int) -> list[tuple[str, str, str]]:
    """Each place a chunk may be taken in ``text`` (a word's start; in a word a chunk long, every
    fifth of a chunk while the chunk lies in the word), with what a chunk there begins with:
    ``("whole", chunk, "")`` if it lies in the word; else the word's text from the place (its
    leading ">" aside at its start) with the start of the next word as far as the chunk would
    reach it one space on, ``("pair", begun, after)``, or ``("end", begun, "")`` when the word
    ends its line (any word may follow it in a segment)."""
    words = [(found.start(), found.end()) for found in re.finditer(r"\S+", text)]
    found: list[tuple[str, str, str]] = []
    for index, (start, end) in enumerate(words):
        for position in range(start, end, chunk // 5):
            if end - position >= chunk:
                found.append(("whole", text[position : position + chunk], ""))
                continue
            begun = text[position:end].lstrip(">") if position == start else text[position:end]
            if index + 1 == len(words) or "\n" in text[end : words[index + 1][0]]:
                found.append(("end", begun, ""))
            else:
                after, till = words[index + 1]
                reach = min(till, after + chunk - 1 - (end - position))
                found.append(("pair", begun, text[after:reach]))
            break
    return found


def _chunk_comes_back(text: str, chunk: int, repeats: int) -> bool:
    """``_may_chant``'s second test, by its definition: a beginning comes back ``repeats``
    times, one that ends its line counting with every beginning of its text; or a word a chunk
    long starts with ">" (a quote's mark may be taken off it, moving its places)."""
    if any(len(word) >= chunk and word[0] == ">" for word in text.split()):
        return True
    counts = Counter(_beginnings(text, chunk))
    ends = Counter({begun: count for (kind, begun, _), count in counts.items() if kind == "end"})
    return any(
        count + (ends[begun] if kind == "pair" else 0) >= repeats
        for (kind, begun, _), count in counts.items()
    )


@given(st.lists(_PRE_FILTER_WORDS, max_size=40).map("".join), st.integers(8, 30), st.integers(2, 6))
def test_the_pre_filter_finds_what_counting_the_words_and_the_beginnings_finds(
    text: str, chunk: int, repeats: int
) -> None:
    # Its definition: a word (white space apart, its leading ">" aside) a chunk long or more, or
    # one that comes back ``repeats`` times; and, compiled, a chunk's beginning that comes back
    # as often. Compiled, both are counted by hashes; interpreted, the second is not made.
    words = text.split()
    expected = (
        bool(words)
        and (
            max(map(len, words)) >= chunk
            or max(Counter(word.lstrip(">") for word in words).values()) >= repeats
        )
        and (not COMPILED or _chunk_comes_back(text, chunk, repeats))
    )
    assert _may_chant(text, chunk, repeats) == expected


def test_the_pre_filter_counts_each_text_apart_whatever_came_before() -> None:
    # Compiled, one table serves every count, its rows stamped by the count that wrote them:
    # the words of a text counted before (a longer one, a shorter one) are not this text's.
    for size in (5, 400, 9, 3_000, 9):
        assert _may_chant("go " * size, 50, 10) == (size >= 10)
        assert not _may_chant("go stop", 50, 2)
        assert _may_chant("go stop go", 50, 2)


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"chunk": 4}, "find_degenerate(chunk)"),  # a chunk this short hung the search
        ({"chunk": 0}, "find_degenerate(chunk)"),
        ({"repeats": 1}, "find_degenerate(repeats)"),
        ({"repeats": -1}, "find_degenerate(repeats)"),
        ({"chunk": 50, "max_gap": 10}, "find_degenerate(max_gap)"),
        ({"chunk": True}, "find_degenerate(chunk)"),
    ],
)
def test_find_degenerate_refuses_numbers_it_cannot_search_with(
    options: dict[str, int], named: str
) -> None:
    with pytest.raises(InvalidValueError, match=re.escape(named)):
        find_degenerate("a" * 100, **options)


def test_what_may_chant() -> None:
    assert not _may_chant("", 50, 2)
    assert not _may_chant("one two three one", 50, 3)
    assert _may_chant("one two three one", 50, 2)
    assert _may_chant(">one two > one\n>>one", 50, 3)  # a quote's ">" aside
    # A chant whose word begins a quote's lines and others: ">" counted, it was missed.
    quoted = ">abcdefg\nabcdefg\n>abcdefg\nabcdefg"
    assert find_degenerate(quoted, chunk=8, repeats=3) == ("abcdefg ", 3)
    assert not _may_chant("x" * 49, 50, 10)
    assert find_degenerate("x" * 140) == ("x" * 50, 10)
    if COMPILED:
        # A chunk is taken every fifth of a chunk inside a word a chunk long: ten in 140 x.
        assert _may_chant("x" * 140, 50, 10)
        assert not _may_chant("x" * 139, 50, 10)
        # "the" ten times over, never followed by the same word: no chunk can come back.
        assert not _may_chant(" ".join(f"the w{index}" for index in range(12)), 50, 10)
        assert _may_chant(" ".join(f"the w{index % 2}" for index in range(20)), 50, 10)


def test_a_word_that_ends_its_line_may_be_followed_by_any_word() -> None:
    # Indented code is left out of a segment without ending it: "abc" follows "abc" there,
    # though in the text each is followed by a different line of code.
    text = "".join(f"abc\n    x{index} = 1\n" for index in range(10))
    assert _may_chant(text, 8, 3)
    assert find_degenerate(text, chunk=8, repeats=3) == ("abc abc ", 3)


def test_a_list_of_identical_items_is_degenerate() -> None:
    text = "Next steps:\n" + "- Run the test suite again\n" * 12
    assert find_degenerate(text) is not None


def test_degenerate_text_nudges_then_stops() -> None:
    governor = _governor(degenerate_text())
    first = _talk(governor, CHANT)
    assert isinstance(first, Warn)
    assert "written" in first.message
    assert isinstance(_talk(governor, CHANT + " again"), Warn)
    stop = _talk(governor, CHANT + " and again")
    assert isinstance(stop, Stop)
    assert stop.outcome.reason == "stuck.degenerate"


def test_degenerate_text_repr() -> None:
    assert repr(degenerate_text()) == "degenerate_text(10)"
    assert repr(degenerate_text(12, chunk=40)) == "degenerate_text(12, chunk=40)"
    assert repr(monologue(8, same=4)) == "monologue(8, same=4)"
