"""The exception tree of fadeway, rooted at `FadewayError`.

Every error raised for bad input is raised before anything is written, and says what was wrong,
where, and what is allowed.
"""

from __future__ import annotations

__all__ = [
    "FadewayError",
    "InvalidRequestError",
    "InvalidMessageError",
    "UnknownRoleError",
    "UnmatchedToolOutputError",
    "EmptyRequestError",
    "InvalidMemoryIdError",
    "MemoryNotFoundError",
    "ServerStateError",
    "FormatMismatchError",
    "HistoryConflictError",
    "InvalidResponseError",
    "InvalidTimeError",
    "LimitExceededError",
    "ExportLimitError",
    "ImportConflictError",
    "InvalidExportError",
    "StoreError",
    "SchemaVersionError",
    "EndpointError",
    "EndpointTimeout",
    "EndpointResponseError",
    "EmbedderMismatchError",
    "JudgeTimeout",
    "NoteWriterError",
    "ReplayFormatError",
    "UsageError",
    "CoreError",
    "CoreInputError",
    "UnknownNameError",
]


class FadewayError(Exception):
    """Base class of every error fadeway raises on purpose."""


class InvalidRequestError(FadewayError, ValueError):
    """A request passed to `decorate` (or `report`) is not one fadeway can manage."""


class InvalidMessageError(InvalidRequestError):
    """A message or item of a request is malformed."""


class UnknownRoleError(InvalidMessageError):
    """A message has a role that its wire format does not allow."""


class UnmatchedToolOutputError(InvalidMessageError):
    """A tool output names a call id that no earlier assistant call has."""


class EmptyRequestError(InvalidRequestError):
    """A request carries no messages at all."""


class InvalidMemoryIdError(FadewayError, TypeError):
    """A memory id is not a non-empty string."""


class MemoryNotFoundError(FadewayError, KeyError):
    """The store holds no memory with that id (a memory is made by its first decorate)."""

    def __str__(self) -> str:
        return str(self.args[0])


class ServerStateError(InvalidRequestError):
    """A request relies on provider-side conversation state fadeway cannot see."""


class FormatMismatchError(InvalidRequestError):
    """A request's wire format differs from the format this memory was started in."""


class HistoryConflictError(InvalidRequestError):
    """The sent history contradicts the stored one (an earlier message was edited)."""


class InvalidResponseError(FadewayError, ValueError):
    """A provider response passed to `report` has no reply fadeway can read."""


class InvalidTimeError(FadewayError, ValueError):
    """A time (`at=`, or what the engine's clock returned) that is not finite Unix seconds of
    years 1 to 9999, or a datetime without a timezone."""


class LimitExceededError(InvalidRequestError):
    """A size over one of the engine's limits (a message's bytes, messages per request);
    `setting` names the `fadeway.open` setting, `found` what was found and `limit` its value."""

    def __init__(self, message: str, *, setting: str, found: int, limit: int) -> None:
        super().__init__(message)
        self.setting, self.found, self.limit = setting, found, limit


class ImportConflictError(FadewayError):
    """An import targets a memory that already holds messages."""


class InvalidExportError(FadewayError, ValueError):
    """A document passed to `import_memory` is not a fadeway export."""


class ExportLimitError(LimitExceededError, InvalidExportError):
    """An export holds a message or a note over one of the importing engine's limits."""


class StoreError(FadewayError):
    """The store cannot be opened or used."""


class SchemaVersionError(StoreError):
    """The store's schema is newer than this version of fadeway understands."""


class EndpointError(FadewayError):
    """A call to a provider endpoint (embeddings, judge) failed.

    `status` is the HTTP status of the last answer, or None when no answer came (network error).
    `retryable`: the endpoint could not be reached or was overloaded (network errors, 408, 429,
    5xx), so the same call may well succeed later; a refused call or a missing setting is not.
    """

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = False) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable


class EndpointTimeout(EndpointError, TimeoutError):
    """A call to a provider endpoint did not finish by its deadline (all attempts and waits)."""

    def __init__(self, message: str, *, status: int | None = None, retryable: bool = True) -> None:
        super().__init__(message, status=status, retryable=retryable)


class EndpointResponseError(EndpointError, ValueError):
    """A provider endpoint answered with a body fadeway cannot read (malformed or inconsistent)."""


class EmbedderMismatchError(FadewayError, ValueError):
    """Vectors of one embedder met vectors or an index of another (name or dimension differ)."""


class JudgeTimeout(FadewayError, TimeoutError):
    """A judgment did not finish by its deadline."""


class NoteWriterError(FadewayError):
    """A note writer gave no readable note; the ask stays pending (the episodes stay leaving)."""


class ReplayFormatError(FadewayError, ValueError):
    """A replay input is malformed; the message names the file and the line."""


class UsageError(FadewayError, ValueError):
    """A command-line option that is not allowed (yet)."""


class CoreError(FadewayError, ValueError):
    """The Rust core refused its input (mapped in `rust/py/src/errors.rs`, its one mapping)."""


class CoreInputError(CoreError):
    """An argument of a Rust kernel is out of its allowed range or shape."""


class UnknownNameError(CoreError):
    """A name a Rust kernel does not know (an encoding, an option); says what is allowed."""
