"""The benchmark's measures on hand-made sessions, its policies, and a tiny end-to-end run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from compactor.bench import BenchOptions, bench, peers
from compactor.bench.metrics import Sized, Sizer, cached_tokens, kept_in_context
from compactor.bench.policies import CompactorPolicy, NoCompaction, ObservationMasking
from compactor.bench.runner import run
from compactor.bench.trajectory import BASH_TOOL, Trajectory, load_traces
from compactor.bench.workload import builtin_workload
from compactor.tokens import Prices
from tests.conftest import SHARED, big, history, sized


def request(*tokens: int, keys: str = "abcdefgh", tools: int = 100) -> Sized:
    return Sized(tools, tuple(keys[: len(tokens)]), tuple(tokens))


def test_cached_tokens_are_the_shared_prefix_in_whole_blocks() -> None:
    before = request(500, 600, 700)
    assert cached_tokens(None, before) == 0
    # tools (100) + two shared messages (1,100) = 1,200, rounded down to 128-token blocks
    assert cached_tokens(before, request(500, 600, 50, keys="abX")) == 1152
    assert cached_tokens(before, request(500, 600, 700, 10)) == 1792
    assert cached_tokens(before, request(400, 300, keys="aZ")) == 0  # under the 1,024 minimum
    assert cached_tokens(before, request(500, 600, 700, tools=90)) == 0  # other tools


def test_cost_bills_cached_input_at_the_cache_price() -> None:
    prices = Prices.of("deepseek/deepseek-chat")
    assert (prices.input, prices.cached_input, prices.output) == (2.8e-07, 2.8e-08, 4.2e-07)
    assert prices.cost(1_000_000, 900_000, 100_000) == pytest.approx(0.028 + 0.0252 + 0.042)
    unknown = Prices.of("acme/none")
    assert unknown.cost(1000, 0, 1000) == 0.0


def test_information_kept_counts_verbatim_outputs_only() -> None:
    original = history(["a" * 100, "b" * 50, "c" * 10])
    sent = [dict(m) for m in original]
    sent[3] = {**sent[3], "content": "[cleared]"}
    assert kept_in_context(original, sent) == 60


def test_sizer_counts_each_message_once_by_content(monkeypatch: pytest.MonkeyPatch) -> None:
    sizer = Sizer("gpt-4o")
    counted: list[object] = []
    original = sizer.meter.message_tokens
    monkeypatch.setattr(sizer.meter, "message_tokens", lambda m: counted.append(m) or original(m))
    first = sizer.size(history(["x" * 400]), [BASH_TOOL])
    again = sizer.size([dict(m) for m in history(["x" * 400])], [BASH_TOOL])  # new dicts
    assert first == again and first.total > sum(first.tokens)
    assert len(counted) == len(history(["x" * 400]))  # the copies were not counted again


def test_masking_keeps_the_last_outputs_and_no_compaction_keeps_all() -> None:
    messages = history([f"out {i}" for i in range(12)])
    masked = ObservationMasking(10).start([], 8000, "gpt-4o").prepare(messages)
    contents = [m["content"] for m in masked.messages or [] if m["role"] == "tool"]
    assert contents[:2] == ["[Old tool output omitted: 1 lines]"] * 2
    assert contents[2:] == [f"out {i}" for i in range(2, 12)]
    assert NoCompaction().start([], 8000, "gpt-4o").prepare(messages).messages == messages


def test_replays_measure_every_call_and_compactor_stays_inside_the_window() -> None:
    outputs = [sized(i, 1500) for i in range(8)]
    messages = [*history(outputs), {"role": "assistant", "content": "done"}]
    trajectory = Trajectory("t", messages, tools=[BASH_TOOL])
    results = run([trajectory], [NoCompaction(), CompactorPolicy()], 6000, "gpt-4o")
    none, compactor = results
    assert len(none.calls) == len(compactor.calls) == 9
    assert none.over > 0 and compactor.over == 0 and not compactor.failed
    # information kept is measured: what was archived is found in full in compactor's store
    assert all(call.kept_chars == call.tool_chars for call in compactor.calls)
    assert any(call.compactions for call in compactor.calls)
    assert sum(c.tokens for c in compactor.calls) < sum(c.tokens for c in none.calls)


def test_the_builtin_workload_is_deterministic_and_realistic() -> None:
    first, again = builtin_workload(3), builtin_workload(3)
    assert [t.messages for t in first] == [t.messages for t in again]
    outputs = [len(m["content"]) for t in first for m in t.messages if m["role"] == "tool"]
    assert max(outputs) > 20_000  # whole modules, not capped outputs


def test_traces_load_with_their_usage() -> None:
    traces = load_traces(SHARED / "traces" / "swe", SHARED / "traces" / "swe-usage")
    assert len(traces) == 99
    assert traces[0].usage is not None and len(traces[0].usage) == len(traces[0].cuts())


def test_bench_runs_end_to_end_on_a_tiny_workload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = bench(BenchOptions(window=16_000, sessions=2, max_calls=6, out=tmp_path))
    table = capsys.readouterr().out
    names = [row.policy for row in rows]
    assert names[:3] == ["none", "compactor", "masking"]
    assert all(name in table for name in names)
    document = json.loads((tmp_path / "builtin-deepseek-chat-16000.json").read_text())
    assert document["meta"]["window"] == 16_000 and document["meta"]["packages"]["compactor"]
    assert {p["policy"] for p in document["policies"]} == set(names)
    compactor = next(p for p in document["policies"] if p["policy"] == "compactor")
    assert compactor["calls_over_window"] == 0 and compactor["info_kept"] == 1.0
    assert (tmp_path / "builtin-deepseek-chat-16000.png").exists() == (
        document["meta"]["chart"] is not None
    )


@pytest.mark.skipif(bool(peers.missing()), reason="the bench extra is not installed")
def test_peers_clear_old_tool_results_like_their_packages_do() -> None:
    messages = history([big(i, 8000) for i in range(6)])
    for policy in peers.policies():
        replay = policy.start([BASH_TOOL], 4000, "gpt-4o")
        sent = replay.prepare(messages).messages or []
        contents = [m["content"] for m in sent if m["role"] == "tool"]
        if policy.name == "langchain-default":  # its 100,000-token trigger is not reached
            assert contents == [m["content"] for m in messages if m["role"] == "tool"]
            continue
        assert contents[-1] == big(5, 8000), policy.name
        assert any(c in ("[cleared]", "[tool result cleared]") for c in contents), policy.name


def test_bad_options_are_reported_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from compactor.cli import main

    assert main(["bench", "--policies", "nope", "--out", str(tmp_path)]) == 2
    assert "unknown or unavailable policies ['nope']" in capsys.readouterr().err
    assert main(["bench", "--traces", str(tmp_path), "--out", str(tmp_path)]) == 2
    assert "no *.jsonl trajectories" in capsys.readouterr().err


def test_information_kept_counts_only_what_a_policy_can_give_back() -> None:
    outputs = [sized(i, 1500) for i in range(8)]
    messages = [*history(outputs), {"role": "assistant", "content": "done"}]
    trajectory = Trajectory("t", messages, tools=[BASH_TOOL])
    masking, compactor = run(
        [trajectory], [ObservationMasking(2), CompactorPolicy()], 6000, "gpt-4o"
    )
    last_masked, last_compacted = masking.calls[-1], compactor.calls[-1]
    assert last_masked.kept_chars < last_masked.tool_chars / 2  # masked outputs are gone
    assert last_compacted.kept_chars == last_compacted.tool_chars


def test_max_calls_replays_exactly_that_many(tmp_path: Path) -> None:
    rows = bench(
        BenchOptions(window=16_000, sessions=1, max_calls=4, out=tmp_path, policies=("none",))
    )
    assert rows[0].calls == 4
