"""Checkpoints, resume in another process, leases and tenants, through the Compactor."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from compactor import Compactor, CompactorConfig
from compactor.bench.trajectory import BASH_TOOL
from compactor.errors import AccessDeniedError, LeaseHeldError, RecoveryBlockedError
from compactor.state import dump_state
from compactor.testing import ScriptedSummarizer
from tests.conftest import history

AGENT = str(Path(__file__).with_name("scripted_agent.py"))


def run_agent(home: Path) -> dict:
    """Run the scripted agent in a child process that dies holding its lease."""
    out = subprocess.run(
        [sys.executable, AGENT, "home", str(home), "die"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout)


def snapshot(home: Path) -> dict[str, bytes]:
    """Every file of the session store. (Opening the tool-result store lets SQLite fold its
    write-ahead log, which changes those files without a write of ours.)"""
    folder = home / "sessions"
    return {str(p): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def fresh(home: Path, window: int = 6000, **settings: object) -> Compactor:
    config = CompactorConfig(context_window=window, **settings)  # type: ignore[arg-type]
    return Compactor("gpt-4o", config=config, home=home, summarizer=ScriptedSummarizer())


def test_resume_in_a_new_process_gives_back_the_messages_and_the_state(tmp_path: Path) -> None:
    child = run_agent(tmp_path)
    compactor = fresh(tmp_path)
    messages = compactor.resume("job", tools=[BASH_TOOL])
    assert messages == child["messages"]
    assert dump_state(compactor._session("job").state) == child["state"]
    # It carries on where the child stopped: what was archived stays archived (the prefix the
    # provider cached is the same), and the dead child's lease is taken over at once.
    tools = [BASH_TOOL, compactor.tool_schema]
    result = compactor.compact(messages, session_id="job", tools=tools)
    assert result.event is None
    assert any(str(m["content"]).startswith("[archived t1") for m in result.messages)
    compactor.record_usage("job", {"usage": {"prompt_tokens": 900, "completion_tokens": 9}})


@pytest.mark.parametrize(
    ("settings", "tools", "changed"),
    [
        ({"keep_offload": 2}, [BASH_TOOL], ["config"]),
        ({}, [], ["toolset"]),
        ({"preview_chars": 10}, [{**BASH_TOOL, "x": 1}], ["config", "toolset"]),
    ],
)
def test_a_changed_config_or_toolset_blocks_recovery_and_writes_nothing(
    tmp_path: Path, settings: dict, tools: list, changed: list[str]
) -> None:
    run_agent(tmp_path)
    before = snapshot(tmp_path)
    with pytest.raises(RecoveryBlockedError) as caught:
        fresh(tmp_path, **settings).resume("job", tools=tools)
    assert caught.value.changed == changed
    assert all(name in str(caught.value) for name in changed)
    assert snapshot(tmp_path) == before


def test_a_checkpoint_of_another_schema_blocks_recovery(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    run_agent(tmp_path)
    before = snapshot(tmp_path)
    monkeypatch.setattr("compactor.checkpoints.CHECKPOINT_SCHEMA", 99)
    with pytest.raises(RecoveryBlockedError) as caught:
        fresh(tmp_path).resume("job", tools=[BASH_TOOL])
    assert caught.value.changed == ["schema"]
    assert snapshot(tmp_path) == before


def test_checkpoints_keep_the_last_few_of_a_run(tmp_path: Path) -> None:
    run_agent(tmp_path)
    compactor = fresh(tmp_path)
    kept = compactor.sessions.checkpoints(compactor._key("job"))
    assert len(kept) == 3
    assert [c.turn for c in kept] == [7, 8, 9]
    assert kept[-1].messages[-1] == {"role": "assistant", "content": "done"}


def test_one_writer_at_a_time(tmp_path: Path) -> None:
    first = fresh(tmp_path)
    first.compact(history(["x" * 300]), session_id="s")
    first.record_usage("s", {"usage": {"prompt_tokens": 100, "completion_tokens": 1}})
    second = fresh(tmp_path)
    second.compact(history(["x" * 300, "y" * 300]), session_id="s")  # writes nothing yet
    with pytest.raises(LeaseHeldError):
        second.record_usage("s", {"usage": {"prompt_tokens": 100, "completion_tokens": 1}})
    first.close()
    second.record_usage("s", {"usage": {"prompt_tokens": 100, "completion_tokens": 1}})


def test_a_tenant_cannot_reach_another_tenants_session(tmp_path: Path) -> None:
    config = CompactorConfig(context_window=6000)
    acme = Compactor("gpt-4o", config=config, home=tmp_path, tenant="acme")
    acme.compact(history(["secret " * 100]), session_id="shared-id")
    acme.record_usage("shared-id", {"usage": {"prompt_tokens": 10, "completion_tokens": 1}})
    other = Compactor("gpt-4o", config=config, home=tmp_path, tenant="globex")
    with pytest.raises(AccessDeniedError):
        other.events("shared-id")
    with pytest.raises(AccessDeniedError):
        other.compact(history(["mine"]), session_id="shared-id")
    with pytest.raises(AccessDeniedError):
        other.read_tool_result("shared-id", "t1")


def test_resume_starts_from_the_checkpoint_and_applies_what_was_logged_after(
    tmp_path: Path,
) -> None:
    first = fresh(tmp_path)
    first.compact(history(["one " * 100]), session_id="s")
    first.record_usage("s", {"usage": {"prompt_tokens": 90, "completion_tokens": 2}})
    first.compact(history(["one " * 100, "two " * 100]), session_id="s")  # after it
    first.close()  # logs the new result's event, after the checkpoint
    second = fresh(tmp_path)
    checkpoint = second.sessions.checkpoints(second._key("s"))[-1]
    assert checkpoint.state["seq"] < len(second.events("s"))
    messages = second.resume("s")
    assert messages == history(["one " * 100])  # the history at the checkpoint
    state = second._session("s").state
    assert list(state.results) == ["t1", "t2"]  # t2 was logged after the checkpoint
    assert second.read_tool_result("s", "t2").endswith("two ")
