"""The Next round dialog's state machine (app/views/next_round_session.py), without Qt or models: each
transition's effect, and the transitions the present state refuses."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from app.core.errors import DynadeskError
from app.views.create_session import TransitionError
from app.views.next_round import TrainChoices
from app.views.next_round_session import NextRoundSession, Step, training_options

CHOICES = TrainChoices(rounds=(1, 2), include_undecided=False, base_path="", text_column="", label_column="",
                       label_map="", html_unescape=False, start_from="target", round_weight="auto", suite="",
                       epochs=3, seed=0, encoder="")


@dataclass
class Report:
    """A comparison report as far as the session reads it: its document."""

    document: dict[str, Any] = field(default_factory=lambda: {"current": {"round": 2}})


def trained(tmp_path: Path, task: str = "hate_speech") -> NextRoundSession:
    session = NextRoundSession()
    session.opened(task)
    session.training_started(CHOICES, tmp_path / f"{task}-20261128-2301")
    assert session.job_finished() == Step.TRAIN
    return session


def test_a_run_goes_train_compare_export_promote_and_publish(tmp_path):
    session = NextRoundSession()
    assert not session.can_compare and not session.can_promote and not session.can_publish
    session.opened("hate_speech")
    folder = tmp_path / "hate_speech-20261128-2301"
    session.training_started(CHOICES, folder)
    assert (session.running, session.candidate_dir, session.choices) == (Step.TRAIN, folder, CHOICES)
    assert not session.can_compare and not session.can_promote  # one job at a time
    assert session.candidate_name(CHOICES.rounds) == "hate_speech rounds 1,2, trained 20261128-2301"
    assert session.job_finished() == Step.TRAIN and session.running is None
    assert session.can_compare and session.can_promote  # promoting without a comparison is "anyway"

    session.comparing_started()
    assert session.running == Step.COMPARE and session.report is None
    session.job_finished()
    report = Report()
    session.compared(report, folder / "comparison" / "comparison.html")
    assert session.report is report and session.html == folder / "comparison" / "comparison.html"
    assert session.promote_intro().startswith("Promoting closes round 2 of hate_speech and opens round 3 with")
    assert str(folder) in session.promote_intro() and "int8" not in session.promote_intro()

    session.export_started()
    assert session.running == Step.EXPORT and not session.can_promote
    assert session.job_finished() == Step.EXPORT
    session.promoted([2, 3])
    assert session.can_publish and session.publish_rounds == (2, 3)


def test_each_job_has_fresh_stages(tmp_path):
    session = trained(tmp_path)
    session.stages.say("Training…")
    before = session.stages
    session.comparing_started()
    assert session.stages is not before  # the comparison's stages do not continue the training's clock


def test_a_failed_or_cancelled_training_leaves_no_candidate_and_a_failed_comparison_keeps_it(tmp_path):
    session = NextRoundSession()
    session.opened("hate_speech")
    session.training_started(CHOICES, tmp_path / "c")
    assert session.job_failed() == Step.TRAIN
    assert session.candidate_dir is None and not session.can_compare and not session.can_promote
    with pytest.raises(TransitionError):
        session.comparing_started()

    session = trained(tmp_path)
    session.comparing_started()
    assert session.job_failed() == Step.COMPARE
    assert session.candidate_dir is not None and session.report is None and session.can_compare  # compare again
    session.export_started()
    assert session.job_failed() == Step.EXPORT and session.candidate_dir is not None  # promote again


def test_nothing_starts_while_a_job_runs_and_nothing_ends_that_did_not_start(tmp_path):
    session = trained(tmp_path)
    session.comparing_started()
    for start in (lambda: session.training_started(CHOICES, tmp_path / "d"), session.comparing_started,
                  session.export_started):
        with pytest.raises(TransitionError, match="while the compare job runs"):
            start()
    assert session.running == Step.COMPARE and session.candidate_dir == tmp_path / "hate_speech-20261128-2301"
    session.job_finished()
    with pytest.raises(TransitionError):
        session.job_finished()
    with pytest.raises(TransitionError):
        session.job_failed()


def test_reopening_forgets_the_candidate_but_not_a_job_still_ending(tmp_path):
    session = trained(tmp_path)
    session.compared(Report(), tmp_path / "r.html")
    session.promoted([1, 2])
    session.opened("nli", "Context")
    assert (session.task_code, session.pairs, session.candidate_dir, session.report, session.html) == (
        "nli", True, None, None, None)
    assert not session.can_publish and session.choices is None
    assert session.promote_intro().startswith("Promoting closes the open round of nli and opens the next round")

    session = trained(tmp_path)
    session.comparing_started()  # the dialog closes while comparing; the cancelled job ends after it reopens
    session.opened("hate_speech")
    assert session.running == Step.COMPARE
    assert session.job_failed() == Step.COMPARE and session.running is None
    with pytest.raises(TransitionError):
        session.opened("")


def test_training_needs_an_open_task_and_results_need_a_candidate(tmp_path):
    session = NextRoundSession()
    with pytest.raises(TransitionError):
        session.training_started(CHOICES, tmp_path / "c")
    with pytest.raises(TransitionError):
        session.compared(Report(), tmp_path / "r.html")
    with pytest.raises(TransitionError):
        session.export_started()
    with pytest.raises(TransitionError):
        session.promoted([1])
    with pytest.raises(TransitionError):
        session.candidate_name([1])
    assert session.running is None and session.candidate_dir is None


def test_the_promote_intro_says_when_the_int8_form_follows(tmp_path):
    session = NextRoundSession()
    session.opened("hate_speech")
    session.training_started(replace(CHOICES, int8_later=True), tmp_path / "c")
    session.job_finished()
    assert "Its int8 form was left for later" in session.promote_intro()


def test_the_choices_become_training_options_or_a_message_saying_what_to_fix(tmp_path):
    base = tmp_path / "nli-base.csv"
    base.write_text("premise,hypothesis,label\na,b,0\n", encoding="utf-8")
    encoder = tmp_path / "encoder"
    encoder.mkdir()
    chosen = replace(CHOICES, base_path=str(base), text_column="hypothesis", label_column="label",
                     label_map="0=entailment, 1=neutral", context_column="premise", encoder=str(encoder),
                     learning_rate="1e-3", imported=("snli",), int8_later=True, seed=7, epochs=2)
    options = training_options("nli", chosen, "Context")
    assert (options.task, options.rounds, options.imported, options.int8, options.encoder) == (
        "nli", [1, 2], ["snli"], "later", str(encoder.resolve()))
    assert options.base_data is not None and options.base_data.path == str(base.resolve())
    assert (options.base_data.context_column, options.base_data.label_map) == (
        "premise", {"0": "entailment", "1": "neutral"})
    assert (options.config.seed, options.config.epochs, options.config.learning_rate) == (7, 2, 1e-3)
    assert training_options("hate_speech", chosen).base_data.context_column is None  # a single-text task

    for wrong, message in (
            (replace(chosen, rounds=()), "Choose at least one round"),
            (replace(chosen, base_path=str(tmp_path / "gone.csv")), "There is no base data file at"),
            (replace(chosen, label_column=""), "Name the base data's text column and label column"),
            (replace(chosen, context_column=""), "name the base data's context column too"),
            (replace(chosen, label_map="entailment"), "The label map is not VALUE=LABEL pairs"),
            (replace(chosen, suite=str(tmp_path / "suite.csv")), "There is no suite file at"),
            (replace(chosen, encoder=str(tmp_path / "nowhere")), "There is no encoder folder at"),
            (replace(chosen, learning_rate="fast"), "The learning rate 'fast' is not a number between 0 and 1"),
            (replace(chosen, learning_rate="1.5"), "is not a number between 0 and 1")):
        with pytest.raises(DynadeskError, match=message):
            training_options("nli", wrong, "Context")
    assert training_options("nli", replace(chosen, base_path=""), "Context").base_data is None  # rounds alone
