"""View-models of the data-quality guard on the Create and Review pages: the novelty indicator a
writer sees while typing, the near-duplicate warning at submit, and the near-duplicate clusters a
lead browses in Review. Pure functions of the index's answers (``app.core.quality``)."""

from __future__ import annotations

import html
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from app.core.quality.settings import BOUNDS, QualitySettings
from app.core.quality.similarity import SIMILARITY_FLOOR
from app.core.wellbeing.blur import blurred

if TYPE_CHECKING:
    from app.core.quality.near_duplicates import DuplicateCluster, Nearest, NearMatch

SNIPPET = 160  # characters of an example shown in a banner or tooltip


class NoveltyLevel(StrEnum):
    NOVEL = "novel"  # nothing close in the round
    SIMILAR = "similar"  # close, not a near-duplicate
    DUPLICATE = "duplicate"  # at or above the task's threshold

    @property
    def colour(self) -> str:
        return {"novel": "#1e7b34", "similar": "#8a6100", "duplicate": "#b3261e"}[self.value]


@dataclass(frozen=True, slots=True)
class NoveltyView:
    """The indicator beside Submit: how far the draft is from the round's examples."""

    level: NoveltyLevel
    text: str  # "Novelty 82%"
    tooltip: str  # the closest example, or why there is none


@dataclass(frozen=True, slots=True)
class DuplicateWarningView:
    """The banner at submit: the nearest example and its similarity."""

    html: str
    similarity: float


def snippet(text: str, limit: int = SNIPPET) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def percent(value: float) -> str:
    return f"{value * 100:.0f}%"


def _who(match: NearMatch) -> str:
    return f"{match.author_name}, round {match.round_number}" + (f", “{match.true_label}”" if match.true_label else "")


def novelty_view(nearest: Nearest, blur_words: Sequence[str] = ()) -> NoveltyView:
    """``blur_words``: where the writer reads others' texts masked, the task's blur list."""
    closest = nearest.closest
    if closest is None:
        return NoveltyView(NoveltyLevel.NOVEL, "Novelty 100%",
                           f"No example of this round is {percent(SIMILARITY_FLOOR)} similar or more.")
    level = NoveltyLevel.DUPLICATE if closest.similarity >= nearest.threshold else NoveltyLevel.SIMILAR
    tip = (f"Closest example ({percent(closest.similarity)} similar; near-duplicates from "
           f"{percent(nearest.threshold)}):\n“{snippet(blurred(closest.text, blur_words))}”\n— {_who(closest)}")
    return NoveltyView(level, f"Novelty {percent(nearest.novelty)}", tip)


def duplicate_warning_view(nearest: Nearest, blur_words: Sequence[str] = ()) -> DuplicateWarningView | None:
    """The warning when the text is a near-duplicate of an example of the task; None when it is not.
    ``blur_words``: where the writer reads others' texts masked, the task's blur list."""
    near = nearest.near
    if not near:
        return None
    first = near[0]
    same = "the same text as" if first.similarity >= 1.0 else f"{percent(first.similarity)} similar to"
    more = f" (and {len(near) - 1} more near-duplicate{'s' if len(near) > 2 else ''})" if len(near) > 1 else ""
    body = (f"<b>Near-duplicate.</b> This is {same} an example already in the task{more}: "
            f"<i>“{html.escape(snippet(blurred(first.text, blur_words)))}”</i> — {html.escape(_who(first))}. "
            "Submit it anyway, or go back and change it (nothing is lost).")
    return DuplicateWarningView(body, first.similarity)


@dataclass(frozen=True, slots=True)
class ClusterRowView:
    """One example of a cluster in the Review's near-duplicates list."""

    example_id: uuid.UUID
    cluster: int  # 1-based, largest cluster first
    first: bool  # the cluster's original (earliest)
    similarity: float  # to the original
    text: str
    author: str
    round_number: int


@dataclass(frozen=True, slots=True)
class ClustersView:
    rows: tuple[ClusterRowView, ...]
    summary: str


def clusters_view(clusters: list[DuplicateCluster], summaries: Mapping[uuid.UUID, tuple[str, str]],
                  threshold: float, *, annotator: uuid.UUID | None = None, shown: int = 200) -> ClustersView:
    """Rows of the largest ``shown`` clusters; ``summaries``: (text, author) by example id. With
    ``annotator``, only the clusters that hold an example of theirs."""
    if annotator is not None:
        clusters = [c for c in clusters if any(m.author_id == annotator for m in c.members)]
    rows = []
    for number, cluster in enumerate(clusters[:shown], start=1):
        for position, member in enumerate(cluster.members):
            text, author = summaries.get(member.example_id, ("", "?"))
            rows.append(ClusterRowView(member.example_id, number, position == 0, member.similarity, text, author,
                                       member.round_number))
    examples = sum(len(c.members) for c in clusters)
    if not clusters:
        summary = f"No near-duplicates (similarity {percent(threshold)} or more) among these examples."
    else:
        summary = (f"{len(clusters):,} cluster{'s' if len(clusters) != 1 else ''} of near-duplicates "
                   f"(similarity ≥ {percent(threshold)}), {examples:,} examples"
                   + (f"; the largest {shown} are listed" if len(clusters) > shown else "") + ".")
    return ClustersView(tuple(rows), summary)


@dataclass(frozen=True, slots=True)
class QualitySettingsView:
    """A task's data-quality settings as the lead edits them (percentages as whole numbers)."""

    task_name: str
    near_percent: int
    token_z: float
    duplicate_rate_percent: int
    near_range: tuple[int, int]
    token_range: tuple[float, float]
    rate_range: tuple[int, int]


def quality_settings_view(task_name: str, settings: QualitySettings) -> QualitySettingsView:
    near, token, rate = (BOUNDS[name] for name in ("near_threshold", "token_association_threshold",
                                                   "duplicate_rate_threshold"))
    return QualitySettingsView(task_name, round(settings.near_threshold * 100), settings.token_association_threshold,
                               round(settings.duplicate_rate_threshold * 100),
                               (round(near[0] * 100), round(near[1] * 100)), token,
                               (round(rate[0] * 100), round(rate[1] * 100)))


def chosen_settings(near_percent: int, token_z: float, duplicate_rate_percent: int) -> QualitySettings:
    """The settings a lead chose in the dialog (raises InvalidQualitySettings, with what is wrong)."""
    return QualitySettings(near_threshold=near_percent / 100, token_association_threshold=float(token_z),
                           duplicate_rate_threshold=duplicate_rate_percent / 100)


def quality_settings_message(settings: QualitySettings) -> str:
    return (f"Near-duplicates from {percent(settings.near_threshold)} similarity; alerts at a token z-score of "
            f"{settings.token_association_threshold:g} and a writer's duplicate rate of "
            f"{percent(settings.duplicate_rate_threshold)}. In force here, and for your team once you sync.")
