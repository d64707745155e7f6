"""The package as a user meets it: the import, the public names, the command line."""

from __future__ import annotations

import subprocess
import sys

import pytest

import compactor
from compactor.cli import main


def test_importing_compactor_does_not_import_litellm() -> None:
    code = "import sys, compactor; print('litellm' in sys.modules, 'openai' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


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
