"""Trajectories to replay: a chat history, its tools, and the provider's usage if known."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from compactor.messages import Message, validate

BASH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a bash command and return its output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string"}},
            "required": ["command"],
        },
    },
}


@dataclass(frozen=True)
class Trajectory:
    """One agent session: model call k sees the messages before its k-th assistant message."""

    name: str
    messages: list[Message]
    usage: list[dict[str, Any]] | None = None
    """The provider's usage of each model call, in call order, where known."""
    tools: list[dict[str, Any]] = field(default_factory=list)

    def cuts(self) -> list[int]:
        """For each model call, how many messages it saw."""
        return [i for i, m in enumerate(self.messages) if m["role"] == "assistant"]


def load_traces(folder: Path, usage: Path | None = None) -> list[Trajectory]:
    """Every ``*.jsonl`` trajectory of a folder (one message per line), oldest name first.

    Args:
        folder: the trajectories.
        usage: a folder of ``<same name>.json`` lists of per-call usage, where present.

    Raises:
        FileNotFoundError: ``folder`` has no trajectory.
        InvalidMessagesError: a trajectory is not a valid chat.
    """
    paths = sorted(folder.glob("*.jsonl"))
    if not paths:
        raise FileNotFoundError(f"no *.jsonl trajectories in {folder}")
    return [_load(path, usage) for path in paths]


def _load(path: Path, usage: Path | None) -> Trajectory:
    with path.open(encoding="utf-8") as file:
        messages = [json.loads(line) for line in file if line.strip()]
    validate(messages)
    calls = None
    if usage is not None and (usage / f"{path.stem}.json").exists():
        calls = json.loads((usage / f"{path.stem}.json").read_text(encoding="utf-8"))
    return Trajectory(path.stem, messages, calls, tools=called_tools(messages))


def called_tools(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Minimal schemas of the functions a trajectory calls.

    Trajectories do not carry their tool schemas; every policy is charged the same stand-in,
    named after what the agent really called (bash for the SWE runs, airline tools for tau).
    """
    names = dict.fromkeys(
        c["function"]["name"] for m in messages for c in m.get("tool_calls") or ()
    )
    return [
        {"type": "function", "function": {"name": name, "parameters": {"type": "object"}}}
        for name in names
    ]
