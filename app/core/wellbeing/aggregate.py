"""Exposure leaves a desk only as team aggregates: one row per team and day, never a row per
person. A team-day with fewer than ``min_group`` people is withheld (its figures left blank, marked
"withheld"): with two people, a total less one person's own is the other's."""

from __future__ import annotations

import csv
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from app.core.errors import DynadeskError
from app.core.wellbeing.figures import PersonDay, TeamLimits

MIN_GROUP = 3
COLUMNS = ("team", "day", "people", "writing_min", "validating_min", "reviewing_min", "total_min",
           "mean_min_per_person", "people_over_daily_limit", "breaks_taken", "snoozes", "withheld")


@dataclass(frozen=True)
class TeamDay:
    team: str
    day: date
    people: int
    writing_min: float
    validating_min: float
    reviewing_min: float
    breaks_taken: int
    snoozes: int
    people_over_daily_limit: int

    @property
    def total_min(self) -> float:
        return self.writing_min + self.validating_min + self.reviewing_min


def team_days(days: Iterable[PersonDay], teams: Mapping[uuid.UUID, str], limits: TeamLimits) -> list[TeamDay]:
    groups: dict[tuple[str, date], list[PersonDay]] = {}
    for day in days:
        groups.setdefault((teams.get(day.person_id, "this desk"), day.day), []).append(day)
    return [TeamDay(team, day, len(rows), sum(r.writing_min for r in rows), sum(r.validating_min for r in rows),
                    sum(r.reviewing_min for r in rows), sum(r.breaks_taken for r in rows),
                    sum(r.snoozes for r in rows), sum(r.total_min > limits.daily_min for r in rows))
            for (team, day), rows in sorted(groups.items())]


def csv_rows(rows: Iterable[TeamDay], min_group: int = MIN_GROUP) -> list[list[str]]:
    if min_group < 2:
        raise DynadeskError("Groups of one would show one person's exposure; --min-group must be at least 2.")
    out = []
    for row in rows:
        if row.people < min_group:
            out.append([row.team, row.day.isoformat(), f"<{min_group}", *[""] * 8, "yes"])
            continue
        out.append([row.team, row.day.isoformat(), str(row.people), f"{row.writing_min:.1f}",
                    f"{row.validating_min:.1f}", f"{row.reviewing_min:.1f}", f"{row.total_min:.1f}",
                    f"{row.total_min / row.people:.1f}", str(row.people_over_daily_limit), str(row.breaks_taken),
                    str(row.snoozes), "no"])
    return out


def write_csv(rows: Iterable[TeamDay], path: Path, min_group: int = MIN_GROUP) -> int:
    """Write the aggregate table; returns how many team-days were withheld as too small."""
    lines = csv_rows(rows, min_group)
    try:
        with path.open("w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(COLUMNS)
            writer.writerows(lines)
    except OSError as exc:
        raise DynadeskError(f"Could not write {path}: {exc.strerror or exc}; choose another file.") from exc
    return sum(line[-1] == "yes" for line in lines)
