"""The Redis ledger: one budget for a fleet of machines (Redis 6+ or Valkey; redis-py).

Each check-and-spend is one Lua script, so it is atomic however many machines run it. Scripts
read the server's own clock (``TIME``), so leases mean the same on every machine. Amounts are
integers well under 2^53 (a Lua number holds them exactly: money is in nano-dollars). Keys
live under a prefix (``haltwise:`` by default), so one Redis can hold several fleets.

Needs ``haltwise[redis]``; imported only when a ``redis://`` URL is used.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

import redis

from ..engine.errors import ConfigurationError, LedgerError
from ..engine.ledger import (
    DEFAULT_LEASE,
    Budget,
    BudgetState,
    Grant,
    Ledger,
    Pending,
    RunInfo,
    new_id,
)

__all__ = ["RedisLedger"]

T = TypeVar("T")

#: How long the ids of settled grants and spends are remembered, in seconds.
_DONE_SECONDS = 7 * 86400

# Shared by the budget scripts: the server's clock, expired holds swept, what is used.
_PRELUDE = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local budget, holds, amounts = KEYS[1], KEYS[2], KEYS[3]
local function sweep()
  local expired = redis.call('ZRANGEBYSCORE', holds, '-inf', now)
  for _, grant in ipairs(expired) do
    local held = redis.call('HGET', amounts, grant)
    if held then
      redis.call('HINCRBY', budget, 'held', -tonumber(held))
      redis.call('HDEL', amounts, grant)
    end
  end
  if #expired > 0 then redis.call('ZREMRANGEBYSCORE', holds, '-inf', now) end
end
local function used()
  return tonumber(redis.call('HGET', budget, 'spent') or '0')
    + tonumber(redis.call('HGET', budget, 'held') or '0')
end
local function know(index, meta, limit)
  if redis.call('EXISTS', budget) == 0 then
    redis.call('HSET', budget, 'meta', meta, 'spent', 0, 'held', 0)
    redis.call('SADD', index, budget)
  end
  if limit ~= '' then redis.call('HSET', budget, 'lim', limit) end
end
local function int(x) return string.format('%d', x) end
sweep()
"""

# KEYS: budget, holds, amounts, index; ARGV: amount, limit, meta
_CHARGE = (
    _PRELUDE
    + """
know(KEYS[4], ARGV[3], ARGV[2])
local before = used()
local amount = tonumber(ARGV[1])
if before + amount > tonumber(ARGV[2]) then return {0, int(before)} end
redis.call('HINCRBY', budget, 'spent', ARGV[1])
return {int(amount), int(before)}
"""
)

# KEYS: budget, holds, amounts, index, holder set;
# ARGV: amount, limit, minimum ('' for all), grant id, lease, meta
_RESERVE = (
    _PRELUDE
    + """
know(KEYS[4], ARGV[6], ARGV[2])
local before = used()
local amount = tonumber(ARGV[1])
local granted = math.min(amount, tonumber(ARGV[2]) - before)
local need = amount
if ARGV[3] ~= '' then need = math.max(tonumber(ARGV[3]), 1) end
if granted < need then return {0, int(before)} end
redis.call('HINCRBY', budget, 'held', int(granted))
redis.call('HSET', amounts, ARGV[4], int(granted))
redis.call('ZADD', holds, now + tonumber(ARGV[5]), ARGV[4])
redis.call('SADD', KEYS[5], budget .. '\\n' .. ARGV[4])
return {int(granted), int(before)}
"""
)

# KEYS: budget, holds, amounts, index, done; ARGV: op id, amount ('' to release), meta
_SETTLE = (
    _PRELUDE
    + """
know(KEYS[4], ARGV[3], '')
local held = redis.call('HGET', amounts, ARGV[1])
if held then
  redis.call('HINCRBY', budget, 'held', -tonumber(held))
  redis.call('HDEL', amounts, ARGV[1])
  redis.call('ZREM', holds, ARGV[1])
end
local fresh = redis.call('SET', KEYS[5], '1', 'NX', 'EX', ARGV[4])
if fresh and ARGV[2] ~= '' then redis.call('HINCRBY', budget, 'spent', ARGV[2]) end
return int(used())
"""
)

# KEYS: budget, holds, amounts; returns meta, spent, held, limit
_STATE = (
    _PRELUDE
    + """
return {redis.call('HGET', budget, 'meta') or '', int(tonumber(redis.call('HGET', budget, 'spent')
  or '0')), int(tonumber(redis.call('HGET', budget, 'held') or '0')),
  redis.call('HGET', budget, 'lim') or ''}
"""
)

# KEYS: run hash, holder set, kills; ARGV: counts json, status, lease, prefix
_HEARTBEAT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local info = redis.call('HGET', KEYS[1], 'info')
if info then
  local data = cjson.decode(info)
  data['counts'] = cjson.decode(ARGV[1])
  data['status'] = ARGV[2]
  data['heartbeat'] = now
  redis.call('HSET', KEYS[1], 'info', cjson.encode(data))
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

# KEYS: pending hash; ARGV: choice, amount ('' for none)
_ANSWER = """
if redis.call('EXISTS', KEYS[1]) == 0 then return {'none'} end
local answered = redis.call('HGET', KEYS[1], 'answer')
if answered and answered ~= '' then return {'taken', answered} end
local choices = cjson.decode(redis.call('HGET', KEYS[1], 'choices'))
for _, choice in ipairs(choices) do
  if choice == ARGV[1] then
    redis.call('HSET', KEYS[1], 'answer', ARGV[1], 'amount', ARGV[2])
    return {'ok'}
  end
end
return {'bad', table.concat(choices, ', ')}
"""


class RedisLedger(Ledger):
    """A ledger in Redis, shared by every machine that reaches it."""

    def __init__(self, url: str, *, prefix: str = "haltwise:", timeout: float = 5.0) -> None:
        self.url = url
        self.prefix = prefix
        try:
            self._redis = redis.Redis.from_url(
                url,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                decode_responses=True,
            )
        except ValueError as error:
            raise ConfigurationError(f"bad Redis ledger URL {self}: {error}") from None
        self._charge = self._redis.register_script(_CHARGE)
        self._reserve = self._redis.register_script(_RESERVE)
        self._settle = self._redis.register_script(_SETTLE)
        self._state = self._redis.register_script(_STATE)
        self._heartbeat = self._redis.register_script(_HEARTBEAT)
        self._answer = self._redis.register_script(_ANSWER)

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
        self._redis.close()

    def _call(self, action: Callable[[], T]) -> T:
        try:
            return action()
        except redis.RedisError as error:
            raise LedgerError(f"the Redis ledger {self!r} failed: {error}") from None

    def _key(self, *parts: str) -> str:
        return self.prefix + ":".join(parts)

    def _budget_keys(self, budget: Budget) -> list[str]:
        base = self._key("budget", budget.id)
        return [base, base + ":holds", base + ":amounts", self._key("budgets")]

    @staticmethod
    def _meta(budget: Budget) -> str:
        return json.dumps([budget.key, budget.metric, budget.window, budget.resets_at])

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
        keys = self._budget_keys(budget)
        granted, used = self._call(
            lambda: self._charge(keys=keys, args=[amount, limit, self._meta(budget)])
        )
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
        keys = [*self._budget_keys(budget), self._key("holder", holder)]
        floor = "" if minimum is None else minimum
        granted, used = self._call(
            lambda: self._reserve(
                keys=keys, args=[amount, limit, floor, grant_id, lease, self._meta(budget)]
            )
        )
        return Grant(grant_id if int(granted) else "", int(granted), int(used))

    def _settled(self, budget: Budget, op_id: str, amount: int | None) -> int:
        keys = [*self._budget_keys(budget), self._key("done", op_id)]
        args = [op_id, "" if amount is None else amount, self._meta(budget), _DONE_SECONDS]
        return int(self._call(lambda: self._settle(keys=keys, args=args)))

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
            keys: list[str] = [name, name + ":holds", name + ":amounts"]
            meta, spent, held, limit = self._call(partial(self._state, keys=keys))
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
            pipe = self._redis.pipeline()
            pipe.hset(self._run_key(info.run_id), "info", json.dumps(record.to_dict()))
            pipe.zadd(self._key("runs"), {info.run_id: record.started})
            pipe.sadd(self._key("live"), info.run_id)
            pipe.execute()

        self._call(register)

    def heartbeat(
        self, run_id: str, counts: dict[str, Any], status: str, lease: float = DEFAULT_LEASE
    ) -> str | None:
        keys = [self._run_key(run_id), self._key("holder", run_id), self._key("kills")]
        reason = self._call(
            lambda: self._heartbeat(
                keys=keys, args=[json.dumps(counts), status, lease, self.prefix]
            )
        )
        return None if reason is None else str(reason)

    def finish(self, run_id: str, outcome: dict[str, Any]) -> None:
        def finish() -> None:
            now = _server_time(self._redis)
            text = self._redis.hget(self._run_key(run_id), "info")
            data = json.loads(str(text)) if text else RunInfo(run_id, started=now).to_dict()
            data.update(outcome=outcome, status=str(outcome.get("status", "ended")), heartbeat=now)
            pipe = self._redis.pipeline()
            pipe.hset(self._run_key(run_id), "info", json.dumps(data))
            pipe.zadd(self._key("runs"), {run_id: float(data["started"])})
            pipe.srem(self._key("live"), run_id)
            pipe.delete(self._key("pending", run_id))
            pipe.zrem(self._key("pendings"), run_id)
            pipe.execute()

        self._call(finish)

    def runs(self, *, live: bool = True, limit: int = 100) -> list[RunInfo]:
        def runs() -> list[RunInfo]:
            if live:
                ids = [str(run_id) for run_id in self._redis.smembers(self._key("live"))]
            else:
                ids = [str(run_id) for run_id in self._redis.zrevrange(self._key("runs"), 0, -1)]
            pipe = self._redis.pipeline()
            for run_id in ids:
                pipe.hget(self._run_key(run_id), "info")
            found = [RunInfo.from_dict(json.loads(text)) for text in pipe.execute() if text]
            found.sort(key=lambda info: info.started, reverse=True)
            return found[:limit]

        return self._call(runs)

    # --- kill flags ------------------------------------------------------------------------

    def kill(self, run_id: str | None, reason: str, *, key: str | None = None) -> list[str]:
        if run_id is not None:
            told = [run_id]
        else:
            told = [info.run_id for info in self.runs() if key is None or key in info.keys]
        if told:
            self._call(
                lambda: self._redis.hset(self._key("kills"), mapping=dict.fromkeys(told, reason))
            )
        return told

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
        keys = [self._key("pending", run_id)]
        result = self._call(
            lambda: self._answer(keys=keys, args=[choice, "" if amount is None else amount])
        )
        verdict = str(result[0])
        if verdict == "none":
            raise LedgerError(f"run {run_id!r} is not waiting for an answer")
        if verdict == "taken":
            raise LedgerError(
                f"run {run_id!r} was already answered ({result[1]}); the first answer wins"
            )
        if verdict == "bad":
            raise LedgerError(f"{choice!r} is not a choice for run {run_id!r}: one of {result[1]}")
        return self.pending(run_id)[0]

    def pending(self, run_id: str | None = None) -> list[Pending]:
        def pending() -> list[Pending]:
            if run_id is not None:
                ids = [run_id]
            else:
                ids = [str(found) for found in self._redis.zrange(self._key("pendings"), 0, -1)]
            found = []
            for each in ids:
                data = self._redis.hgetall(self._key("pending", each))
                if not data:
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
