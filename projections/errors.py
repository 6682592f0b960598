"""Errors of projection definitions.

Three kinds of failure, three types:

- :class:`ProjectionError`: the definition itself is wrong (SQL that does not parse, a column
  outside GROUP BY, conflicting SCD options, a fold that changes its key). Fix the definition.
- :class:`ProjectionNotIncrementalError`: the definition is valid SQL, but cannot be maintained
  from changes; ``reasons`` names every feature in the way. Rewrite it, or declare
  ``maintain="recompute"``.
- ``cdc.errors.ChangeEventError``: a change is unusable (a missing before image, a missing key
  or sequence column); it names the field, as everywhere in the product.
"""

from __future__ import annotations

from collections.abc import Sequence

from cdc.errors import UserError


class ProjectionError(UserError, ValueError):
    """A projection definition is invalid (bad SQL, unknown column, conflicting options)."""


class ProjectionNotIncrementalError(ProjectionError):
    """The projection cannot be maintained from changes; ``reasons`` says why, one per feature.

    Declare ``maintain="recompute"`` to have it recomputed from scratch instead.
    """

    def __init__(self, name: str, reasons: Sequence[str]) -> None:
        self.name = name
        self.reasons = tuple(reasons)
        super().__init__(
            f"projection {name} cannot be maintained incrementally: {_listed(self.reasons)} "
            '(declare maintain="recompute" to recompute it from scratch instead)'
        )


def _listed(reasons: tuple[str, ...]) -> str:
    if len(reasons) == 1:
        return reasons[0]
    return "; ".join(f"({i}) {reason}" for i, reason in enumerate(reasons, 1))
