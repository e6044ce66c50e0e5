"""``dynadesk quality``: a task's data-quality figures per round: the artifact table, the
diversity figures and the alerts, as text or JSON."""

from __future__ import annotations

import json
import uuid

import click

from app.cli.base import Context, format_table, pass_context


def _share(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _artifact_rows(table, names=None) -> list[list]:
    return [[r.term, r.label, r.count, r.with_label, _share(r.share), _share(r.base_rate), f"{r.z:.1f}",
             ("*" if r.significant else "") + (f" rounds {','.join(map(str, r.rounds))}" if r.recurring else "")]
            for r in table.rows]


ARTIFACT_HEADERS = ["term", "label", "examples", "with label", "share", "base rate", "z", "mark"]


@click.command("quality")
@click.option("--task", "task_code", required=True)
@click.option("--round", "number", type=int, help="Only this round (tokens are still marked across all rounds).")
@click.option("--by", "by", type=click.Choice(["annotator"]), help="Also an artifact table per annotator.")
@click.option("--top", type=click.IntRange(1, 500), default=15, show_default=True, help="Rows per artifact table.")
@click.option("--no-embeddings", is_flag=True, help="Skip the embedding spread (it loads the target model).")
@click.option("--json", "as_json", is_flag=True, help="Print everything as one JSON document.")
@pass_context
def quality(obj: Context, task_code: str, number: int | None, by: str | None, top: int, no_embeddings: bool,
            as_json: bool) -> None:
    """Annotation artifacts (terms whose presence predicts the label: examples, conditional label
    share, z-score against the base rate; * marks z above the Bonferroni bound at 1 %) and
    diversity (distinct-1/2 on a seeded sample of 1,000, mean pairwise cosine distance of 300
    examples in the latest target model's sentence-embedding space) per round."""
    from app.core.errors import DynadeskError
    from app.core.quality.report import AlertThresholds, embedding_spreads, quality_report, with_spreads
    from app.core.quality.service import (
        duplicate_figures,
        load_quality_data,
        report_json,
        spread_model,
        with_duplicates,
    )

    desk = obj.desk
    data = load_quality_data(desk, task_code)
    known = data.round_numbers()
    if number is not None and number not in known:
        raise DynadeskError(f"{task_code} has no round {number}; its rounds are "
                            f"{', '.join(map(str, known)) or 'none yet'}.")
    lines = AlertThresholds.of(desk.tasks.settings(task_code).quality)
    report = quality_report(data, rounds=[number] if number is not None else None, by_annotator=by == "annotator",
                            top=top, thresholds=lines)
    report, duplicate_line = with_duplicates(report, duplicate_figures(desk, task_code, data), lines)
    task_id = desk.tasks.task(task_code).id
    round_id = None if number is None else uuid.UUID(data.round_ids[number])
    clusters = desk.near_duplicates.near_duplicate_clusters(task_id, round_id=round_id)
    text_of = dict(zip(data.ids, data.texts))
    model_name = None
    if not no_embeddings and data.ids:
        record = spread_model(desk, task_code)
        if record is None:
            click.echo("No round of this task has a target model: the embedding spread is left out.", err=True)
        else:
            from app.core.services.target_models import load_engine_for

            try:
                engine = load_engine_for(record)
            except DynadeskError as exc:
                click.echo(f"The embedding spread is left out: {exc}", err=True)
            else:
                try:
                    report = with_spreads(report, embedding_spreads(data, engine, [r.number for r in report.rounds]))
                    model_name = record.name
                finally:
                    engine.close()
    if as_json:
        document = {"task": task_code, **report_json(report, spread_model_name=model_name),
                    "clusters": [{"size": len(c.members), "original": text_of.get(c.original_id.hex, ""),
                                  "members": [{"id": str(m.example_id), "round": m.round_number,
                                               "similarity": m.similarity, "text": text_of.get(m.example_id.hex, "")}
                                              for m in c.members]} for c in clusters]}
        click.echo(json.dumps(document, indent=2, ensure_ascii=False))
        return
    if not data.ids:
        click.echo(f"{task_code} has no submitted examples yet: nothing to measure.")
        return
    click.echo(f"{task_code}: data quality per round ({len(data.ids):,} submitted examples)")
    click.echo("")
    click.echo(f"Near-duplicate clusters: {len(clusters):,}" + (f" (the {min(len(clusters), top)} largest)" if clusters else ""))
    click.echo(format_table(["size", "rounds", "original", "a near-duplicate"], [
        [len(c.members), ",".join(map(str, sorted({m.round_number for m in c.members}))),
         text_of.get(c.original_id.hex, "")[:60], text_of.get(c.members[1].example_id.hex, "")[:60]]
        for c in clusters[:top]]))
    if duplicate_line:
        click.echo(duplicate_line)
    click.echo("")
    click.echo("Diversity" + (f" (spread in the embedding space of {model_name})" if model_name else ""))
    click.echo(format_table(
        ["round", "examples", "distinct-1", "distinct-2", "sample", "spread", "spread sample", "novel"],
        [[r.number, r.examples, _number(r.distinct.distinct_1), _number(r.distinct.distinct_2), r.distinct.sample,
          _number(r.spread), r.spread_sample or "-", _share(r.novel_share)] for r in report.rounds]))
    for r in report.rounds:
        click.echo("")
        bound = "none tested" if r.artifacts.tested == 0 else f"* z > {r.artifacts.critical_z:.2f}"
        click.echo(f"Round {r.number}: artifacts ({r.examples:,} examples; terms in at least "
                   f"{r.artifacts.min_count} examples; {bound})")
        click.echo(format_table(ARTIFACT_HEADERS, _artifact_rows(r.artifacts)))
        for key, table in sorted(r.annotators.items(), key=lambda item: report.author_names.get(item[0], "")):
            click.echo("")
            click.echo(f"Round {r.number}, {report.author_names.get(key, key)} ({table.examples:,} examples)")
            click.echo(format_table(ARTIFACT_HEADERS, _artifact_rows(table)))
    click.echo("")
    click.echo("Alerts")
    click.echo("\n".join(f"  {a.message}" for a in report.alerts[:top]) if report.alerts else "  (none)")
    if len(report.alerts) > top:
        click.echo(f"  … and {len(report.alerts) - top} more (--top shows more, --json all)")
