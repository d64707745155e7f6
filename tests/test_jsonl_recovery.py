"""What the JSONL store does with a damaged log: repair a torn tail, refuse anything else.

The tail rule (see ``compactor.stores.jsonl``): the bytes after the last newline, plus the last
newline-terminated line if it fails its checksum, are moved to a quarantine file and cut off;
any other bad line raises SessionCorruptedError with its offset and leaves the file untouched.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from compactor.errors import BlobError, SessionCorruptedError
from compactor.events import ModelCallEvent
from compactor.stores import Checkpoint, JsonlSessionStore, SessionKey
from compactor.stores._logfile import EntryLine, checked_body, encode
from compactor.stores.jsonl import FsyncPolicy

KEY = SessionKey("s-1", "acme")


def call(model: str) -> ModelCallEvent:
    return ModelCallEvent(model=model)


def new_store(root: Path) -> JsonlSessionStore:
    """A fresh store instance: it verifies (and repairs) each log on its first use."""
    return JsonlSessionStore(root, fsync="never")


def log_path(root: Path) -> Path:
    return root / KEY.tenant / KEY.session_id / "log.jsonl"


def quarantined(root: Path) -> list[bytes]:
    folder = log_path(root).parent
    return [p.read_bytes() for p in sorted(folder.glob("log.jsonl.torn-*"))]


def line_starts(data: bytes) -> list[int]:
    """Offsets where each line of a log begins."""
    return [0, *(i + 1 for i, byte in enumerate(data[:-1]) if byte == ord("\n"))]


def written_log(root: Path, count: int) -> bytes:
    store = new_store(root)
    for n in range(count):
        store.append(KEY, call(f"model {n}: 日本語のテキスト ✓"))
    return log_path(root).read_bytes()


def models(store: JsonlSessionStore) -> list[str]:
    return [e.model for e in store.read(KEY) if isinstance(e, ModelCallEvent)]


def test_every_cut_in_the_last_two_events_is_repaired_without_losing_a_whole_line(
    tmp_path: Path,
) -> None:
    original = written_log(tmp_path, 6)
    starts = line_starts(original)
    names = [f"model {n}: 日本語のテキスト ✓" for n in range(6)]
    for cut in range(starts[-2], len(original) + 1):
        log_path(tmp_path).write_bytes(original[:cut])
        for old in log_path(tmp_path).parent.glob("log.jsonl.torn-*"):
            old.unlink()
        whole = [end for end in [*starts[1:], len(original)] if end <= cut]
        kept = whole[-1]
        store = new_store(tmp_path)
        assert models(store) == names[: len(whole) - 1], cut
        assert log_path(tmp_path).read_bytes() == original[:kept]
        assert quarantined(tmp_path) == ([original[kept:cut]] if cut > kept else [])
        store.append(KEY, call("after"))
        assert models(new_store(tmp_path)) == [*names[: len(whole) - 1], "after"]


def test_a_torn_multibyte_character_is_quarantined_and_the_next_append_is_clean(
    tmp_path: Path,
) -> None:
    original = written_log(tmp_path, 3)
    start = line_starts(original)[-1]
    cut = original.index("本".encode(), start) + 1  # inside the 3 bytes of 本
    log_path(tmp_path).write_bytes(original[:cut])
    store = new_store(tmp_path)
    store.append(KEY, call("next"))
    assert models(new_store(tmp_path))[-2:] == ["model 1: 日本語のテキスト ✓", "next"]
    [torn] = quarantined(tmp_path)
    assert torn == original[start:cut]
    with pytest.raises(UnicodeDecodeError):
        torn.decode()


def test_a_tail_of_zero_bytes_is_quarantined(tmp_path: Path) -> None:
    original = written_log(tmp_path, 3)
    log_path(tmp_path).write_bytes(original + b"\0" * 4096)
    assert models(new_store(tmp_path)) == [f"model {n}: 日本語のテキスト ✓" for n in range(3)]
    assert log_path(tmp_path).read_bytes() == original
    assert quarantined(tmp_path) == [b"\0" * 4096]


def test_a_last_line_zero_filled_up_to_its_newline_is_a_torn_tail(tmp_path: Path) -> None:
    original = written_log(tmp_path, 3)
    start = line_starts(original)[-1]
    damaged = original[:start] + b"\0" * (len(original) - start - 1) + b"\n"
    log_path(tmp_path).write_bytes(damaged)
    assert len(models(new_store(tmp_path))) == 2
    assert quarantined(tmp_path) == [damaged[start:]]


def test_repeated_repairs_keep_every_torn_tail(tmp_path: Path) -> None:
    original = written_log(tmp_path, 2)
    log_path(tmp_path).write_bytes(original + b'{"crc":"0000')
    new_store(tmp_path).read(KEY)
    log_path(tmp_path).write_bytes(original + b"\0\0\0")
    new_store(tmp_path).read(KEY)
    assert sorted(quarantined(tmp_path)) == sorted([b'{"crc":"0000', b"\0\0\0"])
    assert log_path(tmp_path).read_bytes() == original


@pytest.mark.parametrize("damage", ["zeros", "random", "flip"])
@pytest.mark.parametrize("line", [0, 1, 3])
def test_damage_before_the_tail_is_refused_and_left_untouched(
    tmp_path: Path, damage: str, line: int
) -> None:
    original = written_log(tmp_path, 5)
    start, end = line_starts(original)[line], line_starts(original)[line + 1] - 1
    rng = random.Random(f"{damage}-{line}")
    middle = bytearray(original)
    at = rng.randrange(start, end - 16)
    if damage == "zeros":
        middle[at : at + 16] = bytes(16)
    elif damage == "random":
        middle[at : at + 16] = bytes(rng.choice(range(1, 256)) for _ in range(16))
    else:
        middle[at] ^= 0x04
    log_path(tmp_path).write_bytes(bytes(middle))
    with pytest.raises(SessionCorruptedError) as caught:
        new_store(tmp_path).read(KEY)
    assert caught.value.offset == start
    assert caught.value.path == str(log_path(tmp_path))
    assert log_path(tmp_path).read_bytes() == bytes(middle)
    with pytest.raises(SessionCorruptedError):
        new_store(tmp_path).append(KEY, call("refused"))
    assert log_path(tmp_path).read_bytes() == bytes(middle)
    assert quarantined(tmp_path) == []


def test_a_checksummed_line_that_does_not_continue_the_log_is_refused_even_last(
    tmp_path: Path,
) -> None:
    original = written_log(tmp_path, 3)
    last = original[line_starts(original)[-1] : -1]
    body = checked_body(last)
    assert body is not None
    replayed = EntryLine.model_validate_json(body)  # the same seq and id again
    damaged = original + encode(replayed)
    log_path(tmp_path).write_bytes(damaged)
    with pytest.raises(SessionCorruptedError) as caught:
        new_store(tmp_path).read(KEY)
    assert caught.value.offset == len(original)
    assert log_path(tmp_path).read_bytes() == damaged


def test_a_store_catches_up_with_lines_another_store_wrote(tmp_path: Path) -> None:
    first, second = new_store(tmp_path), new_store(tmp_path)
    first.append(KEY, call("a"))
    second.append(KEY, call("b"))
    log_path(tmp_path).write_bytes(log_path(tmp_path).read_bytes() + b'{"crc"')
    first.append(KEY, call("c"))  # repairs the tail the other writer left, then appends
    assert models(second) == ["a", "b", "c"]
    assert [e.seq for e in second.entries(KEY)] == [1, 2, 3]


def test_a_missing_or_altered_payload_blob_is_an_error_not_an_empty_event(
    tmp_path: Path,
) -> None:
    store = new_store(tmp_path)
    store.append(KEY, call("x" * 40_000))
    [blob] = (log_path(tmp_path).parent / "blobs").iterdir()
    data = blob.read_bytes()
    blob.write_bytes(data.replace(b"xxxx", b"xxxy", 1))
    with pytest.raises(BlobError, match="does not match"):
        new_store(tmp_path).read(KEY)
    blob.unlink()
    with pytest.raises(BlobError, match="missing"):
        new_store(tmp_path).read(KEY)
    blob.write_bytes(data)
    assert models(new_store(tmp_path)) == ["x" * 40_000]


def test_a_missing_or_altered_checkpoint_message_is_an_error(tmp_path: Path) -> None:
    store = new_store(tmp_path)
    checkpoint = Checkpoint(
        schema_version=1,
        checkpoint_id="cp",
        session_id=KEY.session_id,
        branch_id="main",
        run_id=None,
        turn=1,
        messages=[{"role": "user", "content": "only message"}],
        state={},
        config_digest="c",
        toolset_digest="t",
        created="2025-01-01T00:00:00Z",
    )
    store.put_checkpoint(KEY, checkpoint)
    [blob] = (log_path(tmp_path).parent / "blobs").iterdir()
    blob.write_bytes(json.dumps({"role": "user", "content": "forged"}).encode())
    with pytest.raises(BlobError):
        new_store(tmp_path).checkpoints(KEY)
    blob.unlink()
    with pytest.raises(BlobError):
        new_store(tmp_path).checkpoints(KEY)


def test_small_payloads_stay_inline_and_large_ones_go_to_blobs(tmp_path: Path) -> None:
    store = JsonlSessionStore(tmp_path, inline_payload_max_bytes=1000)
    store.append(KEY, call("small"))
    store.append(KEY, call("y" * 2000))
    lines = log_path(tmp_path).read_bytes().splitlines()[1:]
    records = [json.loads(line) for line in lines]
    assert records[0]["payload"]["model"] == "small" and records[0]["payload_blob"] is None
    assert records[1]["payload"] is None and records[1]["payload_blob"]["size"] > 2000


@pytest.mark.parametrize("policy", ["always", "batch", "never"])
def test_every_fsync_policy_writes_the_same_log(tmp_path: Path, policy: FsyncPolicy) -> None:
    with JsonlSessionStore(tmp_path, fsync=policy) as store:
        for n in range(100):
            store.append(KEY, call(f"m{n}"))
    assert models(new_store(tmp_path)) == [f"m{n}" for n in range(100)]


def test_bad_options_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="fsync"):
        JsonlSessionStore(tmp_path, fsync="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="inline_payload_max_bytes"):
        JsonlSessionStore(tmp_path, inline_payload_max_bytes=-1)


def test_an_append_whose_sync_fails_is_cut_off_and_raised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from compactor.errors import StoreError
    from compactor.events import ModelCallEvent
    from compactor.stores import JsonlSessionStore, SessionKey

    store = JsonlSessionStore(tmp_path)
    key = SessionKey("s")
    store.append(key, ModelCallEvent(model="kept"))
    log = next(tmp_path.rglob("log.jsonl"))
    before = log.read_bytes()

    def failing(descriptor: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("os.fsync", failing)
    with pytest.raises(StoreError, match="append failed"):
        store.append(key, ModelCallEvent(model="lost"))
    monkeypatch.undo()
    assert log.read_bytes() == before
    assert [e.model for e in JsonlSessionStore(tmp_path).read(key)] == ["kept"]  # type: ignore[union-attr]
