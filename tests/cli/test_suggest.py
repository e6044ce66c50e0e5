"""`dynadesk suggest` and `dynadesk suggest-words`, in-process, on a real desk whose hate-speech
round 1 has a real small target (a trained classifier: "banana" means hate)."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from app.core.desk import Desk


def run(capsys, data_dir, *args) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(["--data-dir", str(data_dir), *args])
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


@pytest.fixture
def banana_round(data_dir, hate_trigger_model_dir):
    from app.core.services.target_models import register_model

    with Desk(data_dir) as desk:
        lead = desk.people.create("Lee Lead", "lead")
        desk.switch_person(lead.id)
        model = register_model(desk, hate_trigger_model_dir, task_code="hate_speech", name="Trigger model")
        desk.rounds.set_models(desk.tasks.round("hate_speech", 1).id, lead.id, [model.id])
    return data_dir


def test_suggest_prints_checked_suggestions_fooling_first(capsys, banana_round):
    code, out, err = run(capsys, banana_round, "suggest", "--task", "hate_speech", "--label", "hate",
                         "banana women are awful")
    assert code == 0, err
    assert "hate_speech round 1, target Trigger model" in out
    assert "Your text: the model says hate" in out
    header = next(line for line in out.splitlines() if line.startswith("#"))
    assert header.split() == ["#", "fools", "edit", "label", "p(hate)", "p(not", "hate)", "text"]
    first = out.splitlines()[out.splitlines().index(header) + 2]
    assert first.split()[1] == "yes" and "banana" not in first  # the trigger word is what gets obfuscated


def test_suggest_json_is_checked_and_ranked(capsys, banana_round):
    code, out, err = run(capsys, banana_round, "suggest", "--task", "hate_speech", "--label", "hate", "--top", "64",
                         "--json", "banana women are awful")
    assert code == 0, err
    document = json.loads(out)
    assert (document["round"], document["goal"], document["label"], document["models"]) == (
        1, "fool", "hate", ["Trigger model"])
    suggestions = document["suggestions"]
    assert suggestions and document["checked"] >= len(suggestions)
    for s in suggestions:
        assert abs(sum(s["probabilities"].values()) - 1) < 1e-4
        assert s["fools"] == (s["predicted"] != "hate")  # one model: fooled means it answers otherwise
    fools = [s["fools"] for s in suggestions]
    assert fools == sorted(fools, reverse=True)  # fooling ones first
    rules = [s for s in suggestions if s["generator"] == "rules"]
    assert {"group_swap_protected", "hedging"} <= {s["edit_type"] for s in rules}
    assert all(s["claimed_label"] == "hate" for s in rules)  # the fool goal keeps the label


def test_suggest_contrast_pairs_claim_the_new_label(capsys, banana_round):
    code, out, err = run(capsys, banana_round, "suggest", "--task", "hate_speech", "--goal", "contrast",
                         "--label", "not hate", "--top", "64", "--json", "I hate women, banana")
    assert code == 0, err
    suggestions = json.loads(out)["suggestions"]
    negation = next(s for s in suggestions if s["edit_type"] == "negation_added")
    assert negation["text"] == "I don't hate women, banana" and negation["claimed_label"] == "not hate"
    assert negation["fools"] == (negation["predicted"] != "not hate")
    assert all(s["generator"] != "obfuscation" for s in suggestions)  # obfuscation keeps the meaning


@pytest.mark.parametrize("args, message", [
    (["--task", "poetry", "x"], "There is no task 'poetry'"),
    (["--task", "hate_speech", "--round", "9", "x"], "has no round 9"),
    (["--task", "hate_speech", "--label", "spam", "x"], "'spam' is not a label of Hate speech; its labels: 'hate', 'not hate'"),
    (["--task", "hate_speech", "   "], "The text is empty"),
    (["--task", "hate_speech", "--text-label", "hate", "x"], "--text-label is for the contrast goal"),
    (["--task", "sentiment", "The food was great."], "Round 1 of sentiment has no target model"),
    (["--task", "nli", "A man sleeps."], "give it with --context TEXT"),
    (["--task", "extractive_qa", "Who?"], "asks for an answer span"),
])
def test_suggest_explains_what_is_wrong(capsys, banana_round, args, message):
    code, _out, err = run(capsys, banana_round, "suggest", *args)
    assert code == 1 and message in err, err


def test_a_lead_edits_the_word_lists_from_the_command_line(capsys, banana_round, tmp_path):
    assert run(capsys, banana_round, "suggest-words", "--task", "hate_speech", "add", "protected_groups",
               "Sikhs=Sikh", "women=woman")[1].startswith("protected_groups: 1 added, 1 already there")
    code, _out, err = run(capsys, banana_round, "suggest-words", "--task", "hate_speech", "add", "protected_groups",
                          "Sikhs")
    assert code == 1 and "write them as A=B" in err
    code, _out, err = run(capsys, banana_round, "suggest-words", "--task", "hate_speech", "add", "antonyms", "a=b")
    assert code == 1 and "hate_speech has no word list 'antonyms'" in err
    assert run(capsys, banana_round, "suggest-words", "--task", "hate_speech", "remove", "non_protected_groups",
               "politicians=politician")[0] == 0
    code, _out, err = run(capsys, banana_round, "suggest-words", "--task", "hate_speech", "remove", "hedges", "Hmm,")
    assert code == 1 and "'hedges' has no 'Hmm,'" in err
    listed = run(capsys, banana_round, "suggest-words", "--task", "hate_speech", "list", "protected_groups")[1]
    assert "+ Sikhs = Sikh" in listed
    listed = run(capsys, banana_round, "suggest-words", "--task", "hate_speech", "list", "non_protected_groups")[1]
    assert "- politicians = politician  (removed)" in listed
    words = tmp_path / "words.yaml"
    words.write_text("added:\n  hedges: ['To be fair,']\n", encoding="utf-8")
    assert run(capsys, banana_round, "suggest-words", "--task", "hate_speech", "import", str(words))[0] == 0
    exported = run(capsys, banana_round, "suggest-words", "--task", "hate_speech", "export")[1]
    assert "To be fair," in exported and "Sikhs" in exported and "politicians" in exported
    words.write_text("added:\n  hedges: [[a, b]]\n", encoding="utf-8")
    code, _out, err = run(capsys, banana_round, "suggest-words", "--task", "hate_speech", "import", str(words))
    assert code == 1 and "'hedges' holds words: each entry is one phrase" in err
    code, out, _err = run(capsys, banana_round, "suggest", "--task", "hate_speech", "--goal", "contrast",
                          "--label", "not hate", "--top", "64", "--json", "Sikhs are awful banana")
    assert code == 0
    texts = {s["text"] for s in json.loads(out)["suggestions"]}
    assert "To be fair, Sikhs are awful banana" not in texts  # hedging keeps the label: not a contrast edit
    assert "Lawyers are awful banana" in texts  # politicians, removed, no longer offered first
    with Desk(banana_round) as desk:
        annotator = desk.people.create("Ann Annotator", "annotator")
        desk.switch_person(annotator.id)
    code, _out, err = run(capsys, banana_round, "suggest-words", "--task", "hate_speech", "add", "hedges", "Well,")
    assert code == 1 and "lead" in err


def test_an_ensemble_target_gets_word_substitutions_from_a_member_with_gradients(capsys, banana_round,
                                                                                 tiny_classifier_dir):
    from app.core.services.target_models import register_model

    with Desk(banana_round) as desk:
        round_ = desk.tasks.round("hate_speech", 1)
        other = register_model(desk, tiny_classifier_dir, task_code="hate_speech", name="Other model")
        members = [r.id for r in desk.models.round_models(round_.id)] + [other.id]
        desk.rounds.set_models(round_.id, desk.current_person_id, members)  # the lead of the fixture
    code, out, err = run(capsys, banana_round, "suggest", "--task", "hate_speech", "--label", "hate", "--top", "64",
                         "--json", "banana women are awful")
    assert code == 0, err
    document = json.loads(out)
    assert document["models"] == ["Trigger model", "Other model"]
    assert "substitution" not in document["unavailable"]  # an ensemble no longer loses word substitution
    assert any(s["generator"] == "substitution" for s in document["suggestions"])


def test_suggest_offers_slurs_only_with_slurs(capsys, banana_round):
    def edit_types(*extra) -> set[str]:
        code, out, err = run(capsys, banana_round, "suggest", "--task", "hate_speech", "--label", "hate", "--top",
                             "64", "--json", *extra, "banana women are awful")
        assert code == 0, err
        return {s["edit_type"] for s in json.loads(out)["suggestions"]}

    assert "description_to_slur" not in edit_types()
    assert "description_to_slur" in edit_types("--slurs")
