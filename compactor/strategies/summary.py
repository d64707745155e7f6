"""The summary and replan tiers: where the summary goes, and the requests that write it.

Both are generators that yield a ``SummaryRequest`` and take a ``SummaryReply``: they decide
what to ask, never how it is called. The summariser's input is bounded: tool results reach it
as placeholders, and a history longer than the summary model's window is summarised in
chunks, each one folded into the summary of the chunks before it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from pathlib import Path

from compactor.messages import Message, text_of
from compactor.prompts import render
from compactor.summarizer import SummaryReply, SummaryRequest

Count = Callable[[str], int]
_CLIPPED = "\n[... {cut:,} chars cut from the summariser's copy ...]\n"


@dataclass(frozen=True)
class Target:
    """The model that writes summaries, and how much one request to it may hold."""

    model: str
    budget: int
    """Input tokens one request may use: the model's window less its output and a margin."""
    max_tokens: int
    timeout: float
    count: Count
    templates: Path | None = None


@dataclass(frozen=True)
class Written:
    """A summary or plan, and the replies it took."""

    text: str
    replies: tuple[SummaryReply, ...]

    def usage(self) -> dict[str, float]:
        """The summariser's own tokens and cost, for the event."""
        return {
            "calls": len(self.replies),
            "input_tokens": sum(r.input_tokens or 0 for r in self.replies),
            "output_tokens": sum(r.output_tokens or 0 for r in self.replies),
            "cost_usd": sum(r.cost_usd or 0.0 for r in self.replies),
        }


def head_end(messages: Sequence[Message]) -> int:
    """End of the part that is never summarised: the system message(s) and the task."""
    index = 0
    while index < len(messages) and messages[index]["role"] in ("system", "developer"):
        index += 1
    if index < len(messages) and messages[index]["role"] == "user":
        index += 1
    return index


def turn_start(messages: Sequence[Message], start: int) -> int:
    """Start of the most recent turn: its last user or assistant message.

    Tool messages belong to the assistant message that called them, so a boundary placed
    here never splits a tool-call group.
    """
    for index in range(len(messages) - 1, start - 1, -1):
        if messages[index]["role"] in ("user", "assistant"):
            return index
    return start


def entries(messages: Sequence[Message], templates: Path | None) -> list[str]:
    """The summariser's transcript, one entry per message."""
    return [_entry(message, templates) for message in messages]


def _entry(message: Message, templates: Path | None) -> str:
    calls = [
        {
            "id": call["id"],
            "name": call["function"]["name"],
            "arguments": call["function"].get("arguments", ""),
        }
        for call in message.get("tool_calls") or ()
    ]
    return render(
        "entry.j2",
        templates,
        role=message["role"],
        text=text_of(message.get("content")),
        calls=calls,
        tool_call_id=message.get("tool_call_id"),
    )


def write_summary(
    target: Target, task: str, transcript: Sequence[str], previous: str, words: int
) -> Generator[SummaryRequest, SummaryReply, Written]:
    """Summarise a transcript, in as many chunks as the summary model's window needs.

    Args:
        target: the summary model and its budget.
        task: the agent's original task.
        transcript: the entries to summarise, oldest first.
        previous: an earlier summary the new one must include ("" if none).
        words: how long the summary may be.
    """
    task = clip(task, target.budget // 4, target.count)
    fixed = _summary_prompt(target, task, "", "x" * (target.max_tokens * 4), 1, 2, words)
    room = target.budget - target.count(fixed)
    chunks = split([clip(e, room, target.count) for e in transcript], room, target.count)
    summary, replies = previous, []
    for part, chunk in enumerate(chunks, 1):
        prompt = _summary_prompt(target, task, "\n".join(chunk), summary, part, len(chunks), words)
        reply = yield _request(target, "summary", prompt)
        replies.append(reply)
        summary = reply.text.strip()
        if not summary:
            break
    return Written(summary, tuple(replies))


def write_plan(
    target: Target, task: str, transcript: Sequence[str], summary: str, words: int
) -> Generator[SummaryRequest, SummaryReply, Written]:
    """Ask for a short plan of what is left, from the summary and the newest history."""
    task = clip(task, target.budget // 4, target.count)
    summary = clip(summary, target.budget // 4, target.count)
    fixed = render(
        "replan_request.j2",
        target.templates,
        task=task,
        summary=summary,
        transcript="",
        words=words,
    )
    room = target.budget - target.count(fixed)
    recent = _newest_that_fit([clip(e, room, target.count) for e in transcript], room, target.count)
    prompt = render(
        "replan_request.j2",
        target.templates,
        task=task,
        summary=summary,
        transcript="\n".join(recent),
        words=words,
    )
    reply = yield _request(target, "replan", prompt)
    return Written(reply.text.strip(), (reply,))


def _summary_prompt(
    target: Target, task: str, transcript: str, previous: str, part: int, parts: int, words: int
) -> str:
    return render(
        "summary.j2",
        target.templates,
        task=task,
        transcript=transcript,
        previous=previous,
        part=part,
        parts=parts,
        words=words,
    )


def _request(target: Target, kind: str, prompt: str) -> SummaryRequest:
    return SummaryRequest(
        kind="summary" if kind == "summary" else "replan",
        model=target.model,
        messages=[{"role": "user", "content": prompt}],
        max_tokens=target.max_tokens,
        timeout=target.timeout,
    )


def split(texts: Sequence[str], budget: int, count: Count) -> list[list[str]]:
    """Consecutive groups of texts, each within ``budget`` tokens (a text alone may not be)."""
    chunks: list[list[str]] = []
    current: list[str] = []
    used = 0
    for text in texts:
        size = count(text) + 1
        if current and used + size > budget:
            chunks.append(current)
            current, used = [], 0
        current.append(text)
        used += size
    return [*chunks, current] if current else chunks


def clip(text: str, budget: int, count: Count) -> str:
    """``text`` cut in the middle to at most ``budget`` tokens (the summariser's copy only)."""
    budget = max(budget, 1)
    size = count(text)
    while size > budget:
        keep = max(len(text) * budget // size * 9 // 10 - len(_CLIPPED), 0)
        text = (
            text[: keep // 2]
            + _CLIPPED.format(cut=len(text) - keep)
            + text[len(text) - keep // 2 :]
        )
        if keep == 0:
            return text
        size = count(text)
    return text


def _newest_that_fit(texts: Sequence[str], budget: int, count: Count) -> list[str]:
    kept: list[str] = []
    used = 0
    for text in reversed(texts):
        used += count(text) + 1
        if used > budget:
            break
        kept.append(text)
    return kept[::-1]
