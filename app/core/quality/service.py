"""The data-quality figures of a task on a desk: what to read, which model measures the spread,
and the report as plain data (for ``dynadesk quality --json``)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, replace
from typing import Any

from app.core.quality.near_duplicates import DuplicateRate
from app.core.quality.report import Alert, AlertThresholds, QualityData, QualityReport, duplicate_alerts
from app.core.storage.models import ModelRecord


def load_quality_data(desk: Any, task_code: str) -> QualityData:
    task = desk.tasks.task(task_code)
    return QualityData.load(desk.db, task.id, desk.tasks.definition_by_code(task_code).labels)


@dataclass(frozen=True)
class DuplicateFigures:
    """What the near-duplicate index (h21-dups: the one definition of "near") says about a task:
    each later round's novel share, and duplicate rates per writer and per round. Computing them
    walks the index (seconds over 100k examples): the dashboard keeps them per state of the data."""

    novel: dict[int, float]  # round number (not the first) -> share of its examples novel to earlier rounds
    writers: tuple[DuplicateRate, ...]
    rounds: tuple[DuplicateRate, ...]


def duplicate_figures(desk: Any, task_code: str, data: QualityData) -> DuplicateFigures:
    index, task_id = desk.near_duplicates, desk.tasks.task(task_code).id
    later = sorted(data.round_ids)[1:]
    novel = {number: index.novel_share(task_id, uuid.UUID(data.round_ids[number])).share for number in later}
    return DuplicateFigures(novel, tuple(index.duplicate_rates(task_id, by="annotator")),
                            tuple(index.duplicate_rates(task_id, by="round")))


def with_duplicates(report: QualityReport, figures: DuplicateFigures,
                    thresholds: AlertThresholds) -> tuple[QualityReport, str]:
    """The report with each round's novel share and the writers' duplicate-rate alerts, and a line
    of duplicate rates per writer and per round for display."""
    rounds = tuple(replace(r, novel_share=figures.novel[r.number]) if r.number in figures.novel else r
                   for r in report.rounds)
    writers = figures.writers
    alerts = duplicate_alerts({(None, w.key): (w.rate, w.examples) for w in writers},
                              {w.key: w.label for w in writers}, thresholds)
    line = ("Duplicate rate per writer: " + ", ".join(f"{w.label} {w.rate:.0%}" for w in writers[:6])
            + (f" (and {len(writers) - 6} more)" if len(writers) > 6 else "")
            + " · per round: " + ", ".join(f"R{r.key} {r.rate:.0%}" for r in figures.rounds)) if writers else ""
    return replace(report, rounds=rounds, alerts=report.alerts + tuple(alerts)), line


def spread_model(desk: Any, task_code: str) -> ModelRecord | None:
    """The model whose embedding space measures every round's spread: the first target model of the
    latest round that has one (one space for all rounds, so their spreads compare)."""
    for round_ in reversed(desk.tasks.rounds(task_code)):
        records = [r for r in desk.models.round_models(round_.id) if r.format != "imported"]
        if records:
            return records[0]
    return None


def _table_json(table: Any, names: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "examples": table.examples, "base_rates": table.base_rates, "tested": table.tested,
        "critical_z": table.critical_z if table.critical_z != float("inf") else None,
        "min_count": table.min_count,
        "rows": [{"term": r.term, "label": r.label, "count": r.count, "with_label": r.with_label,
                  "share": r.share, "base_rate": r.base_rate, "z": r.z, "significant": r.significant,
                  "rounds": list(r.rounds)} for r in table.rows],
    }


def _alert_json(alert: Alert) -> dict[str, Any]:
    return {"kind": alert.kind, "round": alert.round, "subject": alert.subject, "value": alert.value,
            "threshold": alert.threshold, "message": alert.message}


def report_json(report: QualityReport, *, spread_model_name: str | None = None) -> dict[str, Any]:
    return {
        "rounds": [{
            "round": r.number, "examples": r.examples,
            "distinct_1": r.distinct.distinct_1, "distinct_2": r.distinct.distinct_2,
            "distinct_sample": r.distinct.sample,
            "embedding_spread": r.spread, "spread_sample": r.spread_sample, "spread_model": spread_model_name,
            "novel_share": r.novel_share,
            "artifacts": _table_json(r.artifacts),
            "annotators": {report.author_names.get(key, key): _table_json(table)
                           for key, table in r.annotators.items()},
        } for r in report.rounds],
        "alerts": [_alert_json(a) for a in report.alerts],
    }
