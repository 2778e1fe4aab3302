"""The pricing interface the engine depends on; the genai-prices implementation lives in
``haltwise.pricing`` so that the engine imports no third-party package.

Money is ``Decimal`` USD. A price the pricer does not know is ``None`` ("unknown"), never zero.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Protocol

__all__ = ["Pricer"]


class Pricer(Protocol):
    """Turns a model's token counts into dollars."""

    def cost(
        self,
        model: str,
        *,
        input_tokens: int,
        output_tokens: int,
        cache_read_tokens: int = 0,
        cache_write_tokens: int = 0,
    ) -> Decimal | None:
        """The cost in USD of one model call, or ``None`` when the model has no known price.

        ``input_tokens`` counts every prompt token, cached ones included (the OpenAI
        convention: ``prompt_tokens`` includes ``prompt_tokens_details.cached_tokens``);
        ``cache_read_tokens`` says how many of them were read from the cache, and
        ``cache_write_tokens`` how many were written to it. ``output_tokens`` includes
        reasoning tokens.
        """
        ...

    def describe_missing(self, model: str) -> str:
        """How a user gives this model a price (the text of a configuration error)."""
        ...
