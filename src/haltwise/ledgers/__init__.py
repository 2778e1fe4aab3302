"""Ledger backends beyond the engine's in-memory one, and choosing one by URL. ``LedgerBusy``,
the error of a ledger that another process's write holds up, lives with the other errors in
``haltwise.engine.errors`` and is importable from here too.

- ``memory:``: this process only (``haltwise.engine.ledger.MemoryLedger``);
- ``sqlite:///ABSOLUTE/PATH.db``: one file, shared by the processes of one machine;
- ``redis://HOST:PORT/DB`` (``rediss://`` for TLS, ``redis://:PASSWORD@HOST...``): a fleet of
  machines; needs ``haltwise[redis]``.

The URL also comes from ``HALTWISE_LEDGER``, ``ledger = "..."`` in ``haltwise.toml`` and
``--ledger URL`` on the command line.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlsplit

from ..engine.errors import InvalidValueError, LedgerBusy
from ..engine.ledger import Ledger, MemoryLedger

__all__ = ["LedgerBusy", "check_ledger_url", "open_ledger"]

_FORMS = (
    "memory:, sqlite:///ABSOLUTE/PATH.db or redis://HOST:PORT/DB "
    "(rediss:// and redis://:PASSWORD@HOST:PORT/DB too)"
)


def check_ledger_url(source: str, url: object) -> str:
    """``url`` if it names a ledger (nothing is opened), else an error naming ``source``."""
    if not isinstance(url, str) or not url.strip():
        raise InvalidValueError(source, url, _FORMS)
    text = url.strip()
    scheme = text.split(":", 1)[0].lower()
    if scheme == "memory" and text.lower() in ("memory:", "memory://"):
        return text
    if scheme == "sqlite":
        if not text.startswith("sqlite:///") or not Path(text.removeprefix("sqlite://")).name:
            raise InvalidValueError(source, url, "sqlite:///ABSOLUTE/PATH.db: " + _FORMS)
        return text
    if scheme in ("redis", "rediss", "valkey", "valkeys"):
        try:
            parts = urlsplit(text)
            parts.port  # noqa: B018 - raises ValueError on a bad port
        except ValueError:
            parts = None
        if parts is None or not parts.hostname:
            raise InvalidValueError(source, url, "redis://HOST:PORT/DB: " + _FORMS)
        return text
    raise InvalidValueError(source, url, _FORMS)


def open_ledger(url: str | Ledger, *, source: str = "ledger", create: bool = True) -> Ledger:
    """The ledger a URL names (a ledger object is given back as it is); ``source`` names where
    the URL came from in errors (``--ledger``, ``HALTWISE_LEDGER``). ``create=False`` is for
    commands that only look at a ledger: a SQLite file that is not there is an error rather
    than a new, empty ledger (and folders) where a mistyped path points."""
    if isinstance(url, Ledger):
        return url
    text = check_ledger_url(source, url)
    scheme = text.split(":", 1)[0].lower()
    if scheme == "memory":
        return MemoryLedger()
    if scheme == "sqlite":
        from .sqlite import SqliteLedger

        return SqliteLedger(Path(text.removeprefix("sqlite://")), create=create)
    from .redis import RedisLedger

    return RedisLedger(text)
