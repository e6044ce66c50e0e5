"""Importing data sets: HateCheck suites, ANLI, the Dynamically Generated Hate Speech Dataset,
and our own JSONL.

An import is one unit of work: every row goes in, or (when any row is bad) nothing does,
unless the user asks to skip bad rows. Records get identifiers derived from the source's own
ids, so importing the same file twice adds nothing the second time. Formats are registered
classes; adding one means adding one class.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session

from app.core.domain import MAX_ROUND_NUMBER, ExampleStatus, ModelFormat, ModelOutput, Role, Span, SyncState, utcnow
from app.core.errors import DynadeskError, ImportFailed, ImportProblem, InvalidExample
from app.core.io.records import RecordWriter, read_record
from app.core.io.rows import csv_table, json_lines, read_text, whole_number
from app.core.limits import record_problems
from app.core.storage.models import (
    Context,
    Example,
    ExampleFacet,
    ModelOutputRow,
    ModelRecord,
    Person,
    Round,
    Suite,
    SuiteCase,
    Task,
)
from app.core.tasks.content import Content, check_content, facet_values, written_text
from app.core.tasks.definition import TaskDefinition
from app.core.tasks.fooling import check_outputs, is_fooled
from app.core.tasks.splits import GROUP_KEY
from app.core.text import content_hash, printable, word_edits

GROUP_FIELD = "\x00group"  # a read row's split group (no CSV header can be this)
NAMESPACE = uuid.UUID("6f1c7a52-4a8e-4bb5-9d57-0e8d3c1c5a10")


def stable_id(*parts: str) -> uuid.UUID:
    return uuid.uuid5(NAMESPACE, "\x1f".join(parts))


def imported_model_sha(name: str) -> str:
    """Models known only by their recorded predictions get a stable stand-in checksum."""
    return hashlib.sha256(f"imported-model:{name}".encode()).hexdigest()


@dataclass
class ImportReport:
    format: str
    source: str
    added: dict[str, int] = field(default_factory=dict)
    already_present: int = 0
    problems: list[ImportProblem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def count(self, kind: str, n: int = 1) -> None:
        self.added[kind] = self.added.get(kind, 0) + n

    def summary(self) -> str:
        added = ", ".join(f"{n} {kind}" for kind, n in sorted(self.added.items())) or "nothing new"
        parts = [f"Imported {self.source} ({self.format}): {added}."]
        if self.already_present:
            parts.append(f"{self.already_present} record(s) were already present and left as they were.")
        if self.problems:
            parts.append(f"Skipped {len(self.problems)} bad row(s):")
            parts.extend(f"  {p}" for p in self.problems[:50])
            if len(self.problems) > 50:
                parts.append(f"  ... and {len(self.problems) - 50} more")
        parts.extend(f"Warning: {w}" for w in self.warnings)
        return "\n".join(parts)


class Importer:
    """One file format. ``parse`` yields (line, row) or (line, problem); ``store`` writes the rows."""

    name: ClassVar[str]
    description: ClassVar[str]
    default_task: ClassVar[str | None] = None

    def __init__(self, desk, path: Path, report: ImportReport, task_code: str | None, round_number: int | None,
                 group_column: str | None = None):
        self.desk = desk
        self.path = path
        self.report = report
        self.task_code = task_code or self.default_task
        self.round_number = round_number
        self.group_column = group_column

    def prepare(self, rows: list[tuple[int, Any]]) -> None:
        """Work done before the import's unit of work opens (e.g. running a model); nothing by default."""

    def parse(self) -> Iterator[tuple[int, Any]]:
        raise NotImplementedError

    def store(self, session: Session, rows: list[tuple[int, Any]]) -> None:
        raise NotImplementedError

    def csv_rows(self, required: set[str]) -> Iterator[tuple[int, dict[str, str] | ImportProblem]]:
        header, rows = csv_table(read_text(self.path))
        missing = required - set(header)
        if missing:
            raise DynadeskError(f"{self.path}: this is not a {self.name} file; it lacks the column(s) {sorted(missing)}.")
        if self.group_column and self.group_column not in header:
            raise DynadeskError(f"{self.path} has no column '{self.group_column}' to group by (--group-column); its "
                                f"columns are {', '.join(header)}.")
        return (self.with_group(line, row) for line, row in rows)

    def with_group(self, line: int, row: dict[str, str] | ImportProblem) -> tuple[int, dict[str, str] | ImportProblem]:
        """A row as read, with its split group (``--group-column``) under ``GROUP_FIELD``; an empty group is a bad row."""
        if not self.group_column or isinstance(row, ImportProblem):
            return line, row
        value = (row.get(self.group_column) or "").strip()
        if not value:
            return line, ImportProblem(line, f"{self.group_column} is empty; with --group-column every row needs a group")
        return line, {**row, GROUP_FIELD: f"{self.group_column}={value}"}

    def group_origin(self, row: dict) -> dict[str, str]:
        """The part of an example's origin that names its split group (see ``app.core.tasks.splits``)."""
        return {GROUP_KEY: row[GROUP_FIELD]} if row.get(GROUP_FIELD) else {}

    def first_row_of(self, seen: dict, key: str, line: int, row: dict, name: str) -> bool | ImportProblem:
        """True for the first row with id ``key``; False for an exact repeat of an earlier row (noted
        as a warning: it is read once); a problem for an empty id, or one reused with other content."""
        if not key:
            return ImportProblem(line, f"{name} is empty")
        repeat = repeated(seen, key, line, row, name)
        if isinstance(repeat, str):
            self.report.warnings.append(repeat)
            return False
        return repeat or True

    def task(self, session: Session) -> tuple[Task, TaskDefinition]:
        if not self.task_code:
            raise DynadeskError(f"Say which task to import {self.path} into (--task).")
        task = session.scalar(select(Task).where(Task.code == self.task_code))
        if task is None:
            raise DynadeskError(f"There is no task '{self.task_code}' on this desk.")
        return task, self.desk.tasks.definition(task.id)

    def round(self, session: Session, task: Task, number: int) -> Round:
        found = session.scalar(select(Round).where(Round.task_id == task.id, Round.number == number))
        if found is None:
            found = Round(task_id=task.id, number=number, description=f"{task.name}: round {number}")
            session.add(found)
            session.flush()
            self.report.count("rounds")
        return found

    def person(self, session: Session, key: str, display_name: str) -> Person:
        person_id = stable_id(self.name, "person", key)
        person = session.get(Person, person_id)
        if person is None:
            # Escaped: shared, this name goes out in a person record, and servers refuse control characters.
            person = Person(id=person_id, display_name=printable(display_name)[:200], role=Role.ANNOTATOR.value)
            session.add(person)
            session.flush()
            self.report.count("people")
        return person

    def model(self, session: Session, name: str, task: Task, labels: list[str]) -> ModelRecord:
        sha = imported_model_sha(name)
        record = session.scalar(select(ModelRecord).where(ModelRecord.sha256 == sha))
        if record is None:
            record = ModelRecord(
                name=name, format=ModelFormat.IMPORTED.value, sha256=sha, task_id=task.id,
                label_map={label: label for label in labels}, provenance={"imported_from": self.name},
            )
            session.add(record)
            session.flush()
            self.report.count("models")
        return record

    def context(self, session: Session, round_: Round, text: str) -> Context:
        digest = content_hash(text)
        found = session.scalar(select(Context).where(Context.round_id == round_.id, Context.content_hash == digest))
        if found is None:
            found = Context(round_id=round_.id, text=text, content_hash=digest, source=f"{self.name}:{self.path.name}")
            session.add(found)
            session.flush()
            self.report.count("contexts")
        return found

    def add_example(
        self,
        session: Session,
        *,
        example_id: uuid.UUID,
        external_id: str,
        task: Task,
        definition: TaskDefinition,
        round_: Round,
        author: Person,
        content: Content,
        outputs: list[ModelOutput],
        origin: dict,
        context_text: str | None = None,
        line: int,
    ) -> Example | None:
        """Add one submitted example, or None when it is already present or its row is bad."""
        try:
            checked = check_content(definition, content, require_metadata=False)
            check_outputs(definition, outputs)
        except InvalidExample as exc:
            self.report.problems.append(ImportProblem(line, str(exc)))
            return None
        problems = record_problems("example", {"meta": checked.meta, "origin": origin})
        if problems:  # no server would take it when the data set is shared
            self.report.problems.append(ImportProblem(line, "; ".join(problems)))
            return None
        stored = session.get(Example, example_id)
        if stored is not None:
            if same_content(stored, checked) and outputs and not stored.outputs:
                # stored before the round's target could run (a desk's first start): its answers now
                stored.outputs = self.output_rows(definition, checked, outputs)
                stored.model_fooled = is_fooled(definition, outputs, checked.true_label, checked.answer)
                stored.updated_at = utcnow()
                self.report.count("examples given their model outputs")
            elif same_content(stored, checked):
                self.report.already_present += 1
            else:
                self.report.problems.append(ImportProblem(
                    line, f"{external_id} is already on this desk with different content (inputs or label), "
                          "from an earlier import; the stored one was left as it was"))
            return None
        context = self.context(session, round_, context_text.strip()) if context_text else None
        example = Example(
            id=example_id, task_id=task.id, round_id=round_.id, context_id=context.id if context else None,
            author_id=author.id, inputs=checked.inputs, text=written_text(definition, checked.inputs),
            true_label=checked.true_label, answer=checked.answer.to_json() if checked.answer else None,
            meta=checked.meta, origin=origin, status=ExampleStatus.SUBMITTED.value, submitted_at=utcnow(),
            source=self.name, external_id=external_id, sync_state=SyncState.LOCAL.value, fooled_rule=round_.fooled_rule,
            model_fooled=is_fooled(definition, outputs, checked.true_label, checked.answer),
        )
        example.outputs = self.output_rows(definition, checked, outputs)
        session.add(example)
        session.flush()
        session.add_all(ExampleFacet.rows_for(example.id, facet_values(definition, checked.meta)))
        if context is not None:
            context.times_used += 1
        self.report.count("examples")
        return example


    @staticmethod
    def output_rows(definition: TaskDefinition, checked: Content, outputs: list[ModelOutput]) -> list[ModelOutputRow]:
        return [
            ModelOutputRow(model_id=o.model_id, position=i, model_sha256=o.model_sha256, label=o.label,
                           probabilities=o.probabilities, latency_ms=o.latency_ms,
                           answer=o.answer.to_json() if o.answer else None,
                           fooled=is_fooled(definition, [o], checked.true_label, checked.answer))
            for i, o in enumerate(outputs)
        ]


def same_content(stored: Example, checked: Content) -> bool:
    """Whether a row says what the stored example says (its id alone does not make it the same)."""
    answer = checked.answer.to_json() if checked.answer else None
    return (stored.inputs, stored.true_label, stored.answer) == (checked.inputs, checked.true_label, answer)


def repeated(first_seen: dict, key: str, line: int, row: dict, what: str) -> ImportProblem | str | None:
    """None for the first row with ``key``; a warning (text) for an exact repeat, read once; a
    problem naming both lines for a row that reuses the key with different content."""
    if key not in first_seen:
        first_seen[key] = (line, row)
        return None
    earlier, earlier_row = first_seen[key]
    if earlier_row == row:
        return f"line {line} repeats line {earlier} exactly; it was read once"
    return ImportProblem(line, f"{what} {key} is also on line {earlier}, with different content; keep one of the two")



class HateCheckImporter(Importer):
    name = "hatecheck"
    description = "HateCheck functional test suite (CSV: functionality, case_id, test_case, label_gold, ...)"
    default_task = "hate_speech"
    GOLD = {"hateful": "hate", "non-hateful": "not hate"}
    EXTRA = ("direction", "focus_words", "focus_lemma", "ref_case_id", "ref_templ_id", "templ_id", "case_templ")

    def parse(self):
        seen: dict[str, tuple[int, dict]] = {}
        for line, row in self.csv_rows({"functionality", "case_id", "test_case", "label_gold"}):
            if isinstance(row, ImportProblem):
                yield line, row
                continue
            case_id, text = row["case_id"].strip(), row["test_case"].strip()
            gold = self.GOLD.get(row["label_gold"].strip())
            first = self.first_row_of(seen, case_id, line, row, "case_id")
            if first is False:
                continue
            if isinstance(first, ImportProblem):
                yield line, first
            elif not text:
                yield line, ImportProblem(line, "test_case is empty")
            elif gold is None:
                yield line, ImportProblem(line, f"label_gold '{row['label_gold']}' is neither 'hateful' nor 'non-hateful'")
            elif not row["functionality"].strip():
                yield line, ImportProblem(line, "functionality is empty")
            else:
                yield line, {
                    "case_id": case_id, "text": text, "gold": gold, "functionality": row["functionality"].strip(),
                    "target": row.get("target_ident", "").strip() or None,
                    "extra": {k: row[k] for k in self.EXTRA if row.get(k)}, GROUP_FIELD: row.get(GROUP_FIELD),
                }

    def prepare(self, rows):
        self.outputs: list[list[ModelOutput]] = [[] for _ in rows]
        if self.round_number is not None:
            from app.core.io.round_examples import target_outputs

            self.outputs = target_outputs(self.desk, self.task_code, self.round_number,
                                          [r["text"] for _, r in rows], self.report)

    def store(self, session, rows):
        if self.round_number is not None:
            return self.store_as_round(session, rows)
        task, _ = self.task(session)
        digest = hashlib.sha256(self.path.read_bytes()).hexdigest()
        if session.scalar(select(Suite.id).where(Suite.sha256 == digest)):
            self.report.already_present += len(rows)
            return
        suite = Suite(name=self.path.stem, format=self.name, task_id=task.id, source=str(self.path), sha256=digest)
        suite.cases = [
            SuiteCase(position=i, case_id=r["case_id"], functionality=r["functionality"], text=r["text"],
                      gold_label=r["gold"], target=r["target"], extra=r["extra"])
            for i, (_, r) in enumerate(rows)
        ]
        session.add(suite)
        self.report.count("suites")
        self.report.count("suite cases", len(rows))

    def store_as_round(self, session, rows):
        """The cases as submitted examples of a round, written against its targets (a simulated round)."""
        task, definition = self.task(session)
        round_ = self.round(session, task, self.round_number or 1)
        author = self.person(session, "authors", "HateCheck authors")
        for (line, row), outputs in zip(rows, self.outputs):
            self.add_example(
                session, example_id=stable_id(self.name, self.path.name, row["case_id"]), external_id=row["case_id"],
                task=task, definition=definition, round_=round_, author=author, line=line, outputs=outputs,
                content=Content({"text": row["text"]}, row["gold"],
                                meta={"target_groups": [row["target"]]} if row["target"] else {}),
                origin={"kind": "import", "format": self.name, "file": self.path.name, "case_id": row["case_id"],
                        "functionality": row["functionality"], **row["extra"], **self.group_origin(row)})



class AnliImporter(Importer):
    name = "anli"
    description = "Adversarial NLI (CSV: context, statement, reason, adversary_pred, gold_label, uid, ...)"
    default_task = "nli"
    LABELS = {"e": "entailment", "n": "neutral", "c": "contradiction"}

    def parse(self):
        seen: dict[str, tuple[int, dict]] = {}
        for line, row in self.csv_rows({"context", "statement", "reason", "adversary_pred", "gold_label", "uid"}):
            if isinstance(row, ImportProblem):
                yield line, row
                continue
            gold = self.LABELS.get(row["gold_label"].strip())
            pred = self.LABELS.get(row["adversary_pred"].strip())
            first = self.first_row_of(seen, row["uid"].strip(), line, row, "uid")
            if first is False:
                continue
            if isinstance(first, ImportProblem):
                yield line, first
            elif gold is None:
                yield line, ImportProblem(line, f"gold_label '{row['gold_label']}' is not e, n or c")
            elif pred is None:
                yield line, ImportProblem(line, f"adversary_pred '{row['adversary_pred']}' is not e, n or c")
            else:
                yield line, {**row, "gold": gold, "pred": pred}

    def store(self, session, rows):
        task, definition = self.task(session)
        round_ = self.round(session, task, self.round_number or 1)
        author = self.person(session, "crowd", "ANLI crowd worker")
        model = self.model(session, "ANLI round-1 adversary", task, definition.labels)
        for line, row in rows:
            self.add_example(
                session, example_id=stable_id(self.name, row["uid"]), external_id=row["uid"], task=task,
                definition=definition, round_=round_, author=author, context_text=row["context"], line=line,
                content=Content({"context": row["context"], "hypothesis": row["statement"]}, row["gold"],
                                meta={"label_explanation": row["reason"]}),
                outputs=[ModelOutput(model.id, model.sha256, row["pred"])],
                origin={"kind": "import", "format": self.name, "file": self.path.name, "uid": row["uid"],
                        "eid": row.get("eid", ""), "a1code": row.get("A1Code", ""), "a1notes": row.get("A1Notes", ""),
                        "tags": row.get("tags", ""), **self.group_origin(row)},
            )



class DynaHateImporter(Importer):
    name = "dynahate"
    description = "Dynamically Generated Hate Speech Dataset (CSV: acl.id, text, label, type, target, level, ...)"
    default_task = "hate_speech"
    LABELS = {"hate": "hate", "nothate": "not hate"}
    TYPES = {
        "animosity": "animosity", "derogation": "derogation", "dehumanization": "dehumanization",
        "threatening": "threatening language", "support": "support for hateful entities",
    }
    TARGETS = {
        "wom": "women", "trans": "trans people", "gay": "gay people", "bla": "black people",
        "dis": "disabled people", "mus": "Muslims", "jew": "Jewish people", "immig": "immigrants", "ref": "refugees",
    }
    EMPTY = {"", "none", "notgiven", "na", "nan"}
    COLUMNS = {"acl.id", "text", "label", "type", "target", "level", "split", "round.base", "annotator", "round",
               "acl.id.matched"}

    def parse(self):
        seen: dict[str, tuple[int, dict]] = {}
        for line, row in self.csv_rows(self.COLUMNS):
            if isinstance(row, ImportProblem):
                yield line, row
                continue
            acl_id = row["acl.id"].strip()
            label = self.LABELS.get(row["label"].strip().lower())
            level = row["level"].strip().lower()
            try:
                round_number = whole_number(row["round.base"], "round.base", low=1, high=MAX_ROUND_NUMBER)
            except ValueError as exc:
                yield line, ImportProblem(line, str(exc))
                continue
            first = self.first_row_of(seen, acl_id, line, row, "acl.id")
            if first is False:
                continue
            if isinstance(first, ImportProblem):
                yield line, first
            elif label is None:
                yield line, ImportProblem(line, f"label '{row['label']}' is neither 'hate' nor 'nothate'")
            elif level not in ("original", "perturbation"):
                yield line, ImportProblem(line, f"level '{row['level']}' is neither 'original' nor 'perturbation'")
            else:
                yield line, {**row, "acl_id": acl_id, "label_": label, "level_": level, "round_": round_number}

    def _meta(self, row) -> dict:
        meta: dict[str, Any] = {}
        kind = row["type"].strip().lower()
        if kind not in self.EMPTY:
            meta["hate_type"] = self.TYPES.get(kind, kind)
        targets = [t.strip() for t in row["target"].replace(";", ",").split(",")]
        groups = [self.TARGETS.get(t.lower(), t) for t in targets if t.lower() not in self.EMPTY]
        if groups:
            meta["target_groups"] = groups
        return meta

    def store(self, session, rows):
        task, definition = self.task(session)
        ids = {row["acl_id"]: stable_id(self.name, row["acl_id"]) for _, row in rows}
        added: dict[str, Example] = {}
        for line, row in rows:
            round_ = self.round(session, task, row["round_"])
            annotator = row["annotator"].strip() or "unknown"
            author = self.person(session, annotator, f"DynaHate annotator {annotator}")
            example = self.add_example(
                session, example_id=ids[row["acl_id"]], external_id=row["acl_id"], task=task, definition=definition,
                round_=round_, author=author, line=line,
                content=Content({"text": row["text"]}, row["label_"], meta=self._meta(row)), outputs=[],
                origin={"kind": "import", "format": self.name, "file": self.path.name, "acl_id": row["acl_id"],
                        "split": row["split"], "round": row["round"], "level": row["level_"], **self.group_origin(row)},
            )
            if example is not None:
                added[row["acl_id"]] = example
        # Second pass: link each perturbation to its original, wherever it stands in the file.
        for line, row in rows:
            example = added.get(row["acl_id"])
            if example is None or row["level_"] != "perturbation":
                continue
            matched = row["acl.id.matched"].strip()
            parent = session.get(Example, ids.get(matched, stable_id(self.name, matched))) if matched else None
            if parent is None:
                self.report.warnings.append(f"line {line}: perturbation {row['acl_id']} names original '{matched}', which is not in the data; it is stored unlinked")
                continue
            ops, distance = word_edits(parent.text, example.text)
            example.perturbation_of = parent.id
            example.edit_ops = [op.to_json() for op in ops]
            example.edit_distance = distance
            self.report.count("perturbation links")



class JsonlImporter(Importer):
    name = "jsonl"
    description = "Dynadesk JSONL (what `dynadesk export --format jsonl` writes)"

    def parse(self):
        text = read_text(self.path)
        first_seen: dict[str, tuple[int, dict]] = {}
        for line, value in json_lines(text):
            if isinstance(value, ImportProblem):
                yield line, value
                continue
            try:
                record = read_record(value)
            except ValueError as exc:
                yield line, ImportProblem(line, str(exc))
                continue
            repeat = repeated(first_seen, f"{record['record']} {str(record['id']).lower()}", line, record, "the")
            if isinstance(repeat, str):
                self.report.warnings.append(repeat)
                continue
            if repeat is not None:
                yield line, repeat
                continue
            yield line, record

    def store(self, session, rows):
        writer = RecordWriter(session, self.desk, self.report)
        for line, record in rows:
            try:
                with session.begin_nested():  # a bad record leaves nothing half-written
                    self.refuse_a_different_stored_example(session, record)
                    writer.write(record)
            except DynadeskError as exc:
                self.report.problems.append(ImportProblem(line, str(exc)))
            except IntegrityError as exc:
                self.report.problems.append(
                    ImportProblem(line, f"{record['record']} {record['id']} refers to a record that is not in the data "
                                        f"or clashes with one that is ({exc.orig})"))
            except SQLAlchemyError as exc:  # a value the database refuses: the row is named, not the exception
                self.report.problems.append(ImportProblem(
                    line, f"{record['record']} {record['id']} cannot be stored: "
                          f"{getattr(exc, 'orig', None) or 'a field holds a value of the wrong kind'}"))
        writer.finish()

    def refuse_a_different_stored_example(self, session: Session, record: dict) -> None:
        """An example whose id is stored already is "already present" only if it says the same."""
        if record["record"] != "example":
            return
        stored = session.get(Example, uuid.UUID(str(record["id"])))
        if stored is None:
            return
        same = False
        try:
            checked = check_content(self.desk.tasks.definition(stored.task_id),
                                    Content(record["inputs"], record.get("true_label"), Span.from_json(record.get("answer"))),
                                    require_metadata=False)
            same = same_content(stored, checked)
        except (DynadeskError, KeyError, TypeError, ValueError, AttributeError):
            pass
        if not same:
            raise DynadeskError(f"example {stored.id} is already on this desk with different content "
                                f"(inputs or label); the stored one was left as it was")


IMPORTERS: dict[str, type[Importer]] = {cls.name: cls for cls in (HateCheckImporter, AnliImporter, DynaHateImporter, JsonlImporter)}


def import_file(desk, path: str | Path, format: str, *, task_code: str | None = None, round_number: int | None = None,
                skip_bad_rows: bool = False, group_column: str | None = None) -> ImportReport:
    """Import one file as one unit of work. Raises :class:`ImportFailed` (and stores nothing)
    when a row is bad, unless ``skip_bad_rows``."""
    path = Path(path)
    if format not in IMPORTERS:
        raise DynadeskError(f"Unknown import format '{format}'; choose one of {', '.join(IMPORTERS)}.")
    desk.db.ensure_intact()  # a damaged database must not take a batch of rows
    report = ImportReport(format, str(path))
    if group_column and format == JsonlImporter.name:
        raise DynadeskError("--group-column is for CSV data sets; Dynadesk JSONL keeps each example's group in its origin.")
    importer = IMPORTERS[format](desk, path, report, task_code, round_number, group_column)
    parsed = list(importer.parse())
    rows = [(line, row) for line, row in parsed if not isinstance(row, ImportProblem)]
    report.problems.extend(row for _, row in parsed if isinstance(row, ImportProblem))
    if report.problems and not skip_bad_rows:
        raise ImportFailed(report.problems, str(path))
    found_while_parsing = len(report.problems)
    importer.prepare(rows)
    with desk.db.write() as session:
        importer.store(session, rows)
        found_while_storing = report.problems[found_while_parsing:]
        if found_while_storing and not skip_bad_rows:
            raise ImportFailed(found_while_storing, str(path))  # leaving the block rolls everything back
    report.problems.sort(key=lambda p: p.line)
    desk.db.refresh_statistics()
    return report
