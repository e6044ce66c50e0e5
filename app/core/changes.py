"""What a store changed, as a typed value: the kinds of data a write touched.

Every write of the desk's database says what it changed (``app.core.storage.change_log`` derives it
from the rows each committed unit of work added, altered or removed); the few changes kept outside
the database (the working profile) say it themselves. The GUI shell routes a :class:`Changes` to the
views whose data it touches, so nothing re-queries what did not change.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Flag, auto


class Data(Flag):
    """A kind of data a view shows; a write touches one or more."""

    NONE = 0
    EXAMPLES = auto()  # submitted, retracted or flagged examples, their model outputs and facets
    DRAFTS = auto()  # examples still being written (saved as the writer types)
    VALIDATIONS = auto()  # verdicts, a lead's adjudications included
    REVIEWS = auto()  # a lead's returns and acceptances
    ROUNDS = auto()  # rounds and their target models
    CONTEXTS = auto()  # a round's contexts and how often each was used
    MODELS = auto()  # model records (files, forms, provenance)
    PEOPLE = auto()  # profiles: names and roles
    PROFILE = auto()  # which profile works at this desk
    PREFERENCES = auto()  # the working person's own choices (the blur, topics opted out of): in the settings file
    TASKS = auto()  # task definitions
    TASK_SETTINGS = auto()  # the team's settings of a task: agreement threshold, quality, word lists
    SYNC = auto()  # what waits to be sent, and the sync's own bookkeeping
    WELLBEING = auto()  # exposure spans and breaks
    EVALUATION = auto()  # suites and leaderboard cells


@dataclass(frozen=True, slots=True)
class Changes:
    """The kinds of data one or more writes touched."""

    data: Data = Data.NONE

    def touches(self, watched: Data) -> bool:
        """Whether a view that shows ``watched`` must look again."""
        return bool(self.data & watched)

    def __or__(self, other: Changes) -> Changes:
        return Changes(self.data | other.data)

    def __bool__(self) -> bool:
        return bool(self.data)

    def __str__(self) -> str:
        names = [kind.name.lower() for kind in Data if kind and kind in self.data and kind.name]
        return ", ".join(names) or "nothing"


NO_CHANGES = Changes()
