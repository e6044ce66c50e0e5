"""The Evaluate tab's controller: picks come from the view, database work runs on the desk's
serial worker, model work runs as a job of the one inference service (its own worker thread),
and the results go back to the view as typed view-models (app/views/evaluation.py). The GUI thread
never waits on either.

    controller = EvaluationController(desk, db, inference, view)
    controller.refresh(task_code)          # the model choices of the task
    view.run_requested -> controller.run   # prepare (db) -> evaluate (inference) -> write files (db)
    controller.case_opened(task_code, case)   # a failing case, for the workspace
"""

from __future__ import annotations

import logging
from datetime import datetime
from pathlib import Path

from PySide6.QtCore import QObject, QUrl, Signal
from PySide6.QtGui import QDesktopServices

from app.core.desk import Desk
from app.core.errors import DynadeskError
from app.core.next_round.leaderboard import leaderboard_document
from app.core.next_round.suite_split import adaptive_suite_split, trained_on_variants
from app.core.services import evaluation as ev
from app.core.services.evaluation_data import read_hatecheck_suite, read_labelled_file, round_sets
from app.core.services.evaluation_models import (
    EvaluationError,
    family_name,
    format_label,
    model_families,
    resolve_models,
)
from app.core.services.evaluation_scoring import DEFAULT_WEIGHTS, DIMENSIONS, PERFORMANCE_WEIGHTING, failing_cases
from app.gui.inference import InferenceFailure, InferenceService, Reply
from app.gui.worker import SerialWorker
from app.views.evaluation import (
    EvaluationSettings,
    FailingCase,
    ModelChoice,
    build_details,
    build_overview,
    model_choice,
    weights,
)
from widgets.evaluation_view import EvaluationView

log = logging.getLogger(__name__)


def evaluate_and_write(evaluate, out: Path, leaderboard: dict | None = None,
                       blur_words: tuple[str, ...] = ()) -> tuple[dict, Path]:
    """Run the evaluation and write its JSON and HTML report, all on the inference worker; the
    task's model leaderboard (as stored) goes into both; the report's case texts are masked with
    ``blur_words`` (the reader's)."""
    from app.core.io.documents import write_document
    from app.core.next_round.leaderboard_report import evaluation_sections
    from app.core.services.evaluation_report import write_html

    doc = evaluate()
    if leaderboard is not None:
        doc["leaderboard"] = leaderboard
    write_document(doc, out / "evaluation.json")
    write_html(doc, out / "report.html", blur_words=blur_words, sections=evaluation_sections(doc))
    return doc, out


class EvaluationController(QObject):
    case_opened = Signal(str, dict)  # task code, the failing case (text, gold, predicted, ...)
    finished = Signal(object)  # the evaluation document
    failed = Signal(str)  # a message for the user

    def __init__(self, desk: Desk, db: SerialWorker, inference: InferenceService, view: EvaluationView):
        super().__init__(view)
        self.desk, self.db, self.inference, self.view = desk, db, inference, view
        self.task_code = "hate_speech"
        self.job: Reply | None = None  # the running job: preparing the default model, or the evaluation
        self.doc: dict | None = None
        self.out_dir: Path | None = None
        self._model_key = ""
        self._set_key = ""
        self._failing: list[dict] = []  # the failing cases shown, as the evaluation wrote them
        self._blur_words: tuple[str, ...] = ()  # the task's, for a reader who browses masked
        view.show_weights(weights(DIMENSIONS, DEFAULT_WEIGHTS))
        view.run_requested.connect(self.run)
        view.cancel_requested.connect(self.cancel)
        view.model_changed.connect(self._model_chosen)
        view.set_changed.connect(self._set_chosen)
        view.case_opened.connect(self._case_opened)
        view.report_requested.connect(self.open_report)

    def refresh(self, task_code: str | None = None) -> None:
        """The models this task can be evaluated with: the default model, each round's targets, every runnable model."""
        self.task_code = task_code or self.task_code
        desk, code = self.desk, self.task_code

        def collect():
            from app.core.domain import ModelFormat
            from app.core.services.target_models import DEFAULT_TASK

            task_id = desk.tasks.task(code).id
            runnable = [r for r in desk.models.all()
                        if r.format != ModelFormat.IMPORTED.value and r.task_id in (task_id, None)]
            families = model_families(runnable)
            bundled = next((f for f in families if any(
                (r.provenance or {}).get("default_model") and r.format == ModelFormat.ONNX.value for r in f)), None)
            choices: list[ModelChoice] = []
            if code == DEFAULT_TASK and bundled is None:
                choices.append(ModelChoice("default", "Bundled default model (hate speech R1)",
                                           "Prepared on first use if it is not yet.", checked=True))
            elif code == DEFAULT_TASK:
                choices.append(family_choice(bundled, "Bundled default model (hate speech R1)", checked=True))
            for round_ in desk.tasks.rounds(code):
                members = desk.models.round_models(round_.id)
                if members:
                    choices.append(ModelChoice(
                        f"round:{round_.number}", f"Round {round_.number} targets: " + " + ".join(m.name for m in members),
                        "The round's target models, answering together."))
            choices += [family_choice(f) for f in families if f is not bundled or code != DEFAULT_TASK]
            return tuple(choices)

        # the newest request wins: a task changed twice shows the second task's models
        self.db.submit_latest("evaluation-models", collect, on_done=self.view.show_models, on_error=self._error)
        self.db.submit(lambda: desk.tasks.blur_words(code), on_done=self._words_read, on_error=self._error)

    def _words_read(self, words: tuple[str, ...]) -> None:
        self._blur_words = words
        self._show_details()

    def run(self, settings: EvaluationSettings) -> None:
        if self.job is not None:
            self.view.set_status("An evaluation is running; cancel it first.", error=True)
            return
        desk, code = self.desk, self.task_code
        self.view.set_running(True)
        self.view.set_status("Reading the data and preparing the models…")
        try:
            options = ev.EvaluationOptions(weights=settings.weight_map(), identity_swap=settings.identity_swap,
                                           robustness=settings.robustness,
                                           training_data=settings.training_data or None)
        except DynadeskError as exc:
            self.view.set_running(False)
            self._error(exc)
            return

        def prepare():
            sets = round_sets(desk, code, "all") if settings.rounds else []
            if settings.suite:
                sets.append(read_hatecheck_suite(Path(settings.suite)))
            if settings.data:
                sets.append(read_labelled_file(Path(settings.data)))
            if options.training_data and not Path(options.training_data).is_file():
                raise EvaluationError(f"There is no training data file at {options.training_data}.")
            choices = resolve_models(desk, list(settings.models), code)
            # the task's adaptive suite: one more set, per topic family (functionality); held-out seeds' variants
            # only when a scored model trained on variants
            adaptive = adaptive_suite_split(desk, code, held_out_only=trained_on_variants(
                None, [r for choice in choices for r in choice.records]))
            if adaptive.eval_set.cases:
                sets.append(adaptive.eval_set)
            if not any(s.cases for s in sets):
                raise EvaluationError("There is nothing to evaluate on: no round has validated examples yet, "
                                         "and no suite or data file was chosen.")
            return (choices, sets, desk.models.all(), leaderboard_document(desk, code),
                    desk.reading_words(code, browsing=True))

        def start(prepared) -> None:
            choices, sets, records, board, words = prepared
            cases = sum(len(s.cases) for s in sets)
            self.view.set_status(f"Evaluating {len(choices)} model(s) on {cases:,} cases…")
            out = self.desk.root / "evaluations" / datetime.now().strftime("%Y-%m-%d_%H%M%S")
            self._run(lambda progress: evaluate_and_write(
                lambda: ev.evaluate(choices, sets, options, task_code=code, records=records, progress=progress), out,
                board, words), self._done)

        def failed(error: BaseException) -> None:
            self.view.set_running(False)
            self._error(error)

        def prepare_on_db() -> None:
            self.db.submit(prepare, on_done=start, on_error=failed)

        if "default" in settings.models:
            # the first use assembles and exports the default model (tens of seconds): a job, not the database thread
            from app.core.services.target_models import prepare_default_files

            # once the default model is ready, the evaluation goes on
            self._run(lambda progress: prepare_default_files(desk, progress=progress), lambda _ready: prepare_on_db())
        else:
            prepare_on_db()

    def _run(self, fn, then) -> None:
        """One job of this tab on the inference service; ``then(result)`` when it is done."""

        def done(result) -> None:
            self.job = None
            then(result)

        self.job = self.inference.run_job(fn, on_progress=self.view.set_progress,
                                          on_message=self.view.set_status, on_done=done,
                                          on_failed=self._job_failed, on_cancelled=self._job_cancelled)

    def cancel(self) -> None:
        if self.job is not None:
            # said first: a job not yet started ends within cancel(), saying so
            self.view.set_status("Cancelling after the current batch…")
            self.job.cancel()

    def _job_cancelled(self) -> None:
        self.job = None
        self.view.set_running(False)
        self.view.set_status("Cancelled; nothing was written.")

    def _job_failed(self, failure: InferenceFailure) -> None:
        self.job = None
        self.view.set_running(False)
        self.view.set_status(f"The evaluation failed: {failure.message}", error=True)
        self.failed.emit(failure.message)

    def _done(self, result: tuple[dict, Path]) -> None:
        doc, folder = result
        self.show(doc)
        self.out_dir = folder
        self.view.set_running(False)
        self.view.set_progress(1, 1)
        self.view.set_status(f"Done. Wrote {folder / 'evaluation.json'} and report.html.")
        self.view.set_report_ready(True)
        self.finished.emit(doc)

    def open_report(self) -> None:
        if self.out_dir is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.out_dir / "report.html")))

    def show(self, doc: dict) -> None:
        self.doc = doc
        self.view.show_overview(build_overview(doc, DIMENSIONS, PERFORMANCE_WEIGHTING))
        self._model_key = doc["models"][0]["key"]
        self._set_key = self.view.current_set() or doc["sets"][0]["key"]
        self._show_details()

    def _model_chosen(self, key: str) -> None:
        self._model_key = key
        self._show_details()

    def _set_chosen(self, key: str) -> None:
        self._set_key = key
        self._show_details()

    def _show_details(self) -> None:
        if self.doc is not None and self._model_key and self._set_key:
            self._failing = failing_cases(self.doc, self._model_key, self._set_key)
            masked = self.desk.settings.wellbeing_for(str(self.desk.current_person_id)).blur_browsing
            self.view.show_details(build_details(self.doc, self._model_key, self._set_key, self._failing,
                                                 blur_words=self._blur_words if masked else ()))

    def _case_opened(self, case: FailingCase) -> None:
        found = next((c for c in self._failing if str(c["id"]) == case.id), None)
        if found is not None:
            self.case_opened.emit(self.task_code, found)

    def _error(self, error: BaseException) -> None:
        if isinstance(error, DynadeskError):
            self.view.set_status(str(error), error=True)
        else:
            log.error("evaluation error", exc_info=(type(error), error, error.__traceback__))
            self.view.set_status(f"Unexpected error: {error}. Details are in the log.", error=True)
        self.failed.emit(str(error))


def family_choice(members: list, name: str = "", *, checked: bool = False) -> ModelChoice:
    """One entry per model (``name``, or the name its records share); a model held in several
    formats lists them under it, the fastest (ONNX, int8 before fp32) ticked when ``checked``."""
    return model_choice(members, [format_label(r) for r in members], family_name(members), name, checked=checked)
