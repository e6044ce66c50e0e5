"""The word-list loader: the shipped lists load; malformed files and changes get messages that say
what is wrong and where."""

from __future__ import annotations

import pytest

from app.core.assist.lexicon import (
    InvalidLexicon,
    ListKind,
    WordChanges,
    load_lexicon,
    parse_entry,
    shipped_lexicon,
)


@pytest.mark.parametrize("code", ["hate_speech", "sentiment", "nli"])
def test_the_shipped_lists_load_and_name_the_tasks_labels(code):
    from app.core.tasks.definition import builtin_tasks_dir, load_task_file

    definition = load_task_file(builtin_tasks_dir() / f"{code}.yaml")
    lexicon = load_lexicon(code, labels=definition.labels)
    assert lexicon.family == code and set(lexicon.labels.values()) <= set(definition.labels)
    assert lexicon.pairs("negations") and lexicon.words("negatable_verbs")


def write(tmp_path, task, name, body):
    folder = tmp_path / task
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(body, encoding="utf-8")


@pytest.mark.parametrize("body, message", [
    ("kind: pairs\ndescription: x\nentries:\n  - [all, no]\n", "put the word in quotes"),
    ("kind: lists\ndescription: x\nentries: [a]\n", "'kind' must be 'words' or 'pairs'"),
    ("kind: words\nentries: [a]\n", "'description' must say what an entry means"),
    ("kind: pairs\ndescription: x\nentries:\n  - [a, b, c]\n", "entry 1: expected a phrase or a pair"),
    ("kind: words\ndescription: x\nentries: []\n", "'entries' must be a non-empty list"),
    ("kind: words\ndescription: x\nentries: [a]\nextra: 1\n", "unknown key(s) extra"),
    ("kind: words\ndescription: x\nentries: [\n", "not valid YAML"),
])
def test_a_malformed_list_file_is_refused_with_its_place(tmp_path, body, message):
    write(tmp_path, "t", "bad_list.yaml", body)
    with pytest.raises(InvalidLexicon) as caught:
        load_lexicon("t", root=tmp_path)
    assert message in str(caught.value) and "bad_list.yaml" in str(caught.value)


def test_rules_file_must_name_the_tasks_labels(tmp_path):
    write(tmp_path, "t", "rules.yaml", "family: sentiment\nlabels: {positive: good}\n")
    with pytest.raises(InvalidLexicon, match="label\\(s\\) good are not labels of t"):
        load_lexicon("t", root=tmp_path, labels=["positive", "negative"])


def test_changes_round_trip_and_are_checked_against_the_lists():
    changes = WordChanges(added={"hedges": (("To be fair,",),), "antonyms": (("superb", "abysmal"),)},
                          removed={"antonyms": (("fast", "slow"),)})
    assert WordChanges.from_json(changes.to_json()) == changes
    lexicon = shipped_lexicon("sentiment")
    lexicon.check_changes(changes)
    changed = lexicon.with_changes(changes)
    assert ("superb", "abysmal") in changed.pairs("antonyms") and ("fast", "slow") not in changed.pairs("antonyms")
    assert "To be fair," in changed.words("hedges")
    with pytest.raises(InvalidLexicon, match="sentiment has no word list 'slurs'"):
        lexicon.check_changes(WordChanges(added={"slurs": (("a", "b"),)}))
    with pytest.raises(InvalidLexicon, match="each entry is a pair written A=B"):
        lexicon.check_changes(WordChanges(added={"antonyms": (("superb",),)}))
    with pytest.raises(InvalidLexicon, match="write them as A=B"):
        parse_entry("superb", ListKind.PAIRS)
    assert parse_entry(" superb =  abysmal ", ListKind.PAIRS) == ("superb", "abysmal")
    with pytest.raises(InvalidLexicon, match="must be an object"):
        WordChanges.from_json(["added"])
    with pytest.raises(InvalidLexicon, match="at most 80 characters"):
        WordChanges.from_json({"added": {"hedges": ["x" * 81]}})
