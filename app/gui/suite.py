"""The Suite tab's controller: the task's adaptive suite (app/core/adaptive_suite) as a tree, the
models' wrong answers on it, and a lead's "Generate variants".

Reading the suite runs on the database worker (newest request wins); scoring models on the
validated variants and growing the suite run as jobs of the one inference service, which load their
own models, report progress and can be cancelled. A model's answers are kept per variant (its id
and text): when the suite grows or a label is corrected, only the new variants are run again, and
nothing is kept once the model's files change (its checksum).

    controller = SuiteController(desk, db, inference, view, task_code)
    controller.refresh()                    # the tree; scores what is missing when in view
    view.generate_requested -> controller.generate
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from PySide6.QtCore import QObject, Signal

from app.core.changes import Changes, Data
from app.core.desk import Desk
from app.core.errors import DynadeskError
from app.gui.inference import InferenceFailure, InferenceService, Reply
from app.gui.pages import Page, Tab
from app.gui.worker import SerialWorker
from app.views.suite import (
    ModelColumn,
    ModelScore,
    SeedDetailView,
    SuiteTreeView,
    grow_message,
    model_columns,
    seed_detail,
    suite_tree,
)
from widgets.suite_view import SuiteView

log = logging.getLogger(__name__)
# what the tree is made of: the seeds and variants, their verdicts, the rounds' targets, the models, the
# lead's limit, who works here (a lead generates) and how they read (the blur)
SUITE_DATA = (Data.EXAMPLES | Data.VALIDATIONS | Data.ROUNDS | Data.MODELS | Data.TASK_SETTINGS | Data.PEOPLE
              | Data.PROFILE | Data.PREFERENCES)
NOT_A_LEAD = "Generating variants is for the task's leads and owners; you can read the suite."


@dataclass(frozen=True)
class SuiteSnapshot:
    """What one read of the suite found (on the database worker)."""

    task_code: str
    topics: dict[uuid.UUID, Any]  # seed id -> Topic
    cases: tuple[Any, ...]  # the validated variants (SuiteCase)
    targets: tuple[Any, ...]  # the model records of the newest round with targets
    others: tuple[Any, ...]  # the task's other runnable model records
    definition: Any
    can_generate: bool
    per_seed: int
    blur_words: tuple[str, ...]  # the task's list, read masked or not as the reader chose (``masked``)
    masked: bool
    tree: SuiteTreeView = field(compare=False, default=None)  # type: ignore[assignment]


def read_suite(desk: Desk, code: str, picked: frozenset[str],
               scores: Callable[[tuple[ModelColumn, ...], tuple[Any, ...]], list[ModelScore | None]],
               cases: tuple[Any, ...] = ()) -> SuiteSnapshot:
    """On the database worker: the topics, the models to score and who reads. The validated variants
    (``cases``, read after the tree is on screen) are the ones last read, until read again."""
    from app.core.domain import ModelFormat

    suite = desk.adaptive_suite
    topics = suite.topics(code)
    task_id = desk.tasks.task(code).id
    targets: list = []
    for round_ in reversed(desk.tasks.rounds(code)):  # the newest round that has targets
        targets = [r for r in desk.models.round_models(round_.id) if r.format != ModelFormat.IMPORTED.value]
        if targets:
            break
    target_ids = {r.id for r in targets}
    others = [r for r in desk.models.all() if r.format != ModelFormat.IMPORTED.value and r.task_id in (task_id, None)
              and r.id not in target_ids]
    person = desk.current_person_id
    profile = desk.settings.wellbeing_for(str(person))
    snapshot = SuiteSnapshot(
        code, {t.seed_id: t for t in topics}, cases, tuple(targets), tuple(others),
        desk.tasks.definition_by_code(code), desk.lead.is_lead(person),
        int(desk.tasks.settings(code).variants_per_seed), desk.tasks.blur_words(code), profile.blur_browsing)
    columns = snapshot_columns(snapshot, picked)
    return replace(snapshot, tree=suite_tree(code, topics, columns, scores(columns, snapshot.cases),
                                             blur_words=snapshot.blur_words if snapshot.masked else ()))


def _label(record: Any) -> str:
    return f"{record.name} ({record.format})"


def snapshot_columns(snapshot: SuiteSnapshot, picked: frozenset[str]) -> tuple[ModelColumn, ...]:
    return model_columns([(str(r.id), _label(r)) for r in snapshot.targets],
                         [(str(r.id), _label(r)) for r in snapshot.others], picked)


def answer_cases(records: Sequence[Any], missing: Sequence[Sequence[Any]], definition: Any, progress,
                 into: dict[str, dict[uuid.UUID, tuple[str, str]]]) -> dict[str, dict[uuid.UUID, tuple[str, str]]]:
    """On the inference worker: each model's labels for its missing cases, kept in ``into`` (by record id,
    then case: (text, label)) model by model, so that a cancel keeps the models already run."""
    from app.core.services.target_models import load_engine_for, model_input

    total = sum(len(cases) for cases in missing)
    done = 0
    for record, cases in zip(records, missing):
        if not cases:
            continue
        progress.say(f"Scoring {record.name} on {len(cases):,} validated variants…")
        engine = load_engine_for(record)
        try:
            predictions = engine.predict_batched([model_input(definition, c.inputs) for c in cases],
                                                 progress=progress.part(done, total))
        finally:
            engine.close()
        into[str(record.id)] = {c.example_id: (c.text, p.label or "") for c, p in zip(cases, predictions)}
        done += len(cases)
    return into


class SuiteController(QObject):
    tree_shown = Signal(object)  # the SuiteTreeView now on screen
    scored = Signal()  # the models' answers arrived and the tree shows them
    seed_shown = Signal(object)  # the SeedDetailView now on screen
    grown = Signal(object)  # the suite's GrowReport, once variants were generated

    def __init__(self, desk: Desk, db: SerialWorker, inference: InferenceService, view: SuiteView,
                 task_code: Callable[[], str | None], parent: QObject | None = None):
        super().__init__(parent)
        self.desk, self.db, self.inference, self.view, self._task_code = desk, db, inference, view, task_code
        self.snapshot: SuiteSnapshot | None = None
        self.picked: frozenset[str] = frozenset()  # other models the lead added to the scoring
        # per model record id: its checksum and its answers by variant (text, label)
        self._answers: dict[str, tuple[str, dict[uuid.UUID, tuple[str, str]]]] = {}
        self.job: Reply | None = None
        self._job_kind = ""  # "score" or "grow"
        self._preparing = False  # a growth's database part runs; its job starts after it
        self._cancel_asked = False  # Cancel pressed while preparing
        self._stale = True  # changed while out of view: read again when shown
        self._auto_score = True  # score what is missing after a read (off once the lead cancelled)
        view.seed_selected.connect(self.show_seed)
        view.generate_requested.connect(self.generate)
        view.score_requested.connect(lambda: self.score(asked=True))
        view.cancel_requested.connect(self.cancel)
        view.models_picked.connect(self._models_picked)

    # reading -------------------------------------------------------------------------------------
    def refresh(self) -> None:
        code = self._task_code()
        if code is None:
            return
        if self.snapshot is not None and self.snapshot.task_code != code:
            self.snapshot = None
            self.view.set_status("")
        self._stale = False
        desk, picked, scores = self.desk, self.picked, self._scores_of
        known = self.snapshot.cases if self.snapshot is not None else ()
        self.db.submit_latest("suite-tree", lambda: read_suite(desk, code, picked, scores, known),
                              on_done=self._read, on_error=self._error)

    def changed(self, _changes: Changes) -> None:
        if self.view.isVisible():
            self.refresh()
        else:
            self._stale = True

    def shown(self) -> None:
        code = self._task_code()
        if self._stale or self.snapshot is None or self.snapshot.task_code != code:
            self.refresh()

    def _read(self, snapshot: SuiteSnapshot) -> None:
        if snapshot.task_code != self._task_code():
            return
        self.snapshot = snapshot
        self.view.set_models([ModelColumn(str(r.id), _label(r)) for r in snapshot.others], set(self.picked))
        self.view.set_can_generate(snapshot.can_generate, NOT_A_LEAD, running=self.job is not None or self._preparing)
        self.view.set_per_seed(snapshot.per_seed)
        self.view.show_tree(snapshot.tree)
        self.tree_shown.emit(snapshot.tree)
        if self.view.current_seed is not None:
            self.show_seed(self.view.current_seed)
        # the validated variants take longest to read (their texts and inputs): after the tree is on screen
        desk, code = self.desk, snapshot.task_code
        self.db.submit_latest("suite-cases", lambda: tuple(desk.adaptive_suite.cases(code)),
                              on_done=lambda cases: self._cases_read(code, cases), on_error=self._error)

    def _cases_read(self, code: str, cases: tuple[Any, ...]) -> None:
        if self.snapshot is None or self.snapshot.task_code != code:
            return
        self.snapshot = replace(self.snapshot, cases=cases)
        self._rebuild()
        if self._auto_score and self.job is None and not self._preparing and self._missing(self.snapshot):
            self.score()

    def _scores_of(self, columns: Sequence[ModelColumn], cases: Sequence[Any]) -> list[ModelScore | None]:
        """Per column, the model's figures from its kept answers (None: none kept); stale where some case
        has no answer yet. Runs on either thread: it reads the answers as they are."""
        from app.core.adaptive_suite.scoring import score_suite

        out: list[ModelScore | None] = []
        for column in columns:
            kept = self._answers.get(column.key)
            if kept is None or not cases:
                out.append(None if kept is None else ModelScore({}))
                continue
            answers = kept[1]
            answered = [c for c in cases if answers.get(c.example_id, ("",))[0] == c.text]
            score = score_suite(answered, [answers[c.example_id][1] for c in answered])
            out.append(ModelScore(dict(score.per_topic), stale=len(answered) < len(cases)))
        return out

    def _rebuild(self) -> None:
        """The tree again with the answers now kept (the topics as last read)."""
        snapshot = self.snapshot
        if snapshot is None:
            return
        columns = snapshot_columns(snapshot, self.picked)
        tree = suite_tree(snapshot.task_code, list(snapshot.topics.values()), columns,
                          self._scores_of(columns, snapshot.cases),
                          blur_words=snapshot.blur_words if snapshot.masked else ())
        self.snapshot = replace(snapshot, tree=tree)
        self.view.show_tree(tree)
        self.tree_shown.emit(tree)

    def _models_picked(self, keys: list) -> None:
        self.picked = frozenset(keys)
        self._auto_score = True
        self._rebuild()
        if self.snapshot is not None and self.job is None and self._missing(self.snapshot):
            self.score()

    # scoring -------------------------------------------------------------------------------------
    def _records(self, snapshot: SuiteSnapshot) -> list[Any]:
        return [*snapshot.targets, *(r for r in snapshot.others if str(r.id) in self.picked)]

    def _missing(self, snapshot: SuiteSnapshot) -> list[list[Any]]:
        """Per model to score, the validated variants it has no answer for; [] when none is missing."""
        missing = []
        for record in self._records(snapshot):
            sha, answers = self._answers.get(str(record.id), ("", {}))
            if sha != record.sha256:
                answers = {}
            missing.append([c for c in snapshot.cases if answers.get(c.example_id, ("",))[0] != c.text])
        return missing if any(missing) else []

    def score(self, *, asked: bool = False) -> None:
        snapshot = self.snapshot
        if snapshot is None or self.job is not None or self._preparing:
            return
        if asked:
            self._auto_score = True
        records = self._records(snapshot)
        if not records:
            self.view.set_status("No round of this task has a target model that runs here, and no other model "
                                 "is picked: there is nothing to score.", error=asked)
            return
        missing = self._missing(snapshot)
        if not missing:
            if asked:
                self.view.set_status("Every model's answers are up to date.")
            return
        for record in records:  # another checksum: the model changed, its old answers go
            if self._answers.get(str(record.id), ("",))[0] != record.sha256:
                self._answers[str(record.id)] = (record.sha256, {})
        count = sum(len(m) for m in missing)
        into: dict[str, dict[uuid.UUID, tuple[str, str]]] = {}
        definition, ran = snapshot.definition, len([m for m in missing if m])
        kept = " (the other answers were kept)" if count < ran * len(snapshot.cases) or ran < len(records) else ""
        self._start("score", f"Scoring {ran} model(s) on {count:,} validated variants…",
                    lambda progress: answer_cases(records, missing, definition, progress, into),
                    lambda result: self._answered(result, f"Scored {ran} model(s) on {count:,} validated "
                                                          f"variants{kept}."),
                    on_cancelled=lambda: self._answered(into, "Cancelled; the models scored before it are kept."))

    def _answered(self, answers: dict[str, dict[uuid.UUID, tuple[str, str]]], message: str) -> None:
        for key, found in answers.items():
            sha, kept = self._answers.get(key, ("", {}))
            self._answers[key] = (sha, {**kept, **found})
        if message.startswith("Cancelled"):
            self._auto_score = False  # until the lead asks again, or the models picked change
        self.view.set_status(message)
        self._rebuild()
        self.scored.emit()

    # generating ----------------------------------------------------------------------------------
    def generate(self, seeds: list, per_seed: int) -> None:
        snapshot = self.snapshot
        if snapshot is None:
            return
        if not snapshot.can_generate:
            self.view.set_status(NOT_A_LEAD, error=True)
            return
        if self.job is not None or self._preparing:
            self.view.set_status("A job of this tab is running; cancel it first.", error=True)
            return
        desk, code, person = self.desk, snapshot.task_code, self.desk.current_person_id
        chosen = [uuid.UUID(str(s)) for s in seeds]

        def prepare() -> list[Any]:
            desk.lead.require_lead(person, action="generate the adaptive suite's variants")
            if per_seed != desk.tasks.settings(code).variants_per_seed:  # the lead's new limit, for the team
                desk.set_task_settings(person, code, variants_per_seed=per_seed)
            if not snapshot.targets:
                raise DynadeskError("No round of this task has a target model that runs here: variants are "
                                    "checked against the round's target. Adopt a target model first (Round ▸ Rounds).")
            return list(snapshot.targets)

        def grow(records: list[Any]) -> None:
            self._preparing = False
            if self._cancel_asked:  # cancelled while the database prepared: no job starts
                self._cancel_asked = False
                self.view.set_running(False)
                self.view.set_status("Cancelled; nothing was generated.")
                return

            def run(progress):
                from app.core.services.target_models import load_ensemble

                models = load_ensemble(records)
                try:
                    return desk.adaptive_suite.grow(code, models, seeds=chosen, per_seed=per_seed,
                                                    generated_by=person, progress=progress)
                finally:
                    models.close()

            # the suite stores a growth's variants in one unit of work at its end: a cancel keeps none
            self._start("grow", f"Generating up to {per_seed} variants for each of {len(chosen):,} seed(s)…",
                        run, self._grown, on_cancelled=lambda: self.view.set_status("Cancelled; nothing was generated."))

        def refused(error: BaseException) -> None:
            self._preparing = self._cancel_asked = False
            self.view.set_running(False)
            self._error(error)

        self._preparing, self._cancel_asked = True, False
        self.view.set_running(True)  # Cancel is offered from the start
        self.view.set_status("Preparing…")
        self.db.submit(prepare, on_done=grow, on_error=refused)

    def _grown(self, report: Any) -> None:
        self.view.set_status(grow_message(report))
        self.grown.emit(report)
        self.refresh()  # (the stored variants also reach every page through the change routing)

    # the running job -----------------------------------------------------------------------------
    def _start(self, kind: str, text: str, fn, then, *, on_cancelled: Callable[[], None]) -> None:
        def done(result) -> None:
            self._ended()
            then(result)

        def cancelled() -> None:
            self._ended()
            on_cancelled()

        self._job_kind = kind
        self.view.set_running(True)
        self.view.set_status(text)
        self.job = self.inference.run_job(fn, on_progress=self.view.set_progress, on_message=self.view.set_status,
                                          on_done=done, on_failed=self._failed, on_cancelled=cancelled)

    def _ended(self) -> None:
        self.job = None
        self._job_kind = ""
        self.view.set_running(False)

    def cancel(self) -> None:
        if self.job is not None:
            self.view.set_status("Cancelling after the current batch…")  # first: a queued job ends within cancel()
            self.job.cancel()
        elif self._preparing:  # the job is not started yet: it will not be
            self._cancel_asked = True
            self.view.set_status("Cancelling…")

    def _failed(self, failure: InferenceFailure) -> None:
        kind = self._job_kind
        self._ended()
        what = "Generating variants" if kind == "grow" else "Scoring the models"
        self.view.set_status(f"{what} failed: {failure.message}", error=True)

    # a seed --------------------------------------------------------------------------------------
    def show_seed(self, seed_id: uuid.UUID | None) -> None:
        snapshot = self.snapshot
        if seed_id is None or snapshot is None or seed_id not in snapshot.topics:
            return
        desk, topic = self.desk, snapshot.topics[seed_id]
        warning, labels = snapshot.definition.content_warning, tuple(snapshot.definition.labels)

        def read() -> SeedDetailView:
            return seed_detail(topic, desk.adaptive_suite.variants_of(seed_id), blur_words=snapshot.blur_words,
                               masked=snapshot.masked, content_warning=warning, labels=labels)

        self.db.submit_latest("suite-seed", read, on_done=self._seed_read, on_error=self._error)

    def _seed_read(self, detail: SeedDetailView) -> None:
        self.view.show_seed(detail)
        self.seed_shown.emit(detail)

    def _error(self, error: BaseException) -> None:
        if isinstance(error, DynadeskError):
            self.view.set_status(str(error), error=True)
        else:
            log.error("suite error", exc_info=(type(error), error, error.__traceback__))
            self.view.set_status(f"Unexpected error: {error}. Details are in the log.", error=True)

    def shutdown(self) -> None:
        if self.job is not None:
            self.job.cancel()


def suite_page(desk: Desk, db: SerialWorker, inference: InferenceService, task_code: Callable[[], str | None],
               parent: QObject) -> Page:
    """The Suite tab (Ctrl+7), declared for MainWindow.mount."""
    view = SuiteView()
    controller = SuiteController(desk, db, inference, view, task_code, parent)
    return Page(controller, view, Tab("S&uite", "Ctrl+7", "tab-suite"), shown=controller.shown,
                watches=SUITE_DATA, changed=controller.changed, shutdown=controller.shutdown)
