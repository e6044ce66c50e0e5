"""The writing assistant's panel state and view-models, without Qt: what is shown for a suggestion
set, when suggestions apply to the text on screen, applying, undoing and redoing, the goals, and
why the panel offers nothing."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from app.core.assist.types import (
    AssistantMode,
    Candidate,
    CheckedSuggestion,
    Generator,
    Goal,
    Unavailable,
)
from app.core.tasks.definition import builtin_tasks_dir, load_task_file
from app.views.assist import PAGE, edit_type_name, suggestion_rows, unavailable_notes
from app.views.assist_session import (
    ARM_OFF_REASON,
    LOOKING_UP,
    NOT_CLASSIFICATION,
    OFF_REASON,
    AssistSession,
)
from app.views.create import DiffKind

HATE = load_task_file(builtin_tasks_dir() / "hate_speech.yaml")
NLI = load_task_file(builtin_tasks_dir() / "nli.yaml")
SENTIMENT = load_task_file(builtin_tasks_dir() / "sentiment.yaml")
QA = load_task_file(builtin_tasks_dir() / "extractive_qa.yaml")
TEXT = "those idiots ruin everything"


@dataclass(frozen=True)
class SuggestionSet:  # the fields the panel reads of app.core.assist.pipeline.SuggestionSet
    suggestions: tuple[CheckedSuggestion, ...]
    unavailable: dict = field(default_factory=dict)


def checked(text: str, *, fools: bool, generator=Generator.OBFUSCATION, edit_type="leetspeak",
            claimed: str | None = None, hate: float = 0.3) -> CheckedSuggestion:
    probabilities = {"hate": hate, "not hate": 1 - hate}
    return CheckedSuggestion(Candidate(text, generator, edit_type, note="idiots → 1d10ts", claimed_label=claimed),
                             probabilities, max(probabilities, key=probabilities.__getitem__), fools, 0.5)


SET = SuggestionSet((checked("those 1d10ts ruin everything", fools=True),
                     checked("those id iots ruin everything", fools=False, edit_type="space", hate=0.8),
                     checked("those morons ruin everything", fools=True, generator=Generator.SUBSTITUTION,
                             edit_type="word_substitution", hate=0.1)),
                    {Generator.SUBSTITUTION: Unavailable.NO_GRADIENTS})


def shown(definition=HATE, inputs=None) -> AssistSession:
    session = AssistSession()
    session.task_opened(definition)
    inputs = inputs or {"text": TEXT}
    session.suggestions_requested(7, inputs)
    assert session.suggestions_arrived(7, inputs, SET)
    return session


def test_rows_show_edit_type_diff_probabilities_and_verdict():
    rows = suggestion_rows(HATE.labels, TEXT, SET.suggestions)
    first, second, third = rows
    assert first.title == "1. Leetspeak (obfuscation)" and first.verdict == "fools the model"
    assert [(p.kind, p.text) for p in first.diff if p.kind is not DiffKind.EQUAL] == [
        (DiffKind.DELETE, "idiots"), (DiffKind.INSERT, "1d10ts")]
    assert first.probability_line == "not hate 70% · hate 30%"  # the model's label first
    assert second.verdict == "the model holds" and second.probability_line.startswith("hate 80%")
    assert third.title == "3. Word substitution"  # the edit type says it all
    assert third.needs_judgement and not first.needs_judgement  # a substituted word may change the meaning
    assert "New text: those 1d10ts ruin everything" in first.accessible_text
    assert edit_type_name("slur_to_description") == "Slur to description"
    assert first.lookalikes == ""
    (homoglyph,) = suggestion_rows(HATE.labels, TEXT, [checked("those \u0456d\u0456ots ruin\u200beverything",
                                                               fools=True, edit_type="homoglyph")])
    assert homoglyph.lookalikes == "look-alike \u0456: Cyrillic; an invisible zero width space"


def test_unavailable_generators_are_said_in_words():
    (note,) = unavailable_notes(SET.unavailable)
    assert note.startswith("Word substitution: ") and "needs the PyTorch form" in note
    assert unavailable_notes([(Generator.RULES, Unavailable.NO_RULES)]) == ("Rule: no rule applies to this text",)
    assert unavailable_notes({}) == ()


def test_while_the_pytorch_form_comes_from_the_server_the_panel_says_so_instead_of_what_is_missing():
    """A team desk fetches the target's PyTorch form at the first Suggest: its line (and bar) replace the
    note that word substitution needs it; a failure says why; once it is here, the line goes."""
    session = shown()
    session.gradients_fetching(0, 0)
    view = session.panel({"text": TEXT}, "hate", offered=True, mode=AssistantMode.ON)
    assert view.fetch_line == "Word substitution: asking the team's server for the target's PyTorch form…"
    assert view.fetch_fraction == 0.0 and not any("PyTorch" in note for note in view.notes)
    session.gradients_fetching(3 * 2**20, 12 * 2**20)
    view = session.panel({"text": TEXT}, "hate", offered=True, mode=AssistantMode.ON)
    assert "3.0 MiB of 12.0 MiB (25%)" in view.fetch_line and view.fetch_fraction == 0.25
    assert len(view.rows) == 3  # the other suggestions stay listed meanwhile
    refused = "Word substitution needs the PyTorch form of T, which the team's server does not have: ..."
    session.gradients_not_fetched(refused)
    view = session.panel({"text": TEXT}, "hate", offered=True, mode=AssistantMode.ON)
    assert view.fetch_line == refused and view.fetch_fraction is None
    assert not any("PyTorch" in note for note in view.notes)
    session.gradients_settled()
    view = session.panel({"text": TEXT}, "hate", offered=True, mode=AssistantMode.ON)
    assert view.fetch_line == "" and view.fetch_fraction is None and "PyTorch" in view.notes[0]


def test_suggestions_apply_only_to_the_text_they_were_made_for():
    session = shown()
    view = session.panel({"text": TEXT}, "hate", offered=True, mode=AssistantMode.ON)
    assert view.available and view.current and len(view.rows) == 3
    assert "3 checked suggestion(s), 2 fool the model" in view.status and "2 fool the model" in view.status
    assert view.notes and "PyTorch" in view.notes[0]

    typed = {"text": TEXT + " today"}
    stale = session.panel(typed, "hate", offered=True, mode=AssistantMode.ON)
    assert not stale.current and "changed since" in stale.status and stale.rows == view.rows
    with pytest.raises(ValueError, match="changed since"):
        session.applying(0, typed)


def test_applying_undoing_and_applying_another():
    session = shown()
    first = session.applying(0, {"text": TEXT})
    assert first.text == "those 1d10ts ruin everything" and first.field == "text"
    assert first.generator == "obfuscation" and first.edit_type == "leetspeak"
    session.reapplied(first.token)  # the editor did it
    assert session.applied == first
    # applied unchanged, the other suggestions still apply (one replaces the other)
    assert session.current({"text": first.text})
    session.unapplied(first.token)  # Ctrl+Z
    assert session.applied is None and session.current({"text": TEXT})
    second = session.applying(2, {"text": TEXT})
    session.reapplied(second.token)
    assert session.applied == second and second.token != first.token
    session.reapplied(first.token)  # a redo the undo stack no longer holds cannot happen twice
    session.unapplied(first.token)
    assert session.applied == second
    session.example_started()
    assert session.applied is None and session.known(second.token) is None and session.shown is None


def test_a_long_set_is_listed_a_page_at_a_time():
    many = SuggestionSet(tuple(checked(f"those idiots{'!' * i} ruin everything", fools=i % 2 == 0)
                               for i in range(1, 25)))
    session = AssistSession()
    session.task_opened(HATE)
    session.suggestions_requested(1, {"text": TEXT})
    session.suggestions_arrived(1, {"text": TEXT}, many)
    first = session.panel({"text": TEXT}, "hate", offered=True, mode="on")
    assert len(first.rows) == PAGE and first.total == 24 and "24 checked suggestion(s), 12 fool" in first.status
    session.list_more()
    second = session.panel({"text": TEXT}, "hate", offered=True, mode="on")
    assert second.rows[:PAGE] == first.rows and [r.rank for r in second.rows] == list(range(1, 2 * PAGE + 1))
    session.list_more()
    assert len(session.panel({"text": TEXT}, "hate", offered=True, mode="on").rows) == 24
    applied = session.applying(23, {"text": TEXT})  # the last one, listed on request
    assert applied.text == "those idiots" + "!" * 24 + " ruin everything"


def test_an_older_request_changes_nothing_and_a_failure_is_said():
    session = AssistSession()
    session.task_opened(HATE)
    session.suggestions_requested(1, {"text": "a"})
    session.suggestions_requested(2, {"text": "ab"})
    assert session.busy
    assert not session.suggestions_arrived(1, {"text": "a"}, SET)
    assert "Generating" in session.panel({"text": "ab"}, "hate", offered=True, mode="on").status
    session.suggestions_failed("No suggestions: the text is too long")
    view = session.panel({"text": "ab"}, "hate", offered=True, mode="on")
    assert not view.busy and view.status == "No suggestions: the text is too long"


def test_goals_and_the_contrast_label():
    session = AssistSession()
    session.task_opened(HATE)
    assert session.target_label("hate") == ("hate", None)
    label, problem = session.target_label(None)
    assert label is None and "Choose your label first" in problem
    session.goal_chosen(Goal.CONTRAST)
    assert session.target_label("hate") == ("not hate", None)  # two labels: the other one
    session.task_opened(SENTIMENT)
    assert session.contrast_choices("positive") == ("negative", "neutral")
    label, problem = session.target_label("positive")
    assert label is None and "Pick the new label" in problem
    session.contrast_label_chosen("negative")
    assert session.target_label("positive") == ("negative", None)


def test_a_contrast_suggestion_offers_its_label_until_the_writer_confirms_it():
    session = AssistSession()
    session.task_opened(HATE)
    session.goal_chosen(Goal.CONTRAST)
    contrast = SuggestionSet((checked("those idiots never ruin everything", fools=True, edit_type="negation",
                                      generator=Generator.RULES, claimed="not hate"),))
    session.suggestions_requested(3, {"text": TEXT})
    session.suggestions_arrived(3, {"text": TEXT}, contrast)
    applied = session.applying(0, {"text": TEXT})
    session.reapplied(applied.token)
    view = session.panel({"text": applied.text}, "hate", offered=True, mode="on")
    assert view.confirm_label == "not hate" and view.goal is Goal.CONTRAST
    assert session.panel({"text": applied.text}, "not hate", offered=True, mode="on").confirm_label is None


def test_nli_suggestions_edit_the_hypothesis_only():
    inputs = {"context": "A man plays a guitar on stage.", "hypothesis": "A man plays music."}
    session = AssistSession()
    session.task_opened(NLI)
    nli_set = SuggestionSet((CheckedSuggestion(Candidate("A man never plays music.", Generator.RULES, "negation"),
                                               {"entailment": 0.2, "neutral": 0.3, "contradiction": 0.5},
                                               "contradiction", True, 0.6),))
    session.suggestions_requested(1, inputs)
    session.suggestions_arrived(1, inputs, nli_set)
    applied = session.applying(0, inputs)
    assert applied.field == "hypothesis"
    assert applied.after == {"context": inputs["context"], "hypothesis": "A man never plays music."}
    (row,) = session.panel(inputs, "entailment", offered=True, mode="on").rows
    assert row.probability_line == "contradiction 50% · entailment 20% · neutral 30%"


@pytest.mark.parametrize("definition, mode, offered, reason", [
    (HATE, AssistantMode.OFF, False, OFF_REASON),
    (HATE, AssistantMode.AB, False, ARM_OFF_REASON),
    (HATE, None, False, LOOKING_UP),
    (QA, AssistantMode.ON, True, NOT_CLASSIFICATION),
])
def test_why_the_panel_offers_nothing(definition, mode, offered, reason):
    session = AssistSession()
    session.task_opened(definition)
    view = session.panel({}, None, offered=offered, mode=mode)
    assert not view.available and view.reason == reason and not view.rows


def test_rows_are_masked_as_a_reading_view_where_the_writer_reads_with_blur_on():
    slurred = SuggestionSet((checked("those bitches ruin everything", fools=True, generator=Generator.RULES,
                                     edit_type="description_to_slur"),), {})
    session = AssistSession()
    session.task_opened(HATE)
    session.suggestions_requested(1, {"text": TEXT})
    assert session.suggestions_arrived(1, {"text": TEXT}, slurred)
    unmasked_row = session.panel({"text": TEXT}, "hate", offered=True, mode="on").rows[0]
    assert "bitches" in unmasked_row.accessible_text  # blur off: as written

    session.reading_chosen(("bitch*",), slurs=True)  # blur on: the rows are built again, masked
    view = session.panel({"text": TEXT}, "hate", offered=True, mode="on")
    (row,) = view.rows
    assert view.slurs
    assert row.text == "those bitches ruin everything"  # what applying puts in
    assert "bitches" not in row.accessible_text and "those ••••••• ruin" in row.accessible_text
    assert [p.text for p in row.diff if p.kind is DiffKind.INSERT] == ["•••••••"]
