"""LiteLLMSummarizer: summaries and replans written by any model litellm can call.

litellm is imported on first use, never at ``import compactor``: it costs seconds of CPU.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from compactor.adapters.calls import field, usage_of
from compactor.summarizer import SummaryReply, SummaryRequest
from compactor.tokens import cost_usd


class LiteLLMSummarizer:
    """The default summarizer: ``litellm.completion`` / ``litellm.acompletion``.

    Args:
        completion: the sync completion function (default ``litellm.completion``).
        acompletion: the async one (default ``litellm.acompletion``).
        **options: passed to every call (``api_key``, ``api_base``, ``temperature``, ...).
    """

    def __init__(
        self,
        *,
        completion: Callable[..., Any] | None = None,
        acompletion: Callable[..., Any] | None = None,
        **options: Any,
    ) -> None:
        self._completion = completion
        self._acompletion = acompletion
        self.options = options

    def summarize(self, request: SummaryRequest) -> SummaryReply:
        """Call the model and read its answer."""
        completion = self._completion or _litellm().completion
        return _reply(request, completion(**self._kwargs(request)))

    async def asummarize(self, request: SummaryRequest) -> SummaryReply:
        """Await the model and read its answer."""
        acompletion = self._acompletion or _litellm().acompletion
        return _reply(request, await acompletion(**self._kwargs(request)))

    def _kwargs(self, request: SummaryRequest) -> dict[str, Any]:
        return {
            "model": request.model,
            "messages": request.messages,
            "max_tokens": request.max_tokens,
            "timeout": request.timeout,
            **self.options,
        }


def _reply(request: SummaryRequest, response: object) -> SummaryReply:
    choices = field(response, "choices") or ()
    text = field(field(choices[0], "message"), "content") if choices else None
    usage = usage_of(response)
    input_tokens = usage.input_tokens if usage else None
    output_tokens = usage.output_tokens if usage else None
    return SummaryReply(
        text=text if isinstance(text, str) else "",
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost_usd=cost_usd(request.model, input_tokens or 0, output_tokens or 0),
    )


def _litellm() -> Any:
    import litellm

    return litellm
