"""haltwise's own event log: events, decisions and outcomes as JSON, one object per line.

``haltwise run --json`` writes this log and ``haltwise audit`` reads it back. Each line is one
JSON object whose ``"type"`` names what it holds:

- an event (``"RunStarted"``, ``"TurnStarting"``, ``"ModelRequest"``, ``"ModelResponse"``,
  ``"ToolCall"``, ``"ToolResult"``, ``"TurnEnded"``, ``"Injected"``, ``"Progress"``,
  ``"RunEnded"``) with the event's fields; fields left at their defaults may be omitted;
- a decision (``"Continue"``, ``"Warn"``, ``"Block"``, ``"Ask"``, ``"Stop"``), as written by
  ``decision_to_dict``;
- ``"Label"``: what is known about the run from outside it, e.g.
  ``{"type": "Label", "resolved": true, "model": "gpt-4o", "exit_status": "submitted"}``.

Money is a string (``"0.0123"``) so that it comes back as the same ``Decimal``. A run starts at
each ``RunStarted``. This module imports only the engine.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator, Mapping
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import IO, Any

from .engine.decisions import Ask, Block, Continue, Decision, Stop, Warn
from .engine.errors import InvalidValueError
from .engine.events import (
    Event,
    Injected,
    ModelRequest,
    ModelResponse,
    Progress,
    RunEnded,
    RunStarted,
    ToolCall,
    ToolResult,
    TurnEnded,
    TurnStarting,
    check,
)
from .engine.outcome import Outcome, Usage

__all__ = [
    "EVENT_TYPES",
    "LogLine",
    "decision_to_dict",
    "event_from_dict",
    "event_to_dict",
    "outcome_to_dict",
    "read_event_log",
    "usage_to_dict",
    "write_line",
]

#: Every event class by its name in the log.
EVENT_TYPES: dict[str, type[Any]] = {
    cls.__name__: cls
    for cls in (
        RunStarted,
        TurnStarting,
        ModelRequest,
        ModelResponse,
        ToolCall,
        ToolResult,
        TurnEnded,
        Injected,
        Progress,
        RunEnded,
    )
}
DECISION_TYPES = frozenset({"Continue", "Warn", "Block", "Ask", "Stop"})
LABEL_TYPE = "Label"

_MONEY_FIELDS = frozenset({"cost"})


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value


def event_to_dict(event: Event) -> dict[str, Any]:
    """``event`` as JSON-compatible data: ``{"type": "ToolCall", "name": ..., ...}``.

    Fields still at their defaults are left out.
    """
    name = type(event).__name__
    if name not in EVENT_TYPES:
        raise InvalidValueError("event_to_dict(event)", event, "one of the events in haltwise")
    data: dict[str, Any] = {"type": name}
    for field in dataclasses.fields(event):
        value = getattr(event, field.name)
        if field.default is not dataclasses.MISSING and value == field.default:
            continue
        data[field.name] = _plain(value)
    return data


def event_from_dict(data: Mapping[str, Any]) -> Event:
    """The event ``data`` describes (the inverse of ``event_to_dict``).

    Raises ``InvalidValueError`` naming the bad type, field or value.
    """
    if not isinstance(data, Mapping):
        raise InvalidValueError("event", data, 'a JSON object with a "type"')
    name = data.get("type")
    cls = EVENT_TYPES.get(name) if isinstance(name, str) else None
    if cls is None:
        valid = ", ".join(sorted(EVENT_TYPES))
        raise InvalidValueError("event type", name, f"one of {valid}")
    fields = {field.name: field for field in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    name = cls.__name__
    for key, value in data.items():
        if key == "type":
            continue
        if key not in fields:
            raise InvalidValueError(
                f"{name} field", key, "one of " + ", ".join(sorted(fields)) or "no fields"
            )
        if key in _MONEY_FIELDS and value is not None:
            try:
                value = Decimal(str(value))
            except InvalidOperation:
                raise InvalidValueError(
                    f"{name}.{key}", value, "an amount such as '0.0123'"
                ) from None
        kwargs[key] = value
    try:
        event: Event = cls(**kwargs)
    except TypeError as error:
        raise InvalidValueError(name, dict(data), f"the fields of {name}: {error}") from None
    check(event)  # each field holds what the governor will take
    return event


def usage_to_dict(usage: Usage) -> dict[str, Any]:
    data = {field.name: getattr(usage, field.name) for field in dataclasses.fields(usage)}
    data["cost"] = None if usage.cost is None else str(usage.cost)
    return data


def outcome_to_dict(outcome: Outcome) -> dict[str, Any]:
    """``outcome`` as JSON-compatible data (money as strings, ``cost`` null when unknown)."""
    return {
        "status": outcome.status.value,
        "reason": outcome.reason,
        "message": outcome.message,
        "usage": usage_to_dict(outcome.usage),
        "run_id": outcome.run_id,
        "partial_output": outcome.partial_output,
        "suggestions": list(outcome.suggestions),
        "checkpoint": outcome.checkpoint,
        "limit": outcome.limit,
        "phase": outcome.phase,
    }


def decision_to_dict(decision: Decision) -> dict[str, Any]:
    """``decision`` as JSON-compatible data: ``{"type": "Warn", "message": ..., ...}``."""
    if isinstance(decision, Continue):
        if decision.max_tokens is None:
            return {"type": "Continue"}
        return {"type": "Continue", "max_tokens": decision.max_tokens}
    if isinstance(decision, Warn):
        data: dict[str, Any] = {
            "type": "Warn",
            "message": decision.message,
            "limit": decision.limit,
        }
        if decision.max_tokens is not None:
            data["max_tokens"] = decision.max_tokens
        return data
    if isinstance(decision, Block):
        return {
            "type": "Block",
            "call": event_to_dict(decision.call),
            "reason": decision.reason,
            "limit": decision.limit,
            "retryable": decision.retryable,
        }
    if isinstance(decision, Ask):
        return {
            "type": "Ask",
            "question": decision.question,
            "reason": decision.reason,
            "limit": decision.limit,
            "choices": [choice.value for choice in decision.choices],
            "timeout": decision.timeout,
        }
    if isinstance(decision, Stop):
        return {
            "type": "Stop",
            "outcome": outcome_to_dict(decision.outcome),
            "synthesize": decision.synthesize,
            "provider_called": decision.provider_called,
        }
    raise InvalidValueError("decision_to_dict(decision)", decision, "a haltwise decision")


def write_line(stream: IO[str], data: Mapping[str, Any]) -> None:
    """Write one log line (an ``event_to_dict``/``decision_to_dict`` result, or a label).

    Text is written as it is, unless the stream's encoding cannot hold a character of it (a
    lone surrogate, which no UTF-8 encoder takes; an emoji on a Latin-1 stream): the line is
    then written with every character past ASCII as its JSON escape, which reads back the
    same. A log line is never lost to its text (the run's last line is its outcome)."""
    try:
        stream.write(json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")
    except UnicodeEncodeError:
        stream.write(json.dumps(data, separators=(",", ":")) + "\n")


@dataclasses.dataclass(frozen=True, slots=True)
class LogLine:
    """One line of an event log: an event, a decision (as data), or a label (as data)."""

    #: The 1-based line number, for error messages.
    line: int
    event: Event | None = None
    decision: dict[str, Any] | None = None
    label: dict[str, Any] | None = None


def read_event_log(source: str | Path | IO[str]) -> Iterator[LogLine]:
    """The lines of a JSONL event log, streamed.

    A line that is not valid raises ``InvalidValueError`` naming the file and the line number,
    JSON that Python's ``json`` cannot decode (nested too deeply, an integer of more digits
    than ``sys.get_int_max_str_digits()``) included; blank lines are skipped.
    """
    if isinstance(source, str | Path):
        path = Path(source)
        with path.open(encoding="utf-8") as stream:
            yield from _read(stream, str(path))
    else:
        yield from _read(source, getattr(source, "name", "<stream>"))


def _read(stream: IO[str], name: str) -> Iterator[LogLine]:
    for number, text in enumerate(stream, 1):
        if not text.strip():
            continue
        where = f"{name}:{number}"
        try:
            data = json.loads(text)
        except json.JSONDecodeError as error:
            raise InvalidValueError(where, text[:80], f"a JSON object ({error.msg})") from None
        except (RecursionError, ValueError) as error:
            # Nested too deeply, or an integer too long to convert: said as the audit's JSON
            # readers say it (imported here: they read event logs with this module).
            from .audit.readers import _beyond_json

            raise InvalidValueError(
                where, text[:80], f"a JSON object ({_beyond_json(error)})"
            ) from None
        kind = data.get("type") if isinstance(data, dict) else None
        if kind in DECISION_TYPES:
            yield LogLine(number, decision=data)
        elif kind == LABEL_TYPE:
            yield LogLine(number, label=data)
        else:
            try:
                yield LogLine(number, event=event_from_dict(data))
            except InvalidValueError as error:
                # "file:line ModelResponse.input_tokens='12' is not valid: expected ..."
                source = f"{where} {error.source}"
                raise InvalidValueError(source, error.value, error.valid) from None
