"""Every template renders with a minimal context, and a missing variable is an error."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jinja2
import pytest

from compactor.prompts import names, render

RANGES = "t1-t3, t5"
MINIMAL: dict[str, dict[str, Any]] = {
    "entry.j2": {"role": "assistant", "text": "hi", "calls": [], "tool_call_id": None},
    "handles.j2": {"ranges": RANGES},
    "placeholder.j2": {"handle": "call_1", "chars": 1234},
    "pointer.j2": {"handle": "call_1", "chars": 1234, "head": "a", "tail": "z", "limit": 100},
    "read_error.j2": {"problem": "bad id", "handles": ["call_1"]},
    "read_header.j2": {"handle": "call_1", "start": 0, "end": 10, "total": 20},
    "replan.j2": {"summary": "done a", "plan": "1. b", "ranges": RANGES},
    "replan_request.j2": {"task": "t", "summary": "s", "transcript": "x", "words": 50},
    "summary.j2": {
        "task": "t",
        "transcript": "x",
        "previous": "",
        "part": 1,
        "parts": 1,
        "words": 50,
    },
    "summary_message.j2": {"summary": "s", "ranges": RANGES},
}


def test_every_template_has_a_minimal_context_here() -> None:
    assert sorted(MINIMAL) == names()


@pytest.mark.parametrize("name", sorted(MINIMAL))
def test_each_template_renders(name: str) -> None:
    text = render(name, None, **MINIMAL[name])
    assert text.strip()
    assert "{{" not in text and "{%" not in text


@pytest.mark.parametrize("name", sorted(MINIMAL))
def test_a_missing_variable_is_an_error(name: str) -> None:
    context = dict(MINIMAL[name])
    context.pop(next(iter(context)))
    with pytest.raises(jinja2.UndefinedError):
        render(name, None, **context)


def test_a_user_folder_overrides_by_file_name(tmp_path: Path) -> None:
    (tmp_path / "placeholder.j2").write_text("[gone: {{ handle }}]")
    assert render("placeholder.j2", tmp_path, handle="c", chars=1) == "[gone: c]"
    assert render("read_error.j2", tmp_path, problem="p", handles=[]).startswith("READ_TOOL")


def test_pointer_shows_the_handle_size_preview_and_how_to_read() -> None:
    text = render("pointer.j2", None, **MINIMAL["pointer.j2"])
    assert "call_1" in text and "1,234 chars" in text
    assert 'READ_TOOL_RESULT(tool_call_id="call_1", offset=0, limit=100)' in text
