"""``--limits EXPR``: a limit expression written as Python, parsed safely.

``"max_turns(30) | stuck()"``, ``"max_cost('2.00') & timeout(minutes=30)"``,
``"stuck(repeat=4, no_progress=None)"``. The expression is parsed with ``ast`` and evaluated by
walking the tree: only calls of the limit factories below, ``|`` and ``&``, and literals
(numbers, strings, ``True``/``False``/``None``, ``unlimited``, and lists, tuples and sets of
them) are allowed. Nothing is ever passed to ``eval``.

``scaled(expr, factor)`` rewrites the thresholds of an expression (for the trade-off curve of
``--html``): every count, amount and duration is multiplied by ``factor``, and ``stuck()``
first spells out the thresholds it runs with (its profile's, then the call's own, as ``stuck()``
resolves them, else the defaults) so that they are scaled too.
"""

from __future__ import annotations

import ast
import math
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any

from ..engine import detectors
from ..engine import limits as _limits
from ..engine.errors import InvalidValueError
from ..engine.limits import Limit

__all__ = ["FACTORIES", "parse_limits", "scaled"]

#: The names an expression may call.
FACTORIES: dict[str, Callable[..., Limit]] = {
    "max_turns": _limits.max_turns,
    "max_model_calls": _limits.max_model_calls,
    "max_tool_calls": _limits.max_tool_calls,
    "max_tokens": _limits.max_tokens,
    "max_cost": _limits.max_cost,
    "timeout": _limits.timeout,
    "any_of": _limits.any_of,
    "all_of": _limits.all_of,
    "stuck": detectors.stuck,
    "repeats": detectors.repeats,
    "same_errors": detectors.same_errors,
    "cycles": detectors.cycles,
    "scattered": detectors.scattered,
    "no_progress": detectors.no_progress,
    "monologue": detectors.monologue,
    "degenerate_text": detectors.degenerate_text,
}
_NAMES: dict[str, Any] = {"unlimited": _limits.UNLIMITED}
_FORMS = (
    'an expression such as "max_turns(30) | stuck()": calls of '
    + ", ".join(sorted(FACTORIES))
    + " joined by | and &, with literal arguments"
)

#: Keyword arguments that are thresholds (scaled by ``scaled``); the first positional one is too.
_THRESHOLDS = frozenset(
    {
        "n",
        "k",
        "repetitions",
        "seconds",
        "minutes",
        "hours",
        "total",
        "input",
        "output",
        "usd",
        *detectors.DEFAULTS,
    }
)


def parse_limits(text: str, source: str = "--limits") -> Limit:
    """The limit ``text`` describes; ``InvalidValueError`` naming ``source`` if it is not one."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError as error:
        raise InvalidValueError(source, text, f"{_FORMS} ({error.msg})") from None
    try:
        value = _evaluate(tree.body)
    except _Refused as error:
        raise InvalidValueError(source, text, f"{_FORMS}; {error}") from None
    except (TypeError, ValueError) as error:
        if isinstance(error, InvalidValueError):
            raise
        raise InvalidValueError(source, text, f"{_FORMS}; {error}") from None
    if not isinstance(value, Limit):
        raise InvalidValueError(source, text, _FORMS)
    return value


class _Refused(Exception):
    pass


def _evaluate(node: ast.expr) -> Any:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr | ast.BitAnd):
        left, right = _evaluate(node.left), _evaluate(node.right)
        if not isinstance(left, Limit) or not isinstance(right, Limit):
            raise _Refused("| and & join limits")
        return left | right if isinstance(node.op, ast.BitOr) else left & right
    if isinstance(node, ast.Call):
        if not isinstance(node.func, ast.Name) or node.func.id not in FACTORIES:
            shown = ast.unparse(node.func)
            raise _Refused(f"{shown!r} is not a limit factory")
        if any(isinstance(arg, ast.Starred) for arg in node.args) or any(
            keyword.arg is None for keyword in node.keywords
        ):
            raise _Refused("* and ** are not allowed")
        args = [_evaluate(arg) for arg in node.args]
        kwargs = {str(keyword.arg): _evaluate(keyword.value) for keyword in node.keywords}
        return FACTORIES[node.func.id](*args, **kwargs)
    if isinstance(node, ast.Constant) and isinstance(
        node.value, int | float | str | bool | type(None)
    ):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        operand = _evaluate(node.operand)
        if isinstance(operand, bool) or not isinstance(operand, int | float):
            raise _Refused("a sign goes before a number")
        return -operand if isinstance(node.op, ast.USub) else operand
    if isinstance(node, ast.Name) and node.id in _NAMES:
        return _NAMES[node.id]
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        items = [_evaluate(item) for item in node.elts]
        if isinstance(node, ast.Set):
            return set(items)
        return tuple(items) if isinstance(node, ast.Tuple) else items
    raise _Refused(f"{ast.unparse(node)!r} is not allowed")


# --------------------------------------------------------------------------------------------
# Scaling thresholds


def scaled(text: str, factor: float) -> str:
    """``text`` with every threshold multiplied by ``factor`` (counts stay whole, at least
    ``stuck()``'s minimum for its thresholds, 2 for other detectors and 1 otherwise;
    ``unlimited`` and ``None`` stay as they are)."""
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return text  # parse_limits says what is wrong with it
    _Scaler(factor).visit(tree)
    return ast.unparse(tree)


class _Scaler(ast.NodeTransformer):
    def __init__(self, factor: float) -> None:
        self.factor = factor

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if not isinstance(node.func, ast.Name) or node.func.id not in FACTORIES:
            return node
        name = node.func.id
        if name in ("any_of", "all_of"):
            return node
        minimum = 2 if name in _DETECTORS else 1
        if name == "stuck":
            _spell_out_stuck(node)
        if node.args:
            node.args[0] = self._scale(node.args[0], minimum)
        for keyword in node.keywords:
            if keyword.arg in _THRESHOLDS:
                floor = minimum
                if name == "stuck" and keyword.arg in detectors.MINIMUMS:
                    floor = detectors.MINIMUMS[keyword.arg]
                keyword.value = self._scale(keyword.value, floor)
        return node

    def _scale(self, node: ast.expr, minimum: int) -> ast.expr:
        if not isinstance(node, ast.Constant) or isinstance(node.value, bool):
            return node
        value = node.value
        if isinstance(value, int):
            return ast.Constant(max(minimum, math.floor(value * self.factor + 0.5)))
        if isinstance(value, float):
            return ast.Constant(value * self.factor)
        if isinstance(value, str):
            try:
                amount = Decimal(value)
            except InvalidOperation:
                return node
            return ast.Constant(str((amount * Decimal(str(self.factor))).quantize(Decimal("0.01"))))
        return node


def _spell_out_stuck(node: ast.Call) -> None:
    """Give the ``stuck()`` call ``node`` every threshold it runs with, in place of its
    ``profile=``: the file's thresholds, overridden by the call's own as ``stuck()`` overrides
    them (a value other than the default wins), else the defaults. ``profile=`` goes, for
    ``stuck()`` would put the file's threshold back wherever a scaled one equals the default. A
    profile that is not a literal path, or cannot be loaded, leaves the call as written, for
    ``parse_limits`` to name what is wrong with it."""
    given = {keyword.arg: keyword.value for keyword in node.keywords}
    fitted: dict[str, int | None] = {}
    if "profile" in given:
        path = given["profile"]
        if not isinstance(path, ast.Constant) or not isinstance(path.value, str | None):
            return
        if path.value is not None:
            try:
                fitted = detectors.load_profile(path.value)
            except InvalidValueError:
                return
    keywords = []
    for name, default in detectors.DEFAULTS.items():
        value = given.get(name, ast.Constant(default))
        # As in ``stuck()``: a threshold the call leaves at its default is the profile's.
        if isinstance(value, ast.Constant) and value.value == default and name in fitted:
            value = ast.Constant(fitted[name])
        if not (isinstance(value, ast.Constant) and value.value is None and default is None):
            keywords.append(ast.keyword(name, value))
    node.keywords = keywords + [
        keyword
        for keyword in node.keywords
        if keyword.arg not in detectors.DEFAULTS and keyword.arg != "profile"
    ]


_DETECTORS = frozenset(
    {
        "stuck",
        "repeats",
        "same_errors",
        "cycles",
        "scattered",
        "no_progress",
        "monologue",
        "degenerate_text",
    }
)
