"""The Evaluate tab's controller: picks come from the view, database work runs on the desk's
serial worker, model work runs as a job of the one inference service (its own worker thread),
and the results go back to the view as plain dicts. The GUI thread never waits on either.

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

from app.desk import Desk
from app.errors import DynadeskError
from app.gui.inference import InferenceFailure, InferenceService
from app.gui.worker import SerialWorker
from app.services import evaluation as ev
from app.services.evaluation_models import EvaluationError, family_name, format_label, model_families, resolve_models
from app.services.evaluation_scoring import DIMENSIONS, PERFORMANCE_WEIGHTING, failing_cases
from app.services.evaluation_data import read_hatecheck_suite, read_labelled_file, round_sets
from widgets.evaluation_view import EvaluationView, num, pct

log = logging.getLogger(__name__)


def evaluate_and_write(evaluate, out: Path) -> tuple[dict, Path]:
    """Run the evaluation and write its JSON and HTML report, all on the inference worker."""
    from app.services.evaluation_report import write_html

    doc = evaluate()
    ev.write_json(doc, out / "evaluation.json")
    write_html(doc, out / "report.html")
    return doc, out


class EvaluationController(QObject):
    case_opened = Signal(str, dict)  # task code, the failing case (text, gold, predicted, ...)
    finished = Signal(object)  # the evaluation document
    failed = Signal(str)  # a message for the user

    def __init__(self, desk: Desk, db: SerialWorker, inference: InferenceService, view: EvaluationView):
        super().__init__(view)
        self.desk, self.db, self.inference, self.view = desk, db, inference, view
        self.task_code = "hate_speech"
        self.job_id: int | None = None
        self._after_job = None  # what follows the running job when it is a preparation step
        self.doc: dict | None = None
        self.out_dir: Path | None = None
        self._model_key = ""
        self._set_key = ""
        view.run_requested.connect(self.run)
        view.cancel_requested.connect(self.cancel)
        view.model_changed.connect(self._model_chosen)
        view.set_changed.connect(self._set_chosen)
        view.case_opened.connect(lambda case: self.case_opened.emit(self.task_code, case))
        view.report_requested.connect(self.open_report)
        inference.job_progress.connect(self._progress)
        inference.job_message.connect(self._message)
        inference.job_done.connect(self._done)
        inference.failed.connect(self._inference_failed)

    # --- choices ----------------------------------------------------------------------------

    def refresh(self, task_code: str | None = None) -> None:
        """The models this task can be evaluated with: the default model, each round's targets, every runnable model."""
        self.task_code = task_code or self.task_code
        desk, code = self.desk, self.task_code

        def collect():
            from app.domain import ModelFormat
            from app.services.target_models import DEFAULT_TASK

            task_id = desk.tasks.task(code).id
            runnable = [r for r in desk.models.all()
                        if r.format != ModelFormat.IMPORTED.value and r.task_id in (task_id, None)]
            families = model_families(runnable)
            bundled = next((f for f in families if any(
                (r.provenance or {}).get("default_model") and r.format == ModelFormat.ONNX.value for r in f)), None)
            choices = []
            if code == DEFAULT_TASK and bundled is None:
                choices.append({"key": "default", "name": "Bundled default model (hate speech R1)",
                                "detail": "Prepared on first use if it is not yet.", "checked": True})
            elif code == DEFAULT_TASK:
                choices.append(family_choice(bundled, "Bundled default model (hate speech R1)", checked=True))
            for round_ in desk.tasks.rounds(code):
                members = desk.models.round_models(round_.id)
                if members:
                    choices.append({"key": f"round:{round_.number}",
                                    "name": f"Round {round_.number} targets: " + " + ".join(m.name for m in members),
                                    "detail": "The round's target models, answering together."})
            choices += [family_choice(f) for f in families if f is not bundled or code != DEFAULT_TASK]
            return choices

        self.db.submit(collect, on_done=self.view.set_models, on_error=self._error)

    # --- running ------------------------------------------------------------------------------

    def run(self, settings: dict) -> None:
        if self.job_id is not None:
            self.view.set_status("An evaluation is running; cancel it first.", error=True)
            return
        desk, code = self.desk, self.task_code
        self.view.set_running(True)
        self.view.set_status("Reading the data and preparing the models…")
        try:
            options = ev.EvaluationOptions(weights=settings["weights"], identity_swap=settings["identity_swap"],
                                           robustness=settings["robustness"],
                                           training_data=settings.get("training_data") or None)
        except DynadeskError as exc:
            self.view.set_running(False)
            self._error(exc)
            return

        def prepare():
            sets = round_sets(desk, code, "all") if settings["rounds"] else []
            if settings["suite"]:
                sets.append(read_hatecheck_suite(Path(settings["suite"])))
            if settings["data"]:
                sets.append(read_labelled_file(Path(settings["data"])))
            if options.training_data and not Path(options.training_data).is_file():
                raise EvaluationError(f"There is no training data file at {options.training_data}.")
            if not any(s.cases for s in sets):
                raise EvaluationError("There is nothing to evaluate on: no round has validated examples yet, "
                                         "and no suite or data file was chosen.")
            choices = resolve_models(desk, settings["models"], code)
            return choices, sets, desk.models.all()

        def start(prepared) -> None:
            choices, sets, records = prepared
            cases = sum(len(s.cases) for s in sets)
            self.view.set_status(f"Evaluating {len(choices)} model(s) on {cases:,} cases…")
            out = self.desk.root / "evaluations" / datetime.now().strftime("%Y-%m-%d_%H%M%S")
            self.job_id = self.inference.run_job(lambda progress: evaluate_and_write(
                lambda: ev.evaluate(choices, sets, options, task_code=code, records=records, progress=progress), out))

        def failed(error: BaseException) -> None:
            self.view.set_running(False)
            self._error(error)

        def prepare_on_db() -> None:
            self.db.submit(prepare, on_done=start, on_error=failed)

        if "default" in settings["models"]:
            # the first use assembles and exports the default model (tens of seconds): a job, not the database thread
            from app.services.target_models import prepare_default_files

            self._after_job = prepare_on_db
            self.job_id = self.inference.run_job(lambda progress: prepare_default_files(desk, progress=progress))
        else:
            prepare_on_db()

    def cancel(self) -> None:
        if self.job_id is not None:
            self.inference.cancel_job(self.job_id)
            self.view.set_status("Cancelling after the current batch…")

    def _progress(self, request_id: int, done: int, total: int) -> None:
        if request_id == self.job_id:
            self.view.set_progress(done, total)

    def _message(self, request_id: int, text: str) -> None:
        if request_id == self.job_id:
            self.view.set_status(text)

    def _inference_failed(self, failure: InferenceFailure) -> None:
        if failure.operation != "job" or failure.request_id != self.job_id:
            return
        self.job_id = None
        self._after_job = None
        self.view.set_running(False)
        if failure.cancelled:
            self.view.set_status("Cancelled; nothing was written.")
        else:
            self.view.set_status(f"The evaluation failed: {failure.message}", error=True)
            self.failed.emit(failure.message)

    def _done(self, request_id: int, result) -> None:
        if request_id != self.job_id:
            return
        self.job_id = None
        then, self._after_job = self._after_job, None
        if then is not None:  # the default model is ready: go on with the evaluation
            then()
            return
        doc, folder = result
        self.show(doc)
        self.out_dir = folder
        self.view.set_running(False)
        self.view.set_progress(1, 1)
        self.view.set_status(f"Done. Wrote {folder / 'evaluation.json'} and report.html.")
        self.view.report_button.setEnabled(True)
        self.finished.emit(doc)

    def open_report(self) -> None:
        if self.out_dir is not None:
            QDesktopServices.openUrl(QUrl.fromLocalFile(str(self.out_dir / "report.html")))

    # --- showing ------------------------------------------------------------------------------

    def show(self, doc: dict) -> None:
        self.doc = doc
        self.view.show_overview(overview(doc))
        self._model_key = doc["models"][0]["key"]
        self._set_key = self.view.set_choice.currentData() or doc["sets"][0]["key"]
        self._show_details()

    def _model_chosen(self, key: str) -> None:
        self._model_key = key
        self._show_details()

    def _set_chosen(self, key: str) -> None:
        self._set_key = key
        self._show_details()

    def _show_details(self) -> None:
        if self.doc is not None and self._model_key and self._set_key:
            self.view.show_details(details(self.doc, self._model_key, self._set_key))

    def _error(self, error: BaseException) -> None:
        if isinstance(error, DynadeskError):
            self.view.set_status(str(error), error=True)
        else:
            log.error("evaluation error", exc_info=(type(error), error, error.__traceback__))
            self.view.set_status(f"Unexpected error: {error}. Details are in the log.", error=True)
        self.failed.emit(str(error))


def family_choice(members: list, name: str = "", *, checked: bool = False) -> dict:
    """One entry per model (``name``, or the name its records share); a model held in several
    formats lists them under it, the fastest (ONNX, int8 before fp32) ticked when ``checked``."""
    def detail(record) -> str:
        return f"{record.name}: {record.format}, sha256 {record.sha256[:12]}…"

    if len(members) == 1:
        return {"key": str(members[0].id), "name": name or members[0].name, "detail": detail(members[0]),
                "checked": checked}
    labels = [format_label(r) for r in members]
    fastest = min(range(len(members)), key=lambda i: ("ONNX int8", "ONNX").index(labels[i])
                  if labels[i].startswith("ONNX") else 9)
    return {"key": "", "name": name or family_name(members),
            "detail": f"{family_name(members)}: one model in {len(members)} formats; tick the ones to evaluate.",
            "formats": [{"key": str(r.id), "name": label, "detail": detail(r), "checked": checked and i == fastest}
                        for i, (r, label) in enumerate(zip(members, labels))]}


def overview(doc: dict) -> dict:
    """The view's summary, matrix and choices, from an evaluation document."""
    models = doc["models"]
    sets = [s for s in doc["sets"] if s["cases"]]
    rest = [d for d in DIMENSIONS if d != "performance"]
    headers = (["Model", "Score", f"Performance\nmean of {len(sets)} sets" if len(sets) > 1 else "Performance"]
               + [f"{set_label(s)}\nF1, n={len(s['cases']):,}" for s in sets]
               + [d.capitalize() for d in rest] + ["Inputs/s", "p95 ms", "Memory MB"])
    rows, colours = [], []
    for m in models:
        r = doc["results"][m["key"]]
        u = r["score"]["utilities"]
        run = r.get("run") or {}
        f1s = [r["sets"][s["key"]]["macro_f1"] for s in sets]
        rows.append([m["name"], num(r["score"]["score"], 1), num(u["performance"], 2)] + [num(f, 2) for f in f1s]
                    + [num(u[d], 2) for d in rest]
                    + [f"{run.get('items_per_second', 0):.0f}", num(run.get("latency_p95_ms"), 1),
                       num(run.get("memory_mb"), 0)])
        colours.append([None, None, u["performance"]] + f1s + [u[d] for d in rest] + [None, None, None])
    weights = doc["options"]["weights"]
    first = doc["results"][models[0]["key"]]
    lines = [f"<b>Score</b> = 100 × Σ weight × utility ÷ Σ weight (weights: "
             + ", ".join(f"{d} {weights[d]:g}" for d in DIMENSIONS) + ")."]
    lines.append(performance_note(sets))
    if first.get("identity_swap"):
        s = first["identity_swap"]
        lines.append(f"Identity swap ({models[0]['name']}): prediction unchanged in {pct(s['consistency'])} "
                     f"of {s['variants']} swaps.")
    if first.get("robustness"):
        rb = first["robustness"]
        kinds = ", ".join(f"{k.replace('_', ' ')} {pct(v['accuracy'])}" for k, v in rb["kinds"].items())
        lines.append(f"Spelling perturbations: accuracy {pct(rb['accuracy'])} vs {pct(rb['clean_accuracy'])} clean ({kinds}).")
    notes = doc.get("notes") or []
    lines += [f"<span style='color:#555'>{n}</span>" for n in notes]
    m_headers = ["Round", "n"] + [elide(m["name"]) for m in models]
    m_rows, m_colours = [], []
    for row in doc["matrix"]["rows"]:
        cells = [row["cells"][m["key"]] for m in models]
        m_rows.append([row["name"], str(row["n"])] + [f"{pct(c['accuracy'])} / F1 {num(c['macro_f1'], 2)}" for c in cells])
        m_colours.append([None, None] + [c["accuracy"] for c in cells])
    if doc["matrix"]["rows"]:
        totals = [doc["results"][m["key"]].get("all_rounds") or {} for m in models]
        m_rows.append(["All rounds", str(sum(r["n"] for r in doc["matrix"]["rows"]))]
                      + [f"{pct(t.get('accuracy'))} / F1 {num(t.get('macro_f1'), 2)}" for t in totals])
        m_colours.append([None, None] + [t.get("accuracy") for t in totals])
    else:
        m_rows.append(["(no round has validated examples yet)", ""] + ["" for _ in models])
        m_colours.append([None] * (2 + len(models)))
    return {
        "warnings": doc.get("warnings") or [], "summary": {"headers": headers, "rows": rows, "colours": colours},
        "explanation": "<br>".join(lines), "matrix": {"headers": m_headers, "rows": m_rows, "colours": m_colours},
        "models": [(m["key"], m["name"]) for m in models],
        "sets": [(s["key"], s["name"]) for s in doc["sets"]], "report": True,
    }


SMALL_SET = 30  # fewer cases than this: one case moves the set's F1 by several points


def set_label(eval_set: dict) -> str:
    """A set's short name: "Round 2", "test_suite_cases_dev", "held-out.csv" (the count goes beside it)."""
    return eval_set["name"].split(" (")[0]


def performance_note(sets: list[dict]) -> str:
    """How Performance is weighted, with each set's size: a few round examples count as much as a suite."""
    sized = ", ".join(f"{set_label(s)} (n={len(s['cases']):,})" for s in sets)
    if len(sets) == 1:
        return f"<b>Performance</b> = macro-F1 on {sized}."
    note = (f"<b>Performance</b> = mean of the macro-F1 of {len(sets)} sets, {PERFORMANCE_WEIGHTING}: "
            f"{sized}. Each set's own F1 is in its column.")
    small = [set_label(s) for s in sets if len(s["cases"]) < SMALL_SET]
    if small:
        note += f" {', '.join(small)}: under {SMALL_SET} cases, a rough figure that still counts fully."
    return note


def elide(name: str, width: int = 36) -> str:
    """Headers do not elide by themselves: keep the start and the end (where ONNX / PyTorch is)."""
    return name if len(name) <= width else name[: width // 2 - 1] + "…" + name[-(width // 2):]


def details(doc: dict, model_key: str, set_key: str) -> dict:
    f = doc["results"][model_key]["sets"][set_key]
    parts = [f"Accuracy <b>{pct(f['accuracy'])}</b>, macro-F1 <b>{num(f['macro_f1'])}</b> over {f['n']} cases."]
    if f.get("target_gap"):
        g = f["target_gap"]
        parts.append(f"Largest gap between target groups: <b>{pct(g['gap'])}</b> ({g['best']} vs {g['worst']}).")
    if f.get("pairs"):
        p = f["pairs"]
        parts.append(f"Pairs: both right in {pct(p['consistency'])} of {p['n']}; prediction flipped with the label "
                     f"in {pct(p['flip_sensitivity'])} of {p['label_flipping']}.")
    functionalities = sorted((f.get("functionalities") or {}).items(), key=lambda kv: (kv[1]["accuracy"], kv[0]))
    return {
        "figures": " ".join(parts),
        "functionalities": [(k, v["accuracy"], f"of {v['n']}") for k, v in functionalities],
        "targets": [(k, v["accuracy"], f"of {v['n']}") for k, v in (f.get("targets") or {}).items()],
        "failing": failing_cases(doc, model_key, set_key),
    }
