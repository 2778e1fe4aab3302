"""The Redis ledger: one budget for a fleet of machines (Redis 6+ or Valkey; redis-py).

Each check-and-spend is one Lua script, so it is atomic however many machines run it. Scripts
read the server's own clock (``TIME``), so leases mean the same on every machine. Amounts are
integers well under 2^53 (a Lua number holds them exactly: money is in nano-dollars). Keys
live under a prefix (``haltwise:`` by default), so one Redis can hold several fleets.

Retention is kept with key TTLs, counted on the server's clock: a budget window's hash expires
``retention`` (7 days by default) after the window resets (a budget with no period never
does); a run's record ``retention`` after it ends, or, renewed by each heartbeat, ``retention``
after it would be gone (not heard from: see ``haltwise.engine.ledger``), so a live run's never
does. The indexes that name them (runs by start, ended runs by end, live runs, questions, kill
flags, budgets) are cleared of what expired every ten minutes at most, as a process registers a
run.

The index of ended runs is newer than the rest: an older haltwise ended runs with no entry in
it. The first reads of ended runs put those in (``_INDEX_ENDED``), walking the index by start
from the newest, a few hundred runs (a few milliseconds of the server's time) per read, until a
key (``PREFIX ended:indexed``) says it is done for good. A run ended longer ago than
``retention`` is left out, and one whose record never expires (ended by a haltwise older than
retention) is given the expiry it would have had. Runs that an older haltwise ends after that
(in a fleet upgraded a machine at a time) are not in it: delete that key to look again.

Needs ``haltwise[redis]``; imported only when a ``redis://`` URL is used.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from ..cli._errors import require_extra
from ..engine.errors import ConfigurationError, LedgerError
from ..engine.ledger import (
    DEFAULT_LEASE,
    GONE_BEATS,
    GONE_SECONDS,
    PRUNE_SECONDS,
    RETENTION,
    Budget,
    BudgetState,
    Grant,
    Ledger,
    Pending,
    RunInfo,
    new_id,
    not_running,
)

# Before redis-py's import: without it, the error names the extra to install (a command's exit 2).
require_extra("redis", "the Redis ledger")

import redis  # noqa: E402

__all__ = ["RedisLedger"]

T = TypeVar("T")

#: A connection used this recently (seconds) is not checked for a close by the server before it
#: is used again: no server restarts that fast. (A check costs a system call.)
_FRESH_SECONDS = 0.05

#: When a connection not opened yet (or closed) was last used: never checked, it opens when used.
_UNOPENED = float("inf")


class _Script:
    """A Lua script, run by its SHA1 (``EVALSHA``) and loaded on a server that lacks it."""

    __slots__ = ("head", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        sha = hashlib.sha1(text.encode(), usedforsecurity=False).hexdigest().encode()
        #: What every call of it starts with, after the count of the command's parts.
        self.head = b"$7\r\nEVALSHA\r\n$40\r\n" + sha + b"\r\n"


def _bulk(value: str | bytes) -> bytes:
    """One part of a command, as the Redis protocol frames it."""
    data = value.encode() if isinstance(value, str) else value
    return b"$%d\r\n%s\r\n" % (len(data), data)


def _command(script: _Script, keys: int, parts: int, body: bytes) -> bytes:
    """``EVALSHA`` of ``script`` with ``body``: ``parts`` framed parts, ``keys`` of them keys."""
    return b"*%d\r\n%s%s%s" % (parts + 3, script.head, _bulk(b"%d" % keys), body)


#: How long the ids of settled grants and spends are remembered: 7 days, in seconds, framed.
_SETTLED_FOR = _bulk(b"%d" % (7 * 86400))


# The budget scripts share a layout: a budget's hash (meta, spent, held, lim), its holds (a
# sorted set of grant ids by expiry, and a hash of their amounts), the index of budgets, each
# holder's set of "budget\ngrant" members (for heartbeats), and a key per settled id. It is the
# first release's layout, so that its processes and these can share one Redis while a fleet is
# upgraded. Lapsed holds are swept only when they would refuse a request (and by
# ``budgets()``), not on every call. The scripts are written out straight, with no Lua
# functions: each closure a call makes costs the server about as much as a command, and so
# does ``TIME``, asked for only where it is needed.

# A budget's hash just made (KEYS[1], ARGV[1] its meta) expires ``retention`` (the last ARGV)
# after its window resets, and never sooner than that from now: a window's count is kept while
# it is current. Run once per window, not on every call.
_EXPIRE_WINDOW = """
  local resets = cjson.decode(ARGV[1])[4]
  if type(resets) == 'number' then
    local keep = tonumber(ARGV[#ARGV])
    local clock = redis.call('TIME')
    local ends = math.ceil(math.max(resets, tonumber(clock[1])) + keep)
    redis.call('EXPIREAT', KEYS[1], string.format('%d', ends))
  end
"""

# The budget's row (made if new: KEYS[4] is the index, ARGV[1] its meta; holds left from an
# expired one of the same window go) and what it has used.
_READ = (
    """
local row = redis.call('HMGET', KEYS[1], 'spent', 'held', 'lim')
if not row[1] then
  redis.call('HSET', KEYS[1], 'meta', ARGV[1], 'spent', 0, 'held', 0)
  redis.call('SADD', KEYS[4], KEYS[1])
  redis.call('DEL', KEYS[2], KEYS[3])
"""
    + _EXPIRE_WINDOW
    + """
end
local before = tonumber(row[1] or '0') + tonumber(row[2] or '0')
"""
)

_NOW = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
"""

# The holds whose lease ran out by ``now``, let go of; ``row`` and ``before`` read again.
_SWEEP = """
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now)
if #expired > 0 then
  for _, grant in ipairs(expired) do
    local amount = redis.call('HGET', KEYS[3], grant)
    if amount then
      redis.call('HINCRBY', KEYS[1], 'held', -tonumber(amount))
      redis.call('HDEL', KEYS[3], grant)
    end
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  row = redis.call('HMGET', KEYS[1], 'spent', 'held', 'lim')
  before = tonumber(row[1] or '0') + tonumber(row[2] or '0')
end
"""

# KEYS: budget, holds, amounts, index; ARGV: meta, amount, limit, retention
_CHARGE = _Script(
    _READ
    + """
local amount, limit = tonumber(ARGV[2]), tonumber(ARGV[3])
if before + amount > limit then
"""
    + _NOW
    + _SWEEP
    + """
end
if row[3] ~= ARGV[3] then redis.call('HSET', KEYS[1], 'lim', ARGV[3]) end
if before + amount > limit then return {0, before} end
redis.call('HINCRBY', KEYS[1], 'spent', ARGV[2])
return {amount, before}
"""
)

# KEYS: budget, holds, amounts, index, holder set;
# ARGV: meta, amount, limit, what it needs at least, grant id, lease, retention
_RESERVE = _Script(
    _READ
    + _NOW
    + """
local amount, limit, need = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
if math.min(amount, limit - before) < need then
"""
    + _SWEEP
    + """
end
if row[3] ~= ARGV[3] then redis.call('HSET', KEYS[1], 'lim', ARGV[3]) end
local granted = math.min(amount, limit - before)
if granted < need then return {0, before} end
local held = ARGV[2]
if granted ~= amount then held = string.format('%d', granted) end
redis.call('HINCRBY', KEYS[1], 'held', held)
redis.call('HSET', KEYS[3], ARGV[5], held)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[6]), ARGV[5])
redis.call('SADD', KEYS[5], KEYS[1] .. '\\n' .. ARGV[5])
return {granted, before}
"""
)

# KEYS: budget, holds, amounts, index, done; ARGV: meta, op id, amount ('' to release),
# seconds the op id is remembered, retention. What the budget has used after.
_SETTLE = _Script(
    """
local held = redis.call('HGET', KEYS[3], ARGV[2])
local holding
if held then
  holding = redis.call('HINCRBY', KEYS[1], 'held', -tonumber(held))
  redis.call('HDEL', KEYS[3], ARGV[2])
  redis.call('ZREM', KEYS[2], ARGV[2])
end
if ARGV[3] ~= '' and redis.call('SET', KEYS[5], '1', 'NX', 'EX', ARGV[4]) then
  if not held and redis.call('HSETNX', KEYS[1], 'meta', ARGV[1]) == 1 then
    redis.call('HSET', KEYS[1], 'held', 0)
    redis.call('SADD', KEYS[4], KEYS[1])
"""
    + _EXPIRE_WINDOW
    + """
  end
  local spent = redis.call('HINCRBY', KEYS[1], 'spent', ARGV[3])
  return spent + (holding or tonumber(redis.call('HGET', KEYS[1], 'held') or '0'))
end
if ARGV[3] == '' then redis.call('SET', KEYS[5], '1', 'NX', 'EX', ARGV[4]) end
local row = redis.call('HMGET', KEYS[1], 'spent', 'held')
return tonumber(row[1] or '0') + tonumber(row[2] or '0')
"""
)

# KEYS: budget, holds, amounts, index; returns meta, spent, held, limit. A budget whose hash
# expired leaves the index, with what was left of its holds.
_STATE = _Script(
    """
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[4], KEYS[1])
  redis.call('DEL', KEYS[2], KEYS[3])
  return {'', 0, 0, ''}
end
local row, before
"""
    + _NOW
    + _SWEEP
    + """
local state = redis.call('HMGET', KEYS[1], 'meta', 'spent', 'held', 'lim')
return {state[1] or '', tonumber(state[2] or '0'), tonumber(state[3] or '0'), state[4] or ''}
"""
)

# KEYS: run hash, holder set, kills, live set, runs index; ARGV: counts json, status, lease,
# prefix, the run's registration as json ('' for none): the run is recorded again from it if the
# server lost it (restarted without persistence); gone_after, retention: its record expires
# ``retention`` after it would be gone.
_HEARTBEAT = _Script(
    """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local info = redis.call('HGET', KEYS[1], 'info')
local data
if info then
  data = cjson.decode(info)
elseif ARGV[5] ~= '' then
  data = cjson.decode(ARGV[5])
  if not data['started'] or data['started'] == 0 then data['started'] = now end
  local run_id = string.sub(KEYS[1], string.len(ARGV[4]) + 5)
  redis.call('SADD', KEYS[4], run_id)
  redis.call('ZADD', KEYS[5], data['started'], run_id)
end
if data then
  data['counts'] = cjson.decode(ARGV[1])
  data['status'] = ARGV[2]
  data['heartbeat'] = now
  redis.call('HSET', KEYS[1], 'info', cjson.encode(data))
  local silence = math.max(tonumber(ARGV[6]), """
    + str(GONE_BEATS)
    + """ * (tonumber(data['interval']) or 0))
  redis.call('EXPIRE', KEYS[1], math.ceil(silence + tonumber(ARGV[7])))
end
for _, member in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  local cut = string.find(member, '\\n', 1, true)
  local budget = string.sub(member, 1, cut - 1)
  local grant = string.sub(member, cut + 1)
  local holds = budget .. ':holds'
  if redis.call('ZSCORE', holds, grant) then
    redis.call('ZADD', holds, 'XX', now + tonumber(ARGV[3]), grant)
  else
    redis.call('SREM', KEYS[2], member)
  end
end
return redis.call('HGET', KEYS[3], string.sub(KEYS[1], string.len(ARGV[4]) + 5))
"""
)

# KEYS: live set, kills; ARGV: reason, then the run ids to tell: those still live are told (a
# run may end between the read of the live runs and this), and their ids returned.
_KILL = _Script("""
local told = {}
for i = 2, #ARGV do
  if redis.call('SISMEMBER', KEYS[1], ARGV[i]) == 1 then
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[1])
    told[#told + 1] = ARGV[i]
  end
end
return told
""")

# KEYS: pending hash, run hash, live set; ARGV: choice, amount ('' for none), gone_after, run id.
# A run that is not running is not answered: its record is returned to say why. An answer taken
# returns the question it answers (the run may end, and its question go, as soon as it returns).
_ANSWER = _Script(
    """
local info = redis.call('HGET', KEYS[2], 'info')
if not info then return {'unknown'} end
if redis.call('SISMEMBER', KEYS[3], ARGV[4]) == 0 then return {'ended', info} end
local data = cjson.decode(info)
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local silence = math.max(tonumber(ARGV[3]), """
    + str(GONE_BEATS)
    + """ * (tonumber(data['interval']) or 0))
if now - (tonumber(data['heartbeat']) or 0) > silence then
  return {'gone', info, string.format('%.6f', now)}
end
if redis.call('EXISTS', KEYS[1]) == 0 then return {'none'} end
local answered = redis.call('HGET', KEYS[1], 'answer')
if answered and answered ~= '' then return {'taken', answered} end
local listed = redis.call('HGET', KEYS[1], 'choices')
local choices = cjson.decode(listed)
for _, choice in ipairs(choices) do
  if choice == ARGV[1] then
    redis.call('HSET', KEYS[1], 'answer', ARGV[1], 'amount', ARGV[2])
    local asked = redis.call('HMGET', KEYS[1], 'question', 'asked')
    return {'ok', asked[1], listed, asked[2]}
  end
end
return {'bad', table.concat(choices, ', ')}
"""
)

#: At most this many old entries of the recent runs' index are looked at in one prune.
_PRUNE_RUNS = 1000

# KEYS: runs index, live set, questions index, kills, budgets index, ended runs index; ARGV:
# prefix, retention, gone_after. The indexes let go of what expired: runs, and budgets, whose
# record is no more (an ended run's record expires ``retention`` after its end, its score).
_PRUNE = _Script(
    """
local t = redis.call('TIME')
local now = tonumber(t[1])
local run = ARGV[1] .. 'run:'
local old = now - tonumber(ARGV[2])
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', old, 'LIMIT', 0, """
    + str(_PRUNE_RUNS)
    + """)) do
  if redis.call('EXISTS', run .. id) == 0 then redis.call('ZREM', KEYS[1], id) end
end
for _, id in ipairs(redis.call('SMEMBERS', KEYS[2])) do
  if redis.call('EXISTS', run .. id) == 0 then
    redis.call('SREM', KEYS[2], id)
    redis.call('DEL', ARGV[1] .. 'holder:' .. id)
  end
end
local asked = now - tonumber(ARGV[3])
for _, id in ipairs(redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', asked)) do
  if redis.call('EXISTS', run .. id) == 0 then
    redis.call('DEL', ARGV[1] .. 'pending:' .. id)
    redis.call('ZREM', KEYS[3], id)
  end
end
for _, id in ipairs(redis.call('HKEYS', KEYS[4])) do
  if redis.call('EXISTS', run .. id) == 0 then redis.call('HDEL', KEYS[4], id) end
end
for _, name in ipairs(redis.call('SMEMBERS', KEYS[5])) do
  if redis.call('EXISTS', name) == 0 then
    redis.call('DEL', name .. ':holds', name .. ':amounts')
    redis.call('SREM', KEYS[5], name)
  end
end
redis.call('ZREMRANGEBYSCORE', KEYS[6], '-inf', old)
return 0
"""
)


#: One call of ``_INDEX_ENDED`` looks at this many runs of the index by start at most, and
#: stops once it has decoded this many bytes of their records (the server does nothing else
#: meanwhile: a few milliseconds, however large a run's final output was).
_INDEX_RUNS = 500
_INDEX_BYTES = 256 * 1024

# KEYS: runs index, live set, ended runs index, the key saying how far it got ("SCORE COUNT":
# the score reached, and how many runs of that score were looked at; "done" at the end); ARGV:
# prefix, retention, how many runs and bytes at most. Puts the runs that ended with no entry in
# the index of ended runs into it, walking the index by start from the newest; 1 once there are
# none left. Each call is atomic and may be made again (an entry is added once, an expiry given
# only where there is none), by any number of processes at once: they share where it got to.
_INDEX_ENDED = _Script(
    """
local state = redis.call('GET', KEYS[4])
if state == 'done' then return 1 end
local top, skip = '+inf', 0
if state then
  local space = string.find(state, ' ', 1, true)
  top, skip = string.sub(state, 1, space - 1), tonumber(string.sub(state, space + 1))
end
local most, budget = tonumber(ARGV[3]), tonumber(ARGV[4])
local batch = redis.call(
  'ZREVRANGEBYSCORE', KEYS[1], top, '-inf', 'WITHSCORES', 'LIMIT', skip, most)
local t = redis.call('TIME')
local keep = tonumber(ARGV[2])
local old = tonumber(t[1]) - keep
local last, same, read, cut = top, skip, 0, false
for i = 1, #batch, 2 do
  if read >= budget then
    cut = true
    break
  end
  local id, started = batch[i], batch[i + 1]
  if started == last then same = same + 1 else last, same = started, 1 end
  local name = ARGV[1] .. 'run:' .. id
  if not redis.call('ZSCORE', KEYS[3], id) and redis.call('SISMEMBER', KEYS[2], id) == 0 then
    local info = redis.call('HGET', name, 'info')
    if info then
      read = read + #info
      local decoded, data = pcall(cjson.decode, info)  -- a record it cannot read is left be
      local ended = decoded and type(data) == 'table' and data['outcome'] ~= nil
        and data['outcome'] ~= cjson.null and tonumber(data['heartbeat'])
      if ended then
        if redis.call('TTL', name) == -1 then
          redis.call('EXPIREAT', name, string.format('%d', math.ceil(ended + keep)))
        end
        if ended > old then redis.call('ZADD', KEYS[3], 'NX', ended, id) end
      end
    end
  end
end
if not cut and #batch < 2 * most then
  redis.call('SET', KEYS[4], 'done')
  return 1
end
redis.call('SET', KEYS[4], last .. ' ' .. same)
return 0
"""
)


class RedisLedger(Ledger):
    """A ledger in Redis, shared by every machine that reaches it.

    Scripts are one round trip each (``EVALSHA``), on a connection of this ledger's own (taken
    from a list of idle ones, so threads need no lock), with the command framed here: redis-py's
    general path (its pool, response callbacks, and a default retry that would send a charge
    again after its reply was lost) costs more than the round trip itself on a fast network. A
    connection idle for a while is checked for a close by the server (it restarted) before the
    command is sent; a command is never sent twice, except after ``NOSCRIPT``, when it did not
    run."""

    def __init__(
        self,
        url: str,
        *,
        prefix: str = "haltwise:",
        timeout: float = 5.0,
        gone_after: float = GONE_SECONDS,
        retention: float = RETENTION,
    ) -> None:
        """``gone_after`` and ``retention``: see ``haltwise.engine.ledger`` (give every process
        of a fleet the same)."""
        self.url = url
        self.prefix = prefix
        self.gone_after = gone_after
        self.retention = retention
        #: The retention in whole seconds, framed: the last part of every budget script's call.
        self._keep = _bulk(b"%d" % max(1, math.ceil(retention)))
        #: When this process looks for what expired next (``time.monotonic()``).
        self._next_prune = 0.0
        #: Whether the index of ended runs is known to hold the runs an older haltwise ended
        #: (see the module's docstring): until then, each read of ended runs adds some.
        self._ended_indexed = False
        try:
            self._redis = redis.Redis.from_url(
                url,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                decode_responses=True,
            )
        except ValueError as error:
            raise ConfigurationError(f"bad Redis ledger URL {self}: {error}") from None
        #: Connections not in use, with when each was last used (``time.monotonic()``).
        self._idle: list[tuple[Any, float]] = []
        self._pid = os.getpid()
        #: Each budget's keys and meta, framed (a budget is asked for again and again).
        self._framed: dict[Budget, tuple[bytes, bytes]] = {}
        self._index = _bulk(self._key("budgets"))

    def __repr__(self) -> str:
        """The URL, its password hidden."""
        parts = urlsplit(self.url)
        if parts.password is None:
            return self.url
        netloc = f"{parts.username or ''}:***@{parts.hostname}"
        if parts.port is not None:
            netloc += f":{parts.port}"
        return urlunsplit(parts._replace(netloc=netloc))

    def close(self) -> None:
        while self._idle:
            self._idle.pop()[0].disconnect()
        self._redis.close()

    def _call(self, action: Callable[[], T]) -> T:
        try:
            return action()
        except redis.RedisError as error:
            raise LedgerError(f"the Redis ledger {self!r} failed: {error}") from None

    def _run(self, script: _Script, command: bytes) -> Any:
        """Send ``command`` (an ``EVALSHA`` of ``script``) and read its reply."""
        if self._pid != os.getpid():  # forked: the parent's connections are not ours
            self._pid = os.getpid()
            self._idle = []
        try:
            connection, last_used = self._idle.pop()
        except IndexError:
            connection, last_used = self._redis.connection_pool.make_connection(), _UNOPENED
        try:
            if time.monotonic() - last_used > _FRESH_SECONDS:
                try:
                    closed = connection.can_read()  # by the server (restarted, idle timeout)
                except redis.ConnectionError:
                    closed = True
                if closed:
                    connection.disconnect()
            connection.send_packed_command([command], check_health=False)
            try:
                reply = connection.read_response()
            except redis.exceptions.NoScriptError:  # the script did not run: load it, again
                connection.send_command("SCRIPT", "LOAD", script.text)
                connection.read_response()
                connection.send_packed_command([command], check_health=False)
                reply = connection.read_response()
        except redis.RedisError as error:
            # A reply was read (an error of the script's), or redis-py closed the connection.
            self._idle.append((connection, time.monotonic()))
            raise LedgerError(f"the Redis ledger {self!r} failed: {error}") from None
        except BaseException:
            connection.disconnect()  # interrupted: its reply may be left unread
            self._idle.append((connection, _UNOPENED))
            raise
        self._idle.append((connection, time.monotonic()))
        return reply

    def _eval(self, script: _Script, keys: list[str], args: list[str | int | float]) -> Any:
        body = b"".join([*map(_bulk, keys), *(_bulk(str(arg)) for arg in args)])
        return self._run(script, _command(script, len(keys), len(keys) + len(args), body))

    def _key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    def _budget(self, budget: Budget) -> tuple[bytes, bytes]:
        """The budget's keys (its hash, holds, amounts, and the index) and meta, framed."""
        framed = self._framed.get(budget)
        if framed is None:
            if len(self._framed) >= 1024:  # windows roll over: forget the old ones
                self._framed.clear()
            base = self._key("budget", budget.id)
            meta = json.dumps([budget.key, budget.metric, budget.window, budget.resets_at])
            keys = _bulk(base) + _bulk(base + ":holds") + _bulk(base + ":amounts")
            framed = self._framed[budget] = (keys + self._index, _bulk(meta))
        return framed

    # --- checkpoints -----------------------------------------------------------------------

    def save_checkpoint(self, run_id: str, data: dict[str, Any]) -> str:
        self._call(lambda: self._redis.hset(self._key("checkpoints"), run_id, json.dumps(data)))
        return "redis:" + run_id

    def load_checkpoint(self, ref: str) -> dict[str, Any]:
        run_id = ref.removeprefix("redis:")
        text = self._call(lambda: self._redis.hget(self._key("checkpoints"), run_id))
        if text is None:
            raise LedgerError(f"no checkpoint {ref!r} in the Redis ledger {self!r}")
        data: dict[str, Any] = json.loads(str(text))
        return data

    # --- budgets ---------------------------------------------------------------------------

    def charge(self, budget: Budget, amount: int, limit: int) -> Grant:
        keys, meta = self._budget(budget)
        body = keys + meta + _bulk(b"%d" % amount) + _bulk(b"%d" % limit) + self._keep
        granted, used = self._run(_CHARGE, _command(_CHARGE, 4, 8, body))
        return Grant("", int(granted), int(used))

    def reserve(
        self,
        budget: Budget,
        amount: int,
        limit: int,
        *,
        holder: str,
        minimum: int | None = None,
        lease: float = DEFAULT_LEASE,
    ) -> Grant:
        grant_id = new_id()
        keys, meta = self._budget(budget)
        need = amount if minimum is None else max(minimum, 1)
        body = b"".join(
            (
                keys,
                _bulk(self._key("holder", holder)),
                meta,
                _bulk(b"%d" % amount),
                _bulk(b"%d" % limit),
                _bulk(b"%d" % need),
                _bulk(grant_id),
                _bulk(repr(float(lease))),
                self._keep,
            )
        )
        granted, used = self._run(_RESERVE, _command(_RESERVE, 5, 12, body))
        return Grant(grant_id if granted else "", int(granted), int(used))

    def _settled(self, budget: Budget, op_id: str, amount: int | None) -> int:
        keys, meta = self._budget(budget)
        body = b"".join(
            (
                keys,
                _bulk(self._key("done", op_id)),
                meta,
                _bulk(op_id),
                _bulk(b"" if amount is None else b"%d" % amount),
                _SETTLED_FOR,
                self._keep,
            )
        )
        return int(self._run(_SETTLE, _command(_SETTLE, 5, 10, body)))

    def commit(self, budget: Budget, grant_id: str, actual: int) -> int:
        return self._settled(budget, grant_id, actual)

    def release(self, budget: Budget, grant_id: str) -> None:
        self._settled(budget, grant_id, None)

    def spend(self, budget: Budget, amount: int, op_id: str) -> int:
        return self._settled(budget, op_id, amount)

    def budgets(self) -> list[BudgetState]:
        names = self._call(lambda: self._redis.smembers(self._key("budgets")))
        states = []
        for name in sorted(str(name) for name in names):
            keys = [name, name + ":holds", name + ":amounts", self._key("budgets")]
            meta, spent, held, limit = self._eval(_STATE, keys, [])
            if not meta:
                continue
            key, metric, window, resets_at = json.loads(meta)
            states.append(
                BudgetState(
                    Budget(key, metric, window, resets_at),
                    int(spent),
                    int(held),
                    int(limit) if limit else None,
                )
            )
        return states

    # --- live runs -------------------------------------------------------------------------

    def _run_key(self, run_id: str) -> str:
        return self._key("run", run_id)

    def register(self, info: RunInfo) -> None:
        def register() -> None:
            now = _server_time(self._redis)
            record = RunInfo.from_dict(
                {**info.to_dict(), "started": info.started or now, "heartbeat": now}
            )
            keep = math.ceil(record.silence(self.gone_after) + self.retention)
            pipe = self._redis.pipeline()
            pipe.hset(self._run_key(info.run_id), "info", json.dumps(record.to_dict()))
            pipe.expire(self._run_key(info.run_id), keep)
            pipe.zadd(self._key("runs"), {info.run_id: record.started})
            pipe.sadd(self._key("live"), info.run_id)
            pipe.zrem(self._key("ended"), info.run_id)  # resumed: live again
            pipe.hdel(self._key("kills"), info.run_id)
            pipe.execute()

        self._call(register)
        if time.monotonic() >= self._next_prune:
            self.prune()

    def prune(self) -> None:
        """Clear the indexes of the runs and budgets whose records expired (done as runs
        register, every ten minutes at most)."""
        self._next_prune = time.monotonic() + PRUNE_SECONDS
        names = ("runs", "live", "pendings", "kills", "budgets", "ended")
        keys = [self._key(name) for name in names]
        self._eval(_PRUNE, keys, [self.prefix, self.retention, self.gone_after])

    def heartbeat(
        self,
        run_id: str,
        counts: dict[str, Any],
        status: str,
        lease: float = DEFAULT_LEASE,
        *,
        info: RunInfo | None = None,
    ) -> str | None:
        keys = [
            self._run_key(run_id),
            self._key("holder", run_id),
            self._key("kills"),
            self._key("live"),
            self._key("runs"),
        ]
        registered = "" if info is None else json.dumps(info.to_dict())
        args: list[str | int | float] = [
            json.dumps(counts),
            status,
            lease,
            self.prefix,
            registered,
            self.gone_after,
            self.retention,
        ]
        reason = self._eval(_HEARTBEAT, keys, args)
        return None if reason is None else str(reason)

    def finish(self, run_id: str, outcome: dict[str, Any]) -> None:
        def finish() -> None:
            now = _server_time(self._redis)
            text = self._redis.hget(self._run_key(run_id), "info")
            data = json.loads(str(text)) if text else RunInfo(run_id, started=now).to_dict()
            data.update(outcome=outcome, status=str(outcome.get("status", "ended")), heartbeat=now)
            pipe = self._redis.pipeline()
            pipe.hset(self._run_key(run_id), "info", json.dumps(data))
            pipe.expire(self._run_key(run_id), max(1, math.ceil(self.retention)))
            pipe.zadd(self._key("runs"), {run_id: float(data["started"])})
            pipe.srem(self._key("live"), run_id)
            pipe.zadd(self._key("ended"), {run_id: now})
            pipe.delete(self._key("holder", run_id))  # no heartbeat renews its leases now
            pipe.delete(self._key("pending", run_id))
            pipe.zrem(self._key("pendings"), run_id)
            pipe.hdel(self._key("kills"), run_id)
            pipe.execute()

        self._call(finish)

    def _infos(self, ids: list[str]) -> list[RunInfo]:
        """The runs ``ids`` names, read in one round trip (those with no record left out)."""
        pipe = self._redis.pipeline(transaction=False)
        for run_id in ids:
            pipe.hget(self._run_key(run_id), "info")
        return [RunInfo.from_dict(json.loads(text)) for text in pipe.execute() if text]

    def runs(self, *, live: bool = True, limit: int = 100) -> list[RunInfo]:
        def runs() -> list[RunInfo]:
            if limit <= 0:
                return []
            if not live:
                # The index is in order of start: only the runs shown are read.
                newest = self._redis.zrevrange(self._key("runs"), 0, limit - 1)
                return self._infos([str(run_id) for run_id in newest])
            found = self._infos([str(run_id) for run_id in self._redis.smembers(self._key("live"))])
            found.sort(key=lambda info: info.started, reverse=True)
            return found[:limit]

        return self._call(runs)

    def ended_runs(self, *, limit: int = 100) -> list[RunInfo]:
        if limit <= 0:
            return []
        if not self._ended_indexed:
            keys = [self._key(name) for name in ("runs", "live", "ended", "ended:indexed")]
            args: list[str | int | float] = [
                self.prefix,
                self.retention,
                _INDEX_RUNS,
                _INDEX_BYTES,
            ]
            self._ended_indexed = bool(self._eval(_INDEX_ENDED, keys, args))

        def ended() -> list[RunInfo]:
            # The index is in order of end: only the runs shown are read.
            latest = self._redis.zrevrange(self._key("ended"), 0, limit - 1)
            return [info for info in self._infos([str(i) for i in latest]) if not info.live]

        return self._call(ended)

    def run_info(self, run_id: str) -> RunInfo | None:
        text = self._call(lambda: self._redis.hget(self._run_key(run_id), "info"))
        return RunInfo.from_dict(json.loads(str(text))) if text else None

    def live_count(self) -> int:
        return int(self._call(lambda: self._redis.scard(self._key("live"))))

    # --- kill flags ------------------------------------------------------------------------

    def kill(self, run_id: str | None, reason: str, *, key: str | None = None) -> list[str]:
        def live_runs() -> list[str]:
            # Every live run, however many: ``runs()`` reads only the newest.
            ids = [str(found) for found in self._redis.smembers(self._key("live"))]
            if key is None:
                return ids
            return [info.run_id for info in self._infos(ids) if key in info.keys]

        candidates = [run_id] if run_id is not None else self._call(live_runs)
        if not candidates:
            return []
        told = self._eval(_KILL, [self._key("live"), self._key("kills")], [reason, *candidates])
        return [str(told_id) for told_id in told]

    def killed(self, run_id: str) -> str | None:
        reason = self._call(lambda: self._redis.hget(self._key("kills"), run_id))
        return None if reason is None else str(reason)

    # --- decisions -------------------------------------------------------------------------

    def ask(self, run_id: str, question: str, choices: tuple[str, ...]) -> None:
        def ask() -> None:
            asked = _server_time(self._redis)
            pipe = self._redis.pipeline()
            pending = self._key("pending", run_id)
            pipe.delete(pending)
            pipe.hset(
                pending,
                mapping={
                    "question": question,
                    "choices": json.dumps(list(choices)),
                    "asked": asked,
                    "answer": "",
                    "amount": "",
                },
            )
            pipe.zadd(self._key("pendings"), {run_id: asked})
            pipe.execute()

        self._call(ask)

    def answer(self, run_id: str, choice: str, amount: int | None = None) -> Pending:
        keys = [self._key("pending", run_id), self._run_key(run_id), self._key("live")]
        args = [choice, "" if amount is None else amount, self.gone_after, run_id]
        result = self._eval(_ANSWER, keys, args)
        verdict = str(result[0])
        if verdict in ("unknown", "ended", "gone"):
            info = None if verdict == "unknown" else RunInfo.from_dict(json.loads(result[1]))
            if info is not None and verdict == "ended" and info.live:
                info = replace(info, outcome={})  # out of the live set: it ended
            now = float(result[2]) if verdict == "gone" else 0.0
            raise not_running(run_id, info, now, self.gone_after)
        if verdict == "none":
            raise LedgerError(f"run {run_id!r} is not waiting for an answer")
        if verdict == "taken":
            raise LedgerError(
                f"run {run_id!r} was already answered ({result[1]}); the first answer wins"
            )
        if verdict == "bad":
            raise LedgerError(f"{choice!r} is not a choice for run {run_id!r}: one of {result[1]}")
        _, question, choices, asked = result
        return Pending(
            run_id, str(question), tuple(json.loads(choices)), float(asked), choice, amount
        )

    def pending(self, run_id: str | None = None) -> list[Pending]:
        def pending() -> list[Pending]:
            if run_id is not None:
                ids = [run_id]
            else:
                ids = [str(found) for found in self._redis.zrange(self._key("pendings"), 0, -1)]
            if not ids:
                return []
            # One round trip: each question, with its run's record and whether it is live.
            pipe = self._redis.pipeline(transaction=False)
            pipe.time()
            for each in ids:
                pipe.hgetall(self._key("pending", each))
                pipe.hget(self._run_key(each), "info")
                pipe.sismember(self._key("live"), each)
            (seconds, micros), *replies = pipe.execute()
            now = float(seconds) + float(micros) / 1_000_000
            found = []
            for index, each in enumerate(ids):
                data, info, live = replies[3 * index : 3 * index + 3]
                if not data or not info or not live:
                    continue
                if not RunInfo.from_dict(json.loads(info)).running(now, self.gone_after):
                    continue
                found.append(
                    Pending(
                        each,
                        str(data["question"]),
                        tuple(json.loads(data["choices"])),
                        float(data["asked"]),
                        str(data["answer"]) or None,
                        int(data["amount"]) if data.get("amount") else None,
                    )
                )
            return found

        return self._call(pending)


def _server_time(client: redis.Redis) -> float:
    seconds, micros = client.time()
    return float(seconds) + float(micros) / 1_000_000
