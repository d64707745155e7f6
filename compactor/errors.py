"""Errors raised by compactor.

Errors meant for the model (a bad ``READ_TOOL_RESULT`` id or offset) are never raised: they are
answered as tool text. Everything here is meant for the developer.

The tree::

    CompactorError
    ├── ConfigError (ValueError)             bad configuration, unknown model window
    ├── InvalidMessagesError (ValueError)    a malformed chat history, before anything is sent
    ├── InvalidSessionIdError (ValueError)   an id that could name a path outside the store
    ├── ContextExhaustedError                the context cannot be brought under the window
    ├── SummarizerError                      a summary or replan call failed (a failed attempt)
    └── StoreError                           a store failed or refused an operation
        ├── SessionCorruptedError            damage before the tail of a log: never skipped
        ├── BlobError                        a blob is missing or does not match its digest
        ├── LeaseHeldError                   another live writer holds the session's lease
        ├── LeaseLostError                   this writer's lease was taken over: append refused
        ├── AccessDeniedError                the session belongs to another tenant or user
        └── RecoveryBlockedError             a checkpoint does not match this schema/config/tools

and one warning, ``PersistenceWarning`` (a ``UserWarning``): a store's server keeps nothing on
disk.
"""

from __future__ import annotations


class CompactorError(Exception):
    """Base class of every error compactor raises."""


class ConfigError(CompactorError, ValueError):
    """The configuration is invalid, or a needed value (such as the window) is unknown."""


class InvalidMessagesError(CompactorError, ValueError):
    """A chat history is malformed.

    Attributes:
        index: position of the offending message in the caller's list.
        problem: what is wrong with it.
    """

    def __init__(self, index: int, problem: str) -> None:
        super().__init__(f"messages[{index}]: {problem}")
        self.index = index
        self.problem = problem


class InvalidSessionIdError(CompactorError, ValueError):
    """A session, tenant or user id is not allowed (path separators, ``..``, too long, ...)."""


class ContextExhaustedError(CompactorError):
    """The context cannot be brought under the window; nothing over the window is sent.

    Attributes:
        session_id: the session.
        run_id: the run whose compaction budget was spent, if known.
        tokens: the estimated input tokens of the smallest context compactor could build.
        window: the input tokens available.
        attempts: summary attempts and replans made in this run.
    """

    def __init__(
        self,
        message: str,
        *,
        session_id: str,
        run_id: str | None,
        tokens: int,
        window: int,
        attempts: int,
    ) -> None:
        super().__init__(message)
        self.session_id = session_id
        self.run_id = run_id
        self.tokens = tokens
        self.window = window
        self.attempts = attempts


class SummarizerError(CompactorError):
    """A summary or replan call raised, timed out, or could not be read.

    Compactor records it as a failed attempt and moves on to the next tier; it only reaches
    the caller as the cause of a ContextExhaustedError.
    """


class StoreError(CompactorError):
    """A store failed, or refused an operation."""


class SessionCorruptedError(StoreError):
    """A session log is damaged before its tail; the file is left untouched.

    Attributes:
        path: the damaged file.
        offset: byte offset of the first damaged line.
    """

    def __init__(self, message: str, *, path: str, offset: int) -> None:
        super().__init__(message)
        self.path = path
        self.offset = offset


class BlobError(StoreError):
    """A blob an event refers to is missing, or its bytes do not match its digest."""


class LeaseHeldError(StoreError):
    """Another writer holds a live lease on the session."""


class LeaseLostError(StoreError):
    """This writer's lease was taken over (or expired and was taken); nothing was written."""


class AccessDeniedError(StoreError):
    """The session belongs to another tenant (or user) than the one acting."""


class RecoveryBlockedError(StoreError):
    """A checkpoint was taken under another schema, config or toolset; nothing was changed.

    Attributes:
        changed: what differs: any of ``"schema"``, ``"config"``, ``"toolset"``.
    """

    def __init__(self, message: str, *, changed: list[str]) -> None:
        super().__init__(message)
        self.changed = changed


class PersistenceWarning(UserWarning):
    """A store's server keeps nothing on disk (Redis without AOF or RDB save points)."""
