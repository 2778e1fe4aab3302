"""Ledger backends beyond the engine's in-memory one, and choosing one by URL.

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

from ..engine.errors import InvalidValueError
from ..engine.ledger import Ledger, MemoryLedger

__all__ = ["open_ledger"]

_FORMS = (
    "memory:, sqlite:///ABSOLUTE/PATH.db or redis://HOST:PORT/DB "
    "(rediss:// and redis://:PASSWORD@HOST:PORT/DB too)"
)


def open_ledger(url: str | Ledger) -> Ledger:
    """The ledger a URL names (a ledger object is given back as it is)."""
    if isinstance(url, Ledger):
        return url
    if not isinstance(url, str) or not url.strip():
        raise InvalidValueError("ledger", url, _FORMS)
    text = url.strip()
    scheme = text.split(":", 1)[0].lower()
    if scheme == "memory" and text.lower() in ("memory:", "memory://"):
        return MemoryLedger()
    if scheme == "sqlite":
        if not text.startswith("sqlite:///") or len(text) <= len("sqlite:///"):
            raise InvalidValueError("ledger", url, "sqlite:///ABSOLUTE/PATH.db: " + _FORMS)
        path = Path(text.removeprefix("sqlite://"))
        if not path.is_absolute():
            raise InvalidValueError("ledger", url, "an absolute path, sqlite:///home/me/l.db")
        from .sqlite import SqliteLedger

        return SqliteLedger(path)
    if scheme in ("redis", "rediss", "valkey", "valkeys"):
        parts = urlsplit(text)
        if not parts.hostname:
            raise InvalidValueError("ledger", url, "redis://HOST:PORT/DB: " + _FORMS)
        from .redis import RedisLedger

        return RedisLedger(text)
    raise InvalidValueError("ledger", url, _FORMS)
