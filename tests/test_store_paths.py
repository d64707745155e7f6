"""No id a caller passes can name a path outside the JSONL store, or create anything there."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from compactor.errors import InvalidSessionIdError
from compactor.events import ModelCallEvent
from compactor.stores import Checkpoint, JsonlSessionStore, SessionKey

UNSAFE = [
    "../x",
    "..",
    ".",
    "../../etc/passwd",
    "/etc/passwd",
    "/tmp/x",
    "a/b",
    "a\\b",
    "..\\x",
    "C:\\x",
    "~",
    "~/x",
    "a\x00b",
    "\x00",
    "",
    " x",
    "x\n",
    "a" * 129,
    "a" * 5000,
    "\uff53\uff45\uff53\uff53\uff49\uff4f\uff4e",  # "session" in fullwidth letters
    "\u0455ession",  # a Cyrillic dze for the s
    "se\u200bssion",  # a zero-width space inside
    "a\u2215b",  # a division slash that looks like /
    "..\u2215x",
    "%2e%2e%2fx",
    ".hidden",
    "-rf",
    "x/../../y",
    "file:///etc/passwd",
]


def everything_under(folder: Path) -> set[str]:
    return {str(path.relative_to(folder)) for path in folder.rglob("*")}


@pytest.fixture
def sandbox(tmp_path: Path) -> tuple[Path, JsonlSessionStore]:
    """A store inside a folder of its own, with one good session written."""
    store = JsonlSessionStore(tmp_path / "root" / "store", fsync="never")
    store.append(SessionKey("good", "acme"), ModelCallEvent(model="m"))
    return tmp_path, store


def test_there_are_at_least_25_unsafe_ids() -> None:
    assert len(set(UNSAFE)) >= 25


@pytest.mark.parametrize("bad", UNSAFE)
def test_an_unsafe_id_is_refused_everywhere_and_creates_nothing(
    sandbox: tuple[Path, JsonlSessionStore], bad: str
) -> None:
    tmp_path, store = sandbox
    before = everything_under(tmp_path)
    good = SessionKey("good", "acme")
    for make_key in (
        lambda: SessionKey(bad),
        lambda: SessionKey("good", bad),
        lambda: SessionKey("good", "acme", bad),
    ):
        with pytest.raises(InvalidSessionIdError):
            make_key()
    calls = [
        lambda: store.sessions(bad),
        lambda: store.read(good, branch=bad),
        lambda: store.entries(good, branch=bad),
        lambda: store.append(good, ModelCallEvent(model="m"), branch=bad),
        lambda: store.fork(good, bad),
        lambda: store.checkpoints(good, branch=bad),
        lambda: store.put_checkpoint(good, _checkpoint(bad)),
    ]
    for refused in calls:
        with pytest.raises(InvalidSessionIdError):
            refused()
    assert everything_under(tmp_path) == before
    assert os.listdir(tmp_path) == ["root"]


def _checkpoint(branch: str) -> Checkpoint:
    return Checkpoint(
        schema_version=1,
        checkpoint_id="cp",
        session_id="good",
        branch_id=branch,
        run_id=None,
        turn=0,
        messages=[],
        state={},
        config_digest="c",
        toolset_digest="t",
        created=datetime.now(UTC),
    )
