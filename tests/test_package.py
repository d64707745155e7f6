"""The package as a user meets it: the import, the public names, the command line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import compactor
from compactor.cli import main


def test_importing_compactor_does_not_import_litellm() -> None:
    code = (
        "import sys, compactor; "
        "print('litellm' in sys.modules, 'openai' in sys.modules, 'redis' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "False"]


def test_compactor_imports_without_the_redis_extra() -> None:
    code = (
        "import sys; sys.modules['redis'] = None\n"  # as if redis-py were not installed
        "import compactor\n"
        "from compactor import Compactor, JsonlSessionStore\n"
        "try:\n"
        "    compactor.RedisSessionStore\n"
        "except ImportError:\n"
        "    print('needs the extra')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[0] == "needs the extra"


def test_the_public_names_are_importable() -> None:
    for name in compactor.__all__:
        assert getattr(compactor, name) is not None
    assert "Compactor" in compactor.__all__ and "CompactorConfig" in compactor.__all__


def test_the_demo_runs_offline_and_shows_tiers_and_a_page(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "offload" in out and "placeholder" in out
    assert "[READ_TOOL_RESULT t1: chars 0.." in out


def test_sessions_and_events_can_be_inspected_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--home", str(tmp_path)]) == 0
    capsys.readouterr()
    assert main(["sessions", "--home", str(tmp_path)]) == 0
    assert capsys.readouterr().out.split() == ["demo"]
    assert main(["events", "demo", "--home", str(tmp_path)]) == 0
    table = capsys.readouterr().out
    assert "run_started" in table and "placeholder (pre_call)" in table
    assert main(["events", "demo", "--home", str(tmp_path), "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0]["seq"] == 1 and lines[0]["kind"] == "run_started"
    assert {line["kind"] for line in lines} >= {"model_call", "tool_result", "compaction"}
