"""The Next round dialog's state, free of Qt: the task it is open for, the training choices sent, the
candidate folder being trained or trained, its comparison report, the step whose job is running, and
the rounds a promotion opened for Publish to send.

Every change goes through a method named after what happened (``opened``, ``training_started``,
``compared``, ``job_failed`` …); a method whose precondition does not hold raises ``TransitionError``
rather than leave the state half changed. The Qt controller (app/gui/next_round.py) only translates
between this object, the workers and the dialog. ``training_options`` checks the dialog's choices (apart
from app.views.next_round, which the widgets import: it reaches for the model runtime).

    session.opened("hate_speech")
    session.training_started(choices, candidate_dir)    # -> running TRAIN
    session.job_finished()                              # trained: the candidate is there
    session.comparing_started(); session.job_finished(); session.compared(report, html)
    session.export_started(); session.job_finished(); session.promoted((1, 2))
"""

from __future__ import annotations

from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.core.errors import DynadeskError
from app.views.create_session import TransitionError
from app.views.stage_progress import StageClock

if TYPE_CHECKING:
    from app.core.next_round.round_training import RoundTrainingOptions
    from app.views.next_round import TrainChoices


class Step(StrEnum):
    """The dialog's steps that run a job (one at a time)."""

    TRAIN = "train"
    COMPARE = "compare"
    EXPORT = "export"  # the costly half of promoting: assembling, the ONNX export and its parity check


def training_options(task_code: str, choices: TrainChoices, pairs: str = "") -> RoundTrainingOptions:
    """The training options the choices ask for; a DynadeskError says what is missing or wrong. ``pairs``: the
    label of a pair task's context input (its base data is read as (context, text) pairs); "" otherwise."""
    from app.core.next_round.round_training import BaseDataOptions, RoundTrainingOptions
    from app.core.next_round.variant_training import DEFAULT_VARIANT_WEIGHT
    from local_models.engine import default_num_threads
    from local_models.train import TrainingConfig, parse_label_map

    if not choices.rounds:
        raise DynadeskError("Choose at least one round to learn from.")
    base = None
    if choices.base_path:
        path = Path(choices.base_path).expanduser()
        if not path.is_file():
            raise DynadeskError(f"There is no base data file at {path}; choose the CSV file, or clear the field "
                                "to train on the round examples alone.")
        if not choices.text_column or not choices.label_column:
            raise DynadeskError("Name the base data's text column and label column.")
        if pairs and not choices.context_column:
            raise DynadeskError(f"The task reads ({pairs}, text) pairs: name the base data's {pairs.lower()} column "
                                "too.")
        try:
            label_map = parse_label_map(choices.label_map)
        except ValueError as exc:
            raise DynadeskError(f"The label map is not VALUE=LABEL pairs separated by commas: {exc}") from None
        base = BaseDataOptions(str(path.resolve()), choices.text_column, choices.label_column, label_map,
                               choices.html_unescape, (choices.context_column or None) if pairs else None)
    if choices.suite and not Path(choices.suite).expanduser().is_file():
        raise DynadeskError(f"There is no suite file at {choices.suite}; choose a HateCheck-format CSV or clear the "
                            "field.")
    encoder = None
    if choices.encoder:
        folder = Path(choices.encoder).expanduser()
        if not folder.is_dir():
            raise DynadeskError(f"There is no encoder folder at {folder}; leave the field empty for the packaged one.")
        encoder = str(folder.resolve())
    try:
        learning_rate = float(choices.learning_rate)
    except ValueError:
        learning_rate = -1.0
    if not 0 < learning_rate < 1:
        raise DynadeskError(f"The learning rate '{choices.learning_rate}' is not a number between 0 and 1 "
                            "(e.g. 2e-4).")
    config = TrainingConfig(seed=choices.seed, epochs=choices.epochs, learning_rate=learning_rate,
                            num_threads=default_num_threads())
    return RoundTrainingOptions(task=task_code, rounds=list(choices.rounds), base_data=base,
                                start_from=choices.start_from, include_undecided=choices.include_undecided,
                                imported=list(choices.imported),
                                round_weight=choices.round_weight, encoder=encoder, config=config,
                                variants=DEFAULT_VARIANT_WEIGHT if choices.variants else None,
                                int8="later" if choices.int8_later else "now")


class NextRoundSession:
    """The Next round dialog's state machine (see the module docstring). Read the attributes freely;
    change them only through the methods."""

    def __init__(self) -> None:
        self.task_code = ""  # the task the dialog is open for ("" before the first opening)
        self.context_input = ""  # its context input ("Context" for NLI): its base data is read as pairs
        self.choices: TrainChoices | None = None  # what the last training was asked to do
        self.candidate_dir: Path | None = None  # the candidate being trained or trained; None: none (yet)
        self.report: Any = None  # its ComparisonReport; None: not compared (promoting needs "anyway")
        self.html: Path | None = None  # the report's HTML page
        self.running: Step | None = None  # the step whose job runs (None: no job, or a cancelled one ended)
        self.stages = StageClock()  # the running job's stages: words, counts and time left per stage
        self.publish_rounds: tuple[int, ...] = ()  # what Publish sends: the closed round and the new one

    # Opening ----------------------------------------------------------------------------------------
    def opened(self, task_code: str, context_input: str = "") -> None:
        """The dialog opened (anew) for a task: no candidate, report or promotion yet. A job of an earlier
        dialog may still be ending (a cancelled run): it stays ``running`` until it ends."""
        if not task_code:
            raise TransitionError("the dialog opens for a task")
        self.task_code, self.context_input = task_code, context_input
        self.choices, self.candidate_dir, self.report, self.html = None, None, None, None
        self.publish_rounds = ()

    @property
    def pairs(self) -> bool:
        """Whether the task's base data is read as (context, text) pairs."""
        return bool(self.context_input)

    # Step 1: train --------------------------------------------------------------------------------
    def training_started(self, choices: TrainChoices, candidate_dir: Path) -> None:
        """Training of a new candidate into ``candidate_dir`` began: the previous candidate and its report
        are forgotten (their folder stays on disk)."""
        self._check_idle("train")
        if not self.task_code:
            raise TransitionError("training needs the dialog open for a task")
        self.choices, self.candidate_dir, self.report, self.html = choices, candidate_dir, None, None
        self._start(Step.TRAIN)

    def candidate_name(self, rounds: Sequence[int]) -> str:
        """The candidate's model name, apart from earlier candidates of the same rounds (the name is what
        Create and the leaderboard show): its folder's time stamp."""
        if self.candidate_dir is None:
            raise TransitionError("no candidate is being trained")
        stamp = self.candidate_dir.name.removeprefix(self.task_code + "-")
        return f"{self.task_code} rounds {','.join(map(str, rounds))}, trained {stamp}"

    # Step 2: compare ------------------------------------------------------------------------------
    @property
    def can_compare(self) -> bool:
        return self.running is None and self.candidate_dir is not None and self.choices is not None

    def comparing_started(self) -> None:
        self._check_idle("compare")
        if self.candidate_dir is None or self.choices is None:
            raise TransitionError("there is no trained candidate to compare")
        self.report, self.html = None, None
        self._start(Step.COMPARE)

    def compared(self, report: Any, html: Path) -> None:
        """The comparison's report (a ComparisonReport) and its HTML page arrived."""
        if self.candidate_dir is None:
            raise TransitionError("a comparison without a candidate")
        self.report, self.html = report, html

    def promote_intro(self) -> str:
        """What step 3 says promoting will do, with the round numbers the comparison names."""
        document = self.report.document if self.report is not None else {}
        number = (document.get("current") or {}).get("round")
        now = f"round {number}" if number else "the open round"
        nxt = f"round {number + 1}" if number else "the next round"
        return (f"Promoting closes {now} of {self.task_code} and opens {nxt} with the candidate as its target. The "
                f"candidate is exported to ONNX and parity-checked like the default model; its lineage (parent, "
                f"manifest, comparison) is recorded. Candidate folder: {self.candidate_dir}"
                + (" Its int8 form was left for later: the round opens on the fp32 form and switches to int8 once "
                   "its search passes, in the background (the status bar says so)."
                   if self.choices is not None and self.choices.int8_later else ""))

    # Step 3: promote and publish ------------------------------------------------------------------
    @property
    def can_promote(self) -> bool:
        return self.running is None and self.candidate_dir is not None

    def export_started(self) -> None:
        self._check_idle("promote")
        if self.candidate_dir is None:
            raise TransitionError("there is no trained candidate to promote")
        self._start(Step.EXPORT)

    def promoted(self, publish_rounds: Sequence[int]) -> None:
        """The candidate is the target of a new round; Publish sends ``publish_rounds``."""
        if self.candidate_dir is None:
            raise TransitionError("a promotion without a candidate")
        self.publish_rounds = tuple(publish_rounds)

    @property
    def can_publish(self) -> bool:
        return bool(self.publish_rounds)

    # Jobs -----------------------------------------------------------------------------------------
    def job_finished(self) -> Step:
        """The running step's job ended with its result; returns that step."""
        step = self._running()
        self.running = None
        return step

    def job_failed(self) -> Step:
        """The running step's job failed or was cancelled; returns that step. A training that stopped
        staged its folder and left nothing: there is no candidate."""
        step = self._running()
        self.running = None
        if step == Step.TRAIN:
            self.candidate_dir = None
        return step

    def _start(self, step: Step) -> None:
        self.running, self.stages = step, StageClock()

    def _running(self) -> Step:
        if self.running is None:
            raise TransitionError("no job is running")
        return self.running

    def _check_idle(self, what: str) -> None:
        if self.running is not None:
            raise TransitionError(f"cannot {what} while the {self.running} job runs")
