"""The adaptive suite as a split: the task's validated variants (``desk.adaptive_suite.cases``), scored by the
comparison, the leaderboard and ``dynadesk eval`` beside the held-out and base test splits. Qt-free.

Which cases (one rule, stated in every report that scores the suite): every validated variant, unless a scored
model trained on validated variants (``dynadesk train --variants``): then only the variants of held-out seeds,
which no desk-trained model ever learns from (a seed and all its variants fall on one side, as training splits
them: ``variant_training.seed_sides``). A model is never scored on suite cases it trained on.

A case's resampling unit is its seed (``extra["group"]``): the variants of one seed are not independent, so a
bootstrap draws a topic whole. Its ``functionality`` is the topic family (the edit type), so the evaluation
service's per-functionality figures are the per-family figures.

    split = adaptive_suite_split(desk, "hate_speech", held_out_only=trained_on_variants(manifest, records))
    split.eval_set, split.rule
    families = family_rows(split.eval_set.cases, {"current": labels_now, "candidate": labels_new})
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from app.core.services.evaluation_data import Case, EvalSet

ADAPTIVE_KEY = "adaptive-suite"
ADAPTIVE_KIND = "adaptive-suite"


@dataclass(frozen=True)
class SuiteSplit:
    eval_set: EvalSet  # no cases: the task has no validated variant (on the side scored)
    rule: str  # which cases were scored, and why, in a sentence
    held_out_only: bool
    validated: int  # every validated variant of the task
    seeds: int  # topics among the cases scored

    def to_json(self) -> dict[str, Any]:
        return {"key": self.eval_set.key, "rule": self.rule, "held_out_only": self.held_out_only,
                "validated": self.validated, "cases": len(self.eval_set.cases), "seeds": self.seeds}


def manifest_trained_on_variants(manifest: Mapping[str, Any] | None) -> bool:
    """Whether the training a manifest records took validated variants."""
    return bool(((manifest or {}).get("variants") or {}).get("count"))


def record_trained_on_variants(record: Any) -> bool:
    """Whether a model record's provenance says its training took validated variants (its training data's
    summary, as ``dynadesk train --variants`` recorded it)."""
    training = (getattr(record, "provenance", None) or {}).get("training") or {}
    summary = (training.get("data") or {}).get("summary") or {}
    rows = (training.get("rounds") or {}).get("rows") or {}
    return bool(((summary.get("variants") or {}).get("taken")) or rows.get("variants"))


def trained_on_variants(manifest: Mapping[str, Any] | None = None, records: Iterable[Any] = ()) -> bool:
    """Whether any scored model trained on validated variants: the candidate (its manifest) or a model record."""
    return manifest_trained_on_variants(manifest) or any(record_trained_on_variants(r) for r in records)


def suite_case(case: Any, definition: Any) -> Case:
    """One validated variant (an ``adaptive_suite`` ``SuiteCase``) as an evaluation case."""
    from app.core.services.target_models import model_input

    item = model_input(definition, case.inputs) if case.inputs else case.text
    seed = str(case.seed_id)
    return Case(str(case.example_id), case.text, case.label, functionality=case.family or "written",
                target=case.group or None, input=list(item) if isinstance(item, (list, tuple)) else None,
                extra={"group": f"seed:{seed}", "seed_id": seed, "templ_id": seed, "rule": case.rule})


def adaptive_suite_split(desk: Any, task_code: str, *, held_out_only: bool,
                         exclude_ids: Iterable[str] = ()) -> SuiteSplit:
    """The adaptive suite's cases to score: all validated variants, or with ``held_out_only`` those of
    held-out seeds; never ``exclude_ids`` (variants a scored model's manifest says it trained on)."""
    from app.core.next_round.variant_training import seed_sides

    definition = desk.tasks.definition_by_code(task_code)
    cases = list(desk.adaptive_suite.cases(task_code))
    excluded = {str(i) for i in exclude_ids}
    if held_out_only:
        sides = seed_sides(desk, [c.seed_id for c in cases])
        chosen = [c for c in cases if sides.get(c.seed_id) is not None and sides[c.seed_id].held_out]
    else:
        chosen = list(cases)
    chosen = [c for c in chosen if str(c.example_id) not in excluded]
    seeds = len({c.seed_id for c in chosen})
    if held_out_only:
        rule = (f"Adaptive suite: the {len(chosen):,} validated variants of {seeds:,} held-out seeds (of "
                f"{len(cases):,} validated variants): a compared model trained on validated variants, and a model is "
                "never scored on suite cases it trained on; variants of held-out seeds are never trained on.")
        name = f"Adaptive suite, held-out seeds ({len(chosen):,} variants of {seeds:,} seeds)"
    else:
        rule = (f"Adaptive suite: all {len(chosen):,} validated variants of {seeds:,} seeds; no compared model "
                "trained on validated variants.")
        name = f"Adaptive suite ({len(chosen):,} validated variants of {seeds:,} seeds)"
    eval_set = EvalSet(ADAPTIVE_KEY, name, ADAPTIVE_KIND, [suite_case(c, definition) for c in chosen],
                       "validated variants of the task's seeds (dynadesk suite --task " + task_code + ")")
    return SuiteSplit(eval_set, rule, held_out_only, len(cases), seeds)


def family_rows(cases: Sequence[Case], predicted: Mapping[str, Mapping[str, str]]) -> list[dict[str, Any]]:
    """Per topic family (``adaptive_suite.score_suite``): n, and for each model (name -> case id -> label) how many
    variants it gets wrong and its accuracy; families in name order."""
    from app.core.adaptive_suite.scoring import score_suite

    scores = {}
    for model, labels in predicted.items():
        scores[model] = score_suite([_as_suite_case(c) for c in cases], [labels[c.id] for c in cases])
    families = sorted({c.functionality or "written" for c in cases})
    rows = []
    for family in families:
        row: dict[str, Any] = {"family": family}
        for model, score in scores.items():
            wrong, n = score.per_family.get(family, (0, 0))
            row["n"] = n
            row[model] = {"wrong": wrong, "accuracy": (n - wrong) / n if n else None}
        rows.append(row)
    return rows


def _as_suite_case(case: Case) -> Any:
    """An evaluation case back as the ``SuiteCase`` ``score_suite`` reads (seed, family, label)."""
    import uuid

    from app.core.adaptive_suite.topics import SuiteCase

    seed = uuid.UUID(case.extra["seed_id"])
    return SuiteCase(example_id=uuid.UUID(case.id), seed_id=seed, family=case.functionality or "written",
                     rule=str(case.extra.get("rule") or ""), group=case.target or "", text=case.text, inputs={},
                     label=case.gold, round_number=0)
