"""The blur's core: which characters of a text a reading view masks, robust to the ways a word is
disguised or displayed (emoji, right-to-left text, zero-width characters, case, leetspeak, spacing)."""

import pytest

from app.core.assist.types import WordScore
from app.core.wellbeing.blur import mask_spans, masked_text, normalise, utf16_offsets
from app.core.wellbeing.word_list import InvalidWordList, bundled_words, clean_words, parse_lines

WORDS = ("vermin", "parasite*", "porch monkey", "כלב*", "حشرات")


def masked(text: str, words=WORDS) -> list[str]:
    return [text[s.start:s.end] for s in mask_spans(text, words)]


@pytest.mark.parametrize("text, expected", [
    ("they are all vermin", ["vermin"]),
    ("They Are All VERMIN.", ["VERMIN"]),  # case
    ("vermins, every one", ["vermins"]),  # plural
    ("v3rm1n", ["v3rm1n"]),  # leetspeak digits
    ("VERM!N and verm|n", ["VERM!N", "verm|n"]),  # leetspeak signs
    ("v e r m i n", ["v e r m i n"]),  # spelled out
    ("v.e.r.m.i.n!", ["v.e.r.m.i.n"]),
    ("v e r m i n s, p a r a s i t e s", ["v e r m i n s", "p a r a s i t e s"]),  # spelled-out plurals
    ("v-e-r-m-i-n", ["v-e-r-m-i-n"]),
    ("ver\u200bmin and ver\u00admin", ["ver\u200bmin", "ver\u00admin"]),  # zero-width space, soft hyphen
    ("vérmîn", ["vérmîn"]),  # diacritics
    ("ve\u0301rmin", ["ve\u0301rmin"]),  # a combining accent is part of the word
    ("ＶＥＲＭＩＮ", ["ＶＥＲＭＩＮ"]),  # fullwidth
    ("parasites and parasitelike", ["parasites", "parasitelike"]),  # '*' covers every word it starts
    ("a porch  monkey", ["porch  monkey"]),  # a phrase, whatever the spacing
    ("government environment determine", []),  # no word inside another
    ("vermindful", []),
    ("porch", []),
])
def test_blur_finds_the_words_in_their_disguises(text, expected):
    assert masked(text) == expected


def test_emoji_around_and_between_words_keep_the_spans_and_utf16_offsets_right():
    text = "🐀🐀 vermin 😡 v3rmin🔥"
    spans = mask_spans(text, WORDS)
    assert [text[s.start:s.end] for s in spans] == ["vermin", "v3rmin"]
    utf16 = text.encode("utf-16-le")
    # Qt counts UTF-16 code units: each rat and the fire are two of them
    assert [utf16[s.utf16_start * 2:s.utf16_end * 2].decode("utf-16-le") for s in spans] == ["vermin", "v3rmin"]
    assert (spans[0].start, spans[0].utf16_start) == (3, 5)
    assert masked_text(text, spans) == "🐀🐀 •••••• 😡 ••••••🔥"


def test_right_to_left_words_with_bidi_marks_and_diacritics():
    hebrew = "\u200fהם כלבים\u200f, all of them"
    assert masked(hebrew) == ["כלבים"]
    arabic = "إنهم حَشَرات"  # with harakat (combining) over the word
    spans = mask_spans(arabic, WORDS)
    assert [arabic[s.start:s.end] for s in spans] == ["حَشَرات"]
    assert masked_text(arabic, spans) == "إنهم •••••"  # the combining marks go with the letters
    assert masked("إنهم حشـــرات") == ["حشـــرات"]  # the tatweel stretches a word, it does not break it


def test_model_words_join_the_word_list_and_overlaps_merge():
    text = "those people are vermin and should leave"
    scores = [WordScore("those", 0, 5, 0.05), WordScore("people", 6, 12, 0.4), WordScore("vermin", 17, 23, 0.9),
              WordScore("leave", 35, 40, 0.5), WordScore("should", 28, 34, -0.7)]
    spans = mask_spans(text, WORDS, scores)
    assert [(text[s.start:s.end], s.source) for s in spans] == [
        ("people", "model"), ("vermin", "word list"), ("leave", "model")]  # "those" is too weak, "should" negative
    assert mask_spans(text, (), [WordScore("x", 0, 400, 1.0)]) == ()  # a span beyond the text is ignored


def test_normalise_remembers_where_each_character_came_from():
    folded = normalise("A\u200bß  😀b")
    assert folded.text == "ass b"
    assert folded.origin == (0, 2, 2, 3, 6)
    assert utf16_offsets("a😀b") == [0, 1, 3, 4]


def test_the_bundled_list_and_a_leads_words():
    words = bundled_words("hate_speech")
    assert "vermin" in words and "porch monkey" in words and not any(w.startswith("#") for w in words)
    assert bundled_words("no_such_task") == ()
    assert parse_lines(["# a comment", "", "  rats  # trailing", "x"]) == ["rats", "x"]
    assert clean_words(["Roaches ", "roaches", "ROACHES", "filthy   lot"]) == ("Roaches", "filthy lot")
    with pytest.raises(InvalidWordList, match="'x' has fewer than two letters"):
        clean_words(["fine", "x", "!!"])
