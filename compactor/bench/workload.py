"""The built-in workload: scripted coding-agent sessions over the running Python's stdlib.

Each session is a deterministic function of its seed. A scripted agent explores a part of the
standard library with one ``bash`` tool: it lists folders, greps, reads whole modules (often
5K-40K tokens each, unlike the capped outputs of the shared traces), asks the interpreter for
a module's names, and thinks aloud between calls. The tool outputs are real file contents,
read when the workload is built; nothing is executed and nothing leaves the machine.
"""

from __future__ import annotations

import ast
import json
import random
import re
import sysconfig
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from compactor.bench.trajectory import BASH_TOOL, Trajectory
from compactor.messages import Message

SEED = 20251130
_SKIP = {"test", "tests", "idlelib", "lib2to3", "site-packages", "turtledemo", "__phello__"}
_AREAS = (
    "asyncio",
    "email",
    "json",
    "http",
    "logging",
    "concurrent",
    "xml",
    "importlib",
    "unittest",
    "multiprocessing",
    "urllib",
    "collections",
    "sqlite3",
    "ctypes",
    ".",
)
_PATTERNS = (
    "def __init__",
    "class .*Error",
    "import ",
    "raise ",
    "return None",
    "async def",
    "@property",
    "self._lock",
    "warnings.warn",
    "isinstance",
)
_OPENERS = (
    "Let me look at",
    "Next I will check",
    "To understand this I need",
    "Now I want",
    "The previous output suggests looking at",
    "I should confirm how",
)
_REASONS = (
    "the way {name} handles errors, because the failure we are chasing surfaces there",
    "whether {name} keeps state between calls, since that would explain the flaky behaviour",
    "how {name} is wired into the rest of the package, to find the right place for a fix",
    "the public names {name} exports, so the change does not break its API",
    "where {name} reads its configuration, as the bug report mentions a wrong default",
)


@dataclass(frozen=True)
class _Shape:
    calls: int
    thought_words: tuple[int, int]


# Short, medium and long sessions: the long ones think aloud enough that, after every tool
# result is archived, only a summary brings them back under the line at a 128K window.
_SHAPES = (
    _Shape(24, (30, 90)),
    _Shape(48, (40, 120)),
    _Shape(90, (60, 160)),
    _Shape(260, (260, 420)),
)


def stdlib_root() -> Path:
    """The running interpreter's standard library."""
    return Path(sysconfig.get_paths()["stdlib"])


def builtin_workload(sessions: int = 10, seed: int = SEED) -> list[Trajectory]:
    """The built-in sessions, the same for the same seed and interpreter."""
    root = stdlib_root()
    files = _modules(root)
    return [
        _session(number, random.Random(seed + number), root, files) for number in range(sessions)
    ]


def _modules(root: Path) -> list[Path]:
    found = [p for p in root.rglob("*.py") if not _SKIP & set(p.relative_to(root).parts)]
    return sorted(found)


def _session(number: int, rng: random.Random, root: Path, files: list[Path]) -> Trajectory:
    area = _AREAS[number % len(_AREAS)]
    shape = _SHAPES[[0, 1, 2, 0, 1, 3, 2, 0, 1, 3][number % 10]]
    folder = root / area
    local = [f for f in files if f.parent == folder] or files
    task = (
        f"There is a bug report about the `{area if area != '.' else 'stdlib'}` modules: "
        "an edge case raises the wrong exception. Explore the code, find where it comes "
        "from and explain the fix."
    )
    messages: list[Message] = [
        {
            "role": "system",
            "content": "You are a careful coding agent. Use the bash tool to "
            "explore the repository, then answer.",
        },
        {"role": "user", "content": task},
    ]
    for call in range(shape.calls):
        messages += _turn(rng, root, folder, local, files, call, shape)
    messages.append({"role": "assistant", "content": _thought(rng, "the fix", (60, 120))})
    return Trajectory(
        f"stdlib-{number:02d}-{area.strip('.') or 'top'}", messages, tools=[BASH_TOOL]
    )


def _turn(
    rng: random.Random,
    root: Path,
    folder: Path,
    local: list[Path],
    files: list[Path],
    call: int,
    shape: _Shape,
) -> list[Message]:
    width = 1 if rng.random() < 0.8 else rng.randint(2, 3)
    commands = [_command(rng, root, folder, local, files, call) for _ in range(width)]
    ids = [f"call_{call}_{slot}" for slot in range(width)]
    name = commands[0][0].split()[-1].rsplit("/", 1)[-1]
    assistant: Message = {
        "role": "assistant",
        "content": _thought(rng, name, shape.thought_words),
        "tool_calls": [
            {
                "id": i,
                "type": "function",
                "function": {"name": "bash", "arguments": json.dumps({"command": c})},
            }
            for i, (c, _) in zip(ids, commands, strict=True)
        ],
    }
    results = [
        {"role": "tool", "tool_call_id": i, "content": out}
        for i, (_, out) in zip(ids, commands, strict=True)
    ]
    return [assistant, *results]


def _thought(rng: random.Random, name: str, words: tuple[int, int]) -> str:
    first = f"{rng.choice(_OPENERS)} {rng.choice(_REASONS).format(name=name)}."
    target = rng.randint(*words)
    parts = [first]
    while sum(len(p.split()) for p in parts) < target:
        parts.append(f"{rng.choice(_OPENERS)} {rng.choice(_REASONS).format(name=name)}.")
    return " ".join(parts)


def _command(
    rng: random.Random, root: Path, folder: Path, local: list[Path], files: list[Path], call: int
) -> tuple[str, str]:
    roll = rng.random()
    if call == 0 or roll < 0.12:
        return f"ls -la {_rel(root, folder)}", _listing(root, folder)
    if roll < 0.30:
        pattern = rng.choice(_PATTERNS)
        return f'grep -rn "{pattern}" {_rel(root, folder)}', _grep(root, folder, pattern)
    if roll < 0.42:
        module = rng.choice(local)
        return (f"python3 -c 'import ast; print(names({_rel(root, module)!r}))'", _names(module))
    module = rng.choice(local if rng.random() < 0.7 else files)
    return f"cat {_rel(root, module)}", module.read_text(encoding="utf-8", errors="replace")


def _rel(root: Path, path: Path) -> str:
    relative = str(path.relative_to(root))
    return "Lib" if relative == "." else f"Lib/{relative}"


def _listing(root: Path, folder: Path) -> str:
    rows = [
        f"{p.stat().st_size:>9} {p.name}{'/' if p.is_dir() else ''}"
        for p in sorted(folder.iterdir())
        if p.name != "__pycache__"
    ]
    return f"total {len(rows)}\n" + "\n".join(rows)


def _grep(root: Path, folder: Path, pattern: str) -> str:
    expression = re.compile(pattern)
    return "\n".join(_matches(root, folder, expression)) or "(no matches)"


def _matches(root: Path, folder: Path, expression: re.Pattern[str]) -> Iterator[str]:
    for path in sorted(folder.glob("*.py")):
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
        for number, line in enumerate(lines, 1):
            if expression.search(line):
                yield f"{_rel(root, path)}:{number}:{line}"


def _names(module: Path) -> str:
    tree = ast.parse(module.read_text(encoding="utf-8", errors="replace"))
    names = sorted(
        {
            node.name
            for node in tree.body
            if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.AsyncFunctionDef)
        }
    )
    return json.dumps(names)
