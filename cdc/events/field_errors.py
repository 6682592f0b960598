"""How decoding failures become ``ChangeEventError``: dotted field paths and the record's origin."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError

from cdc.errors import ChangeEventError

_SHOWN_INPUT_CHARS = 60


class FieldError(Exception):
    """A value failed to decode; nested decoders add their field name as the error bubbles out.

    Internal to the package: the reader turns it into a ``ChangeEventError`` with a full path.
    """

    def __init__(self, reason: str, *path: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self._reversed_path = list(reversed(path))

    def within(self, name: str) -> FieldError:
        """Return this error with ``name`` (a field, or ``[i]`` for an element) put in front."""
        self._reversed_path.append(name)
        return self

    @property
    def path(self) -> tuple[str, ...]:
        """Field names (and ``[i]`` elements) from the outermost decoder inwards."""
        return tuple(reversed(self._reversed_path))


def join_path(*parts: str) -> str:
    """Join path parts into ``payload.after.c_date[0]`` form, skipping empty parts."""
    out = ""
    for part in parts:
        if not part:
            continue
        out += part if part.startswith("[") or not out else f".{part}"
    return out


def describe(value: object) -> str:
    """A short description of an offending input value for error messages."""
    text = repr(value)
    if len(text) > _SHOWN_INPUT_CHARS:
        text = text[: _SHOWN_INPUT_CHARS - 3] + "..."
    return f"{type(value).__name__} {text}"


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a record came from, copied into every error raised while parsing it."""

    topic: str | None = None
    partition: int | None = None
    offset: int | None = None

    def error(self, reason: str, field: str | None = None) -> ChangeEventError:
        """A ``ChangeEventError`` for ``field`` at this origin."""
        return ChangeEventError(
            reason,
            field=field or None,
            topic=self.topic,
            partition=self.partition,
            offset=self.offset,
        )

    def from_field_error(self, exc: FieldError, prefix: str) -> ChangeEventError:
        """Convert a decoder's ``FieldError`` found under ``prefix`` (e.g. ``payload``)."""
        return self.error(exc.reason, join_path(prefix, *exc.path))

    def from_validation_error(
        self, exc: ValidationError, prefix: str, skip: frozenset[str] = frozenset()
    ) -> ChangeEventError:
        """Convert pydantic's first error; ``skip`` drops union tags from the location."""
        first = exc.errors(include_url=False)[0]
        parts = [
            f"[{part}]" if isinstance(part, int) else part
            for part in first["loc"]
            if not (isinstance(part, str) and part in skip)
        ]
        reason = first["msg"]
        if first["type"] != "missing":
            reason = f"{reason} (got {describe(first['input'])})"
        return self.error(reason, join_path(prefix, *parts))
