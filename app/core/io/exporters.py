"""Exporting the collected data: our JSONL (which imports back losslessly), a flat CSV, and a
Hugging Face ``datasets`` folder. People are replaced by salted per-round pseudonyms unless the
user keeps identities (for moving work between their own desks).
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import json
import os
import secrets
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from sqlalchemy import select
from sqlalchemy.orm import selectinload

from app.core.domain import ExampleStatus
from app.core.errors import DynadeskError
from app.core.io.importers import NAMESPACE
from app.core.io.records import dump_context, dump_example, dump_model, dump_person, dump_round, dump_validation
from app.core.storage.models import Context, Example, ModelRecord, Person, Round, RoundModel, Task, Validation
from app.core.tasks.definition import MetadataKind, TaskDefinition

FORMATS = ("jsonl", "csv", "hf")
SALT_KEY = "export_salt"


class Pseudonyms:
    """person × round → a stable pseudonym; without the salt nobody can link it back."""

    def __init__(self, salt: str | None):
        self.salt = salt

    def name(self, person_id: uuid.UUID, round_id: uuid.UUID) -> str:
        if self.salt is None:
            raise RuntimeError("identities are kept; there are no pseudonyms")
        digest = hmac.new(self.salt.encode(), f"{round_id}:{person_id}".encode(), hashlib.sha256).hexdigest()
        return f"annotator-{digest[:12]}"

    def person_id(self, person_id: uuid.UUID, round_id: uuid.UUID) -> uuid.UUID:
        if self.salt is None:
            return person_id
        return uuid.uuid5(NAMESPACE, "pseudonym:" + self.name(person_id, round_id))


@dataclass
class ExportReport:
    path: Path
    format: str
    counts: dict[str, int] = field(default_factory=dict)
    pseudonymised: bool = True

    def summary(self) -> str:
        counts = ", ".join(f"{n} {kind}" for kind, n in sorted(self.counts.items())) or "nothing"
        who = "people replaced by per-round pseudonyms" if self.pseudonymised else "real identities kept"
        return f"Exported {counts} to {self.path} ({self.format}; {who})."


class _Snapshot:
    """Everything one export needs, read in one consistent read transaction."""

    def __init__(self, session, task_code: str | None):
        tasks = {t.id: t for t in session.scalars(select(Task))}
        query = (
            select(Example)
            .where(Example.status != ExampleStatus.DRAFT.value)
            .options(selectinload(Example.outputs))
            .order_by(Example.submitted_at, Example.id)
        )
        if task_code is not None:
            task = next((t for t in tasks.values() if t.code == task_code), None)
            if task is None:
                raise DynadeskError(f"There is no task '{task_code}'.")
            query = query.where(Example.task_id == task.id)
        self.tasks = tasks
        self.examples = _parents_first(list(session.scalars(query)))
        example_ids = {e.id for e in self.examples}
        round_ids = {e.round_id for e in self.examples}
        self.rounds = list(session.scalars(select(Round).where(Round.id.in_(round_ids)).order_by(Round.number)))
        self.round_models: dict[uuid.UUID, list[uuid.UUID]] = defaultdict(list)
        for link in session.scalars(select(RoundModel).where(RoundModel.round_id.in_(round_ids)).order_by(RoundModel.position)):
            self.round_models[link.round_id].append(link.model_id)
        model_ids = {o.model_id for e in self.examples for o in e.outputs} | {
            m for ids in self.round_models.values() for m in ids
        }
        self.models = list(session.scalars(select(ModelRecord).where(ModelRecord.id.in_(model_ids))))
        context_ids = {e.context_id for e in self.examples if e.context_id}
        self.contexts = list(session.scalars(select(Context).where(Context.id.in_(context_ids))))
        self.validations = [
            v for v in session.scalars(select(Validation).order_by(Validation.created_at)) if v.example_id in example_ids
        ]
        people_ids = {e.author_id for e in self.examples} | {v.validator_id for v in self.validations}
        self.people = {p.id: p for p in session.scalars(select(Person).where(Person.id.in_(people_ids)))}
        self.round_of = {e.id: e.round_id for e in self.examples}


def _parents_first(examples: list[Example]) -> list[Example]:
    """Order examples so that an original always comes before its perturbations."""
    by_id = {e.id: e for e in examples}
    done: set[uuid.UUID] = set()
    ordered: list[Example] = []

    def visit(example: Example) -> None:
        chain = []
        while example is not None and example.id not in done:
            chain.append(example)
            example = by_id.get(example.perturbation_of) if example.perturbation_of else None
        for item in reversed(chain):
            done.add(item.id)
            ordered.append(item)

    for example in examples:
        visit(example)
    return ordered


def _records(snapshot: _Snapshot, names: Pseudonyms) -> Iterator[dict]:
    task_code = {tid: t.code for tid, t in snapshot.tasks.items()}
    if names.salt is None:
        for person in snapshot.people.values():
            yield dump_person(person)
    else:
        seen: set[uuid.UUID] = set()
        pairs = [(e.author_id, e.round_id) for e in snapshot.examples] + [
            (v.validator_id, snapshot.round_of[v.example_id]) for v in snapshot.validations
        ]
        for person_id, round_id in pairs:
            pseudo = names.person_id(person_id, round_id)
            if pseudo not in seen:
                seen.add(pseudo)
                yield dump_person(snapshot.people[person_id], person_id=pseudo, name=names.name(person_id, round_id))
    for model in snapshot.models:
        yield dump_model(model, task_code.get(model.task_id))
    for round_ in snapshot.rounds:
        yield dump_round(round_, task_code[round_.task_id], snapshot.round_models.get(round_.id, []))
    for context in snapshot.contexts:
        yield dump_context(context)
    for example in snapshot.examples:
        yield dump_example(example, task_code[example.task_id], author_id=names.person_id(example.author_id, example.round_id))
    for validation in snapshot.validations:
        yield dump_validation(validation,
                              validator_id=names.person_id(validation.validator_id, snapshot.round_of[validation.example_id]))


def _write_atomically(path: Path, write) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.partial")
    try:
        with tmp.open("w", encoding="utf-8", newline="") as handle:
            write(handle)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _flat_row(example: Example, definition: TaskDefinition, task_code: str, round_number: int, author: str) -> dict:
    """One example as flat, consistently typed columns (for CSV and ``datasets``)."""
    row = {"id": str(example.id), "task": task_code, "round": round_number, "author": author}
    for spec in definition.inputs:
        row[spec.name] = example.inputs.get(spec.name, "")
    if definition.is_extractive:
        answer = example.answer or {}
        row.update(answer_text=answer.get("text", ""), answer_start=answer.get("start", -1))
    else:
        row["label"] = example.true_label or ""
        row["label_id"] = definition.labels.index(example.true_label) if example.true_label in definition.labels else -1
    first = example.outputs[0] if example.outputs else None
    row["model_label"] = first.label if first else ""
    row["model_probabilities"] = json.dumps(first.probabilities if first else {}, ensure_ascii=False)
    row["model_sha256"] = first.model_sha256 if first else ""
    row["model_fooled"] = bool(example.model_fooled)
    for spec in definition.metadata:
        value = example.meta.get(spec.name)
        row[spec.name] = list(value or []) if spec.kind == MetadataKind.MULTI_CHOICE else (value or "")
    row.update(
        status=example.status,
        validation_state=example.validation_state,
        decided_verdict=example.decided_verdict or "",
        decided_label=example.decided_label or "",
        perturbation_of=str(example.perturbation_of) if example.perturbation_of else "",
        edit_distance=example.edit_distance if example.edit_distance is not None else -1,
        **_assistance_columns(example.assistance),
        time_spent_ms=example.time_spent_ms,
        submitted_at=example.submitted_at.isoformat() if example.submitted_at else "",
    )
    return row


def _assistance_columns(record: dict | None) -> dict:
    """The writing assistant's record as flat columns ("" / -1 where there is none)."""
    a = record or {}

    def number(key: str) -> int:
        return a[key] if isinstance(a.get(key), int) else -1

    return {"assistant_arm": a.get("arm") or "", "assistant_session": number("session"),
            "suggestion_applied": bool(a.get("applied")), "suggestion_generator": a.get("generator") or "",
            "suggestion_edit_type": a.get("edit_type") or "", "suggestion_text": a.get("applied_text") or "",
            "suggestion_edit_distance": number("edit_distance")}


def _hf_features(definition: TaskDefinition) -> list[dict]:
    features = [{"name": "id", "dtype": "string"}, {"name": "task", "dtype": "string"},
                {"name": "round", "dtype": "int64"}, {"name": "author", "dtype": "string"}]
    features += [{"name": spec.name, "dtype": "string"} for spec in definition.inputs]
    if definition.is_extractive:
        features += [{"name": "answer_text", "dtype": "string"}, {"name": "answer_start", "dtype": "int64"}]
    else:
        features += [{"name": "label", "dtype": "string"}, {"name": "label_id", "dtype": "int64"}]
    features += [{"name": n, "dtype": "string"} for n in ("model_label", "model_probabilities", "model_sha256")]
    features += [{"name": "model_fooled", "dtype": "bool"}]
    for spec in definition.metadata:
        if spec.kind == MetadataKind.MULTI_CHOICE:
            features.append({"name": spec.name, "sequence": "string"})
        else:
            features.append({"name": spec.name, "dtype": "string"})
    features += [{"name": n, "dtype": "string"} for n in ("status", "validation_state", "decided_verdict",
                                                          "decided_label", "perturbation_of")]
    features += [{"name": "edit_distance", "dtype": "int64"}]
    features += [{"name": "assistant_arm", "dtype": "string"}, {"name": "assistant_session", "dtype": "int64"},
                 {"name": "suggestion_applied", "dtype": "bool"}]
    features += [{"name": n, "dtype": "string"} for n in ("suggestion_generator", "suggestion_edit_type",
                                                          "suggestion_text")]
    features += [{"name": "suggestion_edit_distance", "dtype": "int64"}, {"name": "time_spent_ms", "dtype": "int64"},
                 {"name": "submitted_at", "dtype": "string"}]
    return features


def export(desk, path: str | Path, format: str = "jsonl", *, task_code: str | None = None,
           keep_identities: bool = False, salt: str | None = None) -> ExportReport:
    if format not in FORMATS:
        raise DynadeskError(f"Unknown export format '{format}'; choose one of {', '.join(FORMATS)}.")
    if format != "jsonl" and task_code is None:
        raise DynadeskError(f"A {format} export holds one task; name it with --task.")
    path = Path(path)
    if not keep_identities and salt is None:
        salt = desk.db.ensure_meta(SALT_KEY, lambda: secrets.token_hex(32))
    names = Pseudonyms(None if keep_identities else salt)
    report = ExportReport(path, format, pseudonymised=not keep_identities)
    with desk.db.read() as session:
        snapshot = _Snapshot(session, task_code)

    if format == "jsonl":
        def write(handle) -> None:
            for record in _records(snapshot, names):
                handle.write(json.dumps(record, ensure_ascii=False, sort_keys=True) + "\n")
                report.counts[record["record"]] = report.counts.get(record["record"], 0) + 1

        _write_atomically(path, write)
        return report

    task = next(t for t in snapshot.tasks.values() if t.code == task_code)
    definition = desk.tasks.definition(task.id)
    round_number = {r.id: r.number for r in snapshot.rounds}

    def author(example: Example) -> str:
        if keep_identities:
            return snapshot.people[example.author_id].display_name
        return names.name(example.author_id, example.round_id)

    rows = [_flat_row(e, definition, task.code, round_number[e.round_id], author(e)) for e in snapshot.examples]
    report.counts["examples"] = len(rows)
    if format == "csv":
        columns = [f["name"] for f in _hf_features(definition)]

        def write_csv(handle) -> None:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            for row in rows:
                writer.writerow({k: "|".join(v) if isinstance(v, list) else v for k, v in row.items()})

        _write_atomically(path, write_csv)
        return report

    # Hugging Face datasets folder: one JSONL file per round (a split each) and a dataset card.
    splits: dict[int, list[dict]] = defaultdict(list)
    for row in rows:
        splits[row["round"]].append(row)
    sizes = {}
    for number, split_rows in sorted(splits.items()):
        split_path = path / "data" / f"round{number}.jsonl"
        _write_atomically(split_path,
                          lambda h, split_rows=split_rows: h.writelines(json.dumps(r, ensure_ascii=False) + "\n" for r in split_rows))
        sizes[number] = split_path.stat().st_size
    features = _hf_features(definition)
    card = {
        "configs": [{"config_name": "default",
                     "data_files": [{"split": f"round{n}", "path": f"data/round{n}.jsonl"} for n in sorted(splits)]}],
        "dataset_info": {"features": features,
                         "splits": [{"name": f"round{n}", "num_bytes": sizes[n], "num_examples": len(splits[n])}
                                    for n in sorted(splits)]},
    }
    labels = ", ".join(definition.labels) if definition.labels else "extractive answer spans"
    body = (
        f"# {definition.name}: adversarial examples collected with Dynadesk\n\n"
        f"One split per round. Labels: {labels}. `model_fooled` says whether the round's target model(s) "
        f"got the example wrong when it was written.\n\n"
        f"{'People are replaced by salted per-round pseudonyms.' if not keep_identities else ''}\n"
    )
    if definition.content_warning:
        body += f"\n**Content warning.** {definition.content_warning}\n"
    _write_atomically(path / "README.md", lambda h: h.write("---\n" + yaml.safe_dump(card, sort_keys=False) + "---\n\n" + body))
    return report
