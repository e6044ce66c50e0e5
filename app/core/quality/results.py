"""What the near-duplicate index answers (``app.core.quality.near_duplicates``): typed, frozen."""

from __future__ import annotations

import uuid
from dataclasses import dataclass


@dataclass(frozen=True)
class NearMatch:
    """An example near a text, with what a writer or lead needs to see of it."""

    example_id: uuid.UUID
    similarity: float
    text: str
    true_label: str | None
    round_number: int
    author_id: uuid.UUID
    author_name: str


@dataclass(frozen=True)
class Nearest:
    """The examples nearest a text (best first, down to ``SIMILARITY_FLOOR``) under ``threshold``."""

    matches: tuple[NearMatch, ...]
    threshold: float

    @property
    def near(self) -> tuple[NearMatch, ...]:
        """The matches that make the text a near-duplicate."""
        return tuple(m for m in self.matches if m.similarity >= self.threshold)

    @property
    def closest(self) -> NearMatch | None:
        return self.matches[0] if self.matches else None

    @property
    def novelty(self) -> float:
        """1 − the closest similarity; 1.0 when nothing is within ``SIMILARITY_FLOOR``."""
        return 1.0 - self.matches[0].similarity if self.matches else 1.0


@dataclass(frozen=True)
class ClusterMember:
    example_id: uuid.UUID
    round_number: int
    author_id: uuid.UUID
    similarity: float  # to the cluster's original (its first member: 1.0)


@dataclass(frozen=True)
class DuplicateCluster:
    """Near-duplicates linked by the threshold (single linkage), earliest submitted first: the first
    is the original, the others count as duplicates."""

    members: tuple[ClusterMember, ...]

    @property
    def example_ids(self) -> tuple[uuid.UUID, ...]:
        return tuple(m.example_id for m in self.members)

    @property
    def original_id(self) -> uuid.UUID:
        return self.members[0].example_id


@dataclass(frozen=True)
class DuplicateRate:
    """Of ``examples`` (an annotator's or a round's), ``duplicates`` repeat an earlier example."""

    key: str  # the author's id or the round number, as text
    label: str  # the author's name or "Round N"
    examples: int
    duplicates: int

    @property
    def rate(self) -> float:
        return self.duplicates / self.examples if self.examples else 0.0


@dataclass(frozen=True)
class NovelShare:
    """How many of a round's examples (checked: all, or a random sample) have no near-duplicate in
    an earlier round."""

    round_number: int
    examples: int
    checked: int
    novel: int

    @property
    def share(self) -> float:
        return self.novel / self.checked if self.checked else 1.0
