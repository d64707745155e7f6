"""The ``compactor`` command."""

from __future__ import annotations

import argparse
import json
import sys
import sysconfig
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from compactor.compactor import Compactor, default_home
from compactor.config import CompactorConfig
from compactor.events import CompactionEvent, ModelCallEvent, describe, dump_event
from compactor.messages import Message
from compactor.stores import JsonlSessionStore, SessionKey
from compactor.testing import FakeCompletion, ScriptedSummarizer
from compactor.tool import TOOL_NAME

_DEMO_MODULES = (
    "textwrap.py",
    "shlex.py",
    "json/decoder.py",
    "string.py",
    "bisect.py",
    "heapq.py",
    "fnmatch.py",
    "glob.py",
    "calendar.py",
    "getopt.py",
)
_READ_FILE = {
    "type": "function",
    "function": {
        "name": "read_file",
        "description": "Read a file of the Python standard library.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}},
            "required": ["path"],
        },
    },
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``compactor`` command."""
    parser = argparse.ArgumentParser(prog="compactor", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="an offline scripted agent whose context fills up")
    demo.add_argument("--window", type=int, default=16_000, help="context window in tokens")
    demo.add_argument("--home", type=Path, help="store folder (default: a temporary one)")
    _bench_parser(commands)
    _session_parsers(commands)
    args = parser.parse_args(argv)
    if args.command == "demo":
        return _demo(args.window, args.home)
    if args.command == "bench":
        return _bench(args)
    if args.command == "sessions":
        return _sessions(args)
    return _events(args)


def _session_parsers(commands: Any) -> None:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--home", type=Path, help="store folder (default $COMPACTOR_HOME or .compactor)"
    )
    common.add_argument("--tenant", default="default", help="the tenant to act for")
    commands.add_parser("sessions", parents=[common], help="list the sessions of a tenant")
    events = commands.add_parser("events", parents=[common], help="print a session's events")
    events.add_argument("session", help="the session id")
    events.add_argument("--json", action="store_true", help="one JSON object per line")


def _store(args: argparse.Namespace) -> JsonlSessionStore:
    home = args.home or default_home()
    return JsonlSessionStore(home / "sessions", fsync="never")


def _sessions(args: argparse.Namespace) -> int:
    for session_id in _store(args).sessions(args.tenant):
        print(session_id)
    return 0


def _events(args: argparse.Namespace) -> int:
    entries = _store(args).entries(SessionKey(args.session, args.tenant))
    if args.json:
        for entry in entries:
            print(
                json.dumps(
                    {
                        "seq": entry.seq,
                        "entry_id": entry.entry_id,
                        "branch_id": entry.branch_id,
                        **dump_event(entry.event),
                    }
                )
            )
        return 0
    print(f"{'seq':>5}  {'time (UTC)':19}  {'run':12}  {'kind':14}  details")
    for entry in entries:
        event = entry.event
        print(
            f"{entry.seq:>5}  {event.at:%Y-%m-%d %H:%M:%S}  {(event.run_id or '-')[:12]:12}  "
            f"{event.kind:14}  {describe(event)}"
        )
    return 0


def _bench_parser(commands: Any) -> None:
    bench = commands.add_parser(
        "bench",
        help="token-savings benchmark: policies side by side, offline",
        description="Replay agent sessions through context policies side by side (no compaction, "
        "compactor, observation masking, LangChain, pydantic-ai-harness) and compare input "
        "tokens, calls over the window, prompt-cache reuse, cost and information kept. "
        "Needs no API key and no network.",
    )
    bench.add_argument(
        "--traces",
        type=Path,
        metavar="DIR",
        help="replay OpenAI-format JSONL trajectories from DIR (one file each) "
        "instead of the built-in stdlib workload",
    )
    bench.add_argument(
        "--usage",
        type=Path,
        metavar="DIR",
        help="per-call provider usage (<trajectory name>.json) to scale counts by",
    )
    bench.add_argument(
        "--window",
        type=int,
        metavar="N",
        help="context window in tokens (default: the model's input limit)",
    )
    bench.add_argument(
        "--model",
        default="deepseek/deepseek-chat",
        metavar="NAME",
        help="litellm model name: its tokenizer, window and prices (default "
        "deepseek/deepseek-chat, the model of the shared SWE-bench traces)",
    )
    bench.add_argument(
        "--policies",
        nargs="+",
        metavar="NAME",
        default=(),
        help="run only these policies (none, compactor, masking, "
        "langchain-default, langchain-scaled, harness-clear, harness-tiered)",
    )
    bench.add_argument(
        "--out",
        type=Path,
        default=Path("benchmarks/results"),
        metavar="DIR",
        help="where the JSON of every figure and the PNG chart go (default benchmarks/results)",
    )
    bench.add_argument(
        "--sessions",
        type=int,
        default=10,
        metavar="N",
        help="sessions of the built-in workload (default 10)",
    )
    bench.add_argument(
        "--max-calls", type=int, metavar="N", help="replay at most N model calls of each session"
    )


def _bench(args: argparse.Namespace) -> int:
    from compactor.bench import BenchOptions, bench

    options = BenchOptions(
        traces=args.traces,
        usage=args.usage,
        window=args.window,
        model=args.model,
        policies=tuple(args.policies),
        out=args.out,
        sessions=args.sessions,
        max_calls=args.max_calls,
    )
    try:
        bench(options)
    except (ValueError, FileNotFoundError) as exc:  # a bad option: say it, no traceback
        print(f"compactor bench: {exc}", file=sys.stderr)
        return 2
    return 0


def _demo(window: int, home: Path | None) -> int:
    """A scripted agent reads standard-library modules until its context fills up."""
    with tempfile.TemporaryDirectory() as scratch:
        compactor = Compactor(
            "gpt-4o",
            config=CompactorConfig(context_window=window),
            home=home or Path(scratch),
            summarizer=ScriptedSummarizer(),
        )
        fake = FakeCompletion("gpt-4o", scale=1.05)
        for number, module in enumerate(_DEMO_MODULES):
            fake.enqueue(None, tool_calls=[(f"call_{number}", "read_file", {"path": module})])
        fake.enqueue(
            None,
            tool_calls=[
                ("call_read", TOOL_NAME, {"tool_call_id": "call_0", "offset": 0, "limit": 400})
            ],
        )
        fake.enqueue("Done: textwrap wraps with TextWrapper.")
        messages = _run_agent(compactor, fake)
        _report(compactor, messages, window)
    return 0


def _run_agent(compactor: Compactor, fake: FakeCompletion) -> list[Message]:
    completion = compactor.wrap(fake)
    messages: list[Message] = [
        {"role": "system", "content": "You are a coding agent. Use read_file to read modules."},
        {"role": "user", "content": "Read the text-processing modules and explain textwrap."},
    ]
    print(f"{'call':>4}  {'estimate':>8}  {'sent':>6}  {'usage':>6}  tier")
    while True:
        response = completion(messages=messages, tools=[_READ_FILE], session_id="demo")
        message = response["choices"][0]["message"]
        messages.append(message)
        _print_call(compactor, len(fake.requests))
        if not message.get("tool_calls"):
            return messages
        messages.extend(_execute(compactor, call) for call in message["tool_calls"])


def _execute(compactor: Compactor, call: dict[str, Any]) -> Message:
    if call["function"]["name"] == TOOL_NAME:
        return compactor.handle_tool_call("demo", call)
    path = json.loads(call["function"]["arguments"])["path"]
    source = Path(sysconfig.get_paths()["stdlib"], path).read_text(encoding="utf-8")
    return {"role": "tool", "tool_call_id": call["id"], "content": source}


def _print_call(compactor: Compactor, number: int) -> None:
    events = compactor.events("demo")
    call = next(e for e in reversed(events) if isinstance(e, ModelCallEvent))
    since = events[events.index(call) - 1 :: -1]
    tiers = []
    for event in since:
        if isinstance(event, ModelCallEvent):
            break
        if isinstance(event, CompactionEvent):
            tiers.append(f"{event.tier} ({len(event.archived)} archived)")
    sent = call.estimated_input_tokens or 0
    window = compactor.window
    print(
        f"{number:>4}  {sent:>8,}  {call.reported_input_tokens or 0:>6,}  "
        f"{sent / window:>6.0%}  {', '.join(reversed(tiers)) or '-'}"
    )


def _report(compactor: Compactor, messages: list[Message], window: int) -> None:
    read = next(m for m in messages if m.get("tool_call_id") == "call_read")
    print(f"\nThe agent paged an archived result back (window {window:,} tokens):")
    print("  " + read["content"].replace("\n", "\n  ")[:600])
    archived = [e for e in compactor.events("demo") if isinstance(e, CompactionEvent)]
    print(f"\n{len(archived)} compaction events; every tool result is still readable.")


if __name__ == "__main__":
    sys.exit(main())
