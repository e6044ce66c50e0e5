"""The obfuscation generator makes the spellings it names, and never breaks the text around them."""

from __future__ import annotations

import pytest

from app.core import spellings
from app.core.assist import obfuscation
from app.core.assist.base import GeneratorUnavailable
from app.core.assist.types import GenerationContext, Generator, Goal, Unavailable
from app.core.text import WordScore, words


def context(text: str, scores: dict[str, float], goal: Goal = Goal.FOOL) -> GenerationContext:
    scored = tuple(WordScore(w.text, w.start, w.end, scores.get(w.text, 0.0)) for w in words(text))
    return GenerationContext(text=text, goal=goal, writer_label="hate", model_label="hate",
                             labels=("hate", "not hate"), task_code="hate_speech", words=scored)


def by_type(candidates) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for c in candidates:
        out.setdefault(c.edit_type, []).append(c.text)
    return out


def test_the_most_attributed_word_gets_hatechecks_spelling_variations():
    made = obfuscation.generate(context("I hate women.", {"hate": 1.0, "women": 0.2}))
    kinds = by_type(made)
    assert set(kinds) == set(obfuscation.EDIT_TYPES)
    assert all(c.generator == Generator.OBFUSCATION for c in made)
    # HateCheck's own cases: spell_char_swap_h "haet", spell_leet_h "h4te", spell_space_add_h "h a t e",
    # spell_space_del_h "Ihate"
    assert "I haet women." in kinds["char_swap"]
    assert "I h4te women." in kinds["leetspeak"]
    assert "I h a t e women." in kinds["space_added"]
    assert "Ihate women." in kinds["space_removed"]
    assert "I hte women." in kinds["char_delete"]
    assert "I 😡 women." in kinds["emoji"]
    homoglyph = kinds["homoglyph"][0]
    assert homoglyph != "I hate women." and homoglyph.isascii() is False
    assert len(homoglyph) == len("I hate women.")
    # the strongest word comes first; the second word is respelt too, after it
    assert made[0].text.startswith("I h") and "women" in made[0].text
    assert any("w0men" in c.text for c in made)
    assert all(c.note and "→" in c.note for c in made)


def test_words_toward_the_label_come_first_and_short_words_are_left_alone():
    made = obfuscation.generate(context("I am so nice to you", {"nice": -1.0, "so": 0.9, "you": 0.5}))
    respelt = [c.note.split("'")[1] for c in made]
    assert not any(old in ("so", "I", "am", "to") for old in respelt)  # under three letters: typos, not tests
    firsts = [k for k, old in enumerate(respelt) if "nice" in old]
    lasts = [k for k, old in enumerate(respelt) if old == "you"]
    assert lasts and firsts and max(lasts) < min(firsts)  # "you" pushes toward the label: respelt first


def test_emoji_right_to_left_and_zero_width_text_stays_whole():
    text = "I h\u200date ש\u200fלום 😡 you haters 👩‍👩‍👧"
    made = obfuscation.generate(context(text, {"h\u200date": 1.0, "haters": 0.8, "ש\u200fלום": 0.6}))
    assert made
    for candidate in made:
        assert "😡" in candidate.text and "👩‍👩‍👧" in candidate.text  # emoji sequences untouched
        assert candidate.text.encode("utf-8").decode("utf-8") == candidate.text
        if candidate.edit_type not in ("space_removed",):
            # only the chosen word's span changed: the rest of the text is the same characters
            before, after = text.split(candidate.note.split("'")[1], 1)
            assert candidate.text.startswith(before) and candidate.text.endswith(after)
    zero_width = [c for c in made if "h\u200d" in c.note and c.edit_type in ("char_swap", "leetspeak", "char_delete")]
    assert zero_width and all("\u200d" in c.text for c in zero_width)  # the joiner stays inside its word
    assert not any(c.edit_type == "space_added" and "\u200d" in c.note for c in made)  # spacing would split it
    hebrew = [c for c in made if "ש" in c.note]
    assert hebrew and all("\u200f" in c.text for c in hebrew)  # the right-to-left mark kept
    assert {c.edit_type for c in hebrew} <= {"char_swap", "char_delete", "space_removed", "homoglyph"}


def test_combining_marks_stay_on_their_letter():
    import unicodedata

    text = "those cafe\u0301s are vile"  # decomposed: "e" + combining acute
    made = obfuscation.generate(context(text, {"cafe\u0301s": 1.0}))
    assert made
    for candidate in made:
        if candidate.edit_type in ("emoji", "space_removed"):
            continue
        marks = [i for i, ch in enumerate(candidate.text) if unicodedata.combining(ch)]
        assert len(marks) == 1 and candidate.text[marks[0] - 1] == "e"


def test_it_says_why_it_gives_nothing():
    with pytest.raises(GeneratorUnavailable) as contrast:
        obfuscation.generate(context("I hate women.", {"hate": 1.0}, goal=Goal.CONTRAST))
    assert contrast.value.reason == Unavailable.NOT_FOR_GOAL
    with pytest.raises(GeneratorUnavailable) as unexplained:
        obfuscation.generate(GenerationContext("I hate women.", Goal.FOOL, "hate", "hate", ("hate", "not hate"),
                                               "hate_speech", ()))
    assert unexplained.value.reason == Unavailable.NO_ATTRIBUTIONS
    with pytest.raises(GeneratorUnavailable) as nothing:
        obfuscation.generate(context("😡 😡 !!", {"😡": 1.0}))
    assert nothing.value.reason == Unavailable.NO_WORDS


def test_a_wrong_attribution_span_is_skipped_not_applied_elsewhere():
    text = "I hate women."
    stale = GenerationContext(text, Goal.FOOL, "hate", "hate", ("hate", "not hate"), "hate_speech",
                              (WordScore("hate", 0, 4, 1.0), WordScore("women", 7, 12, 0.5)))
    made = obfuscation.generate(stale)
    assert made and all("women" in c.note and c.text.startswith("I hate") for c in made)


def test_the_tables_ship_and_load(tmp_path):
    tables = spellings.load_tables()
    assert tables.leet["e"] == "3" and tables.homoglyphs["a"] == "\u0430" and tables.emoji["hate"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("leet: [1, 2]\n", encoding="utf-8")
    with pytest.raises(ValueError, match="'leet' must map strings to strings"):
        spellings.load_tables(bad)
