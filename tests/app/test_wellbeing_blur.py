"""The blur's core: which characters of a text a reading view masks, robust to the ways a word is
disguised or displayed (emoji, right-to-left text, zero-width characters, case, leetspeak, spacing)."""

import pytest

from app.core.text import WordScore
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
    text = "those crooks are vermin and should leave"
    scores = [WordScore("those", 0, 5, 0.05), WordScore("crooks", 6, 12, 0.4), WordScore("vermin", 17, 23, 0.9),
              WordScore("leave", 35, 40, 0.5), WordScore("should", 28, 34, -0.7)]
    spans = mask_spans(text, WORDS, scores)
    assert [(text[s.start:s.end], s.source) for s in spans] == [
        ("crooks", "model"), ("vermin", "word list"), ("leave", "model")]  # "those" is too weak, "should" negative
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


def test_model_masks_never_cover_function_words_and_disguised_insults_are_caught_by_the_list():
    words = bundled_words("hate_speech")
    text = "m0zlems are a d1sease spreading through our towns"
    at = {w: text.index(w) for w in ("m0zlems", "d1sease", "spreading", "our", "towns")}
    scores = [WordScore(w, at[w], at[w] + len(w), score) for w, score in
              (("spreading", 0.9), ("our", 0.8), ("towns", 0.5), ("d1sease", 0.1))]
    spans = mask_spans(text, words, scores)
    shown = {text[s.start:s.end]: s.source for s in spans}
    assert shown["m0zlems"] == "word list" and shown["d1sease"] == "word list"  # leetspeak read as letters
    assert "our" not in shown  # a function word, however much the model leans on it
    phrase = "Those people should all go back"
    scores = [WordScore("people", 6, 12, 0.9), WordScore("should", 13, 19, 0.8), WordScore("back", 27, 31, 0.5)]
    assert [phrase[s.start:s.end] for s in mask_spans(phrase, words, scores)] == ["back"]


@pytest.mark.parametrize("text, expected", [
    ("m\u043ezlems", ["m\u043ezlems"]),  # Cyrillic o, from the assistant's look-alike table
    ("\u0432\u0435rmin", []),  # a Cyrillic ve is not a look-alike of v
    ("v\u0435rm1n", ["v\u0435rm1n"]),  # Cyrillic e and a leetspeak 1 in one word
    ("(vermin) and vermin! and $lut", ["vermin", "vermin", "$lut"]),  # signs as punctuation around a word
])
def test_look_alike_letters_of_other_scripts_read_as_latin(text, expected):
    assert masked(text, bundled_words("hate_speech")) == expected


def test_a_long_list_compiles_to_a_lookup_not_one_pattern():
    # 2,000 entries used to compile to one regex alternation that took seconds per long text; the
    # trie's work grows with the text, so doubling the list leaves each text's masks the same
    import random
    import string

    rng = random.Random(3)
    extra = ["".join(rng.choice(string.ascii_lowercase) for _ in range(rng.randint(4, 12))) for _ in range(2000)]
    text = " ".join(rng.choice(extra[:50]) + rng.choice(["", "s", " and"]) for _ in range(700))
    spans = mask_spans(text, [*WORDS, *extra])
    assert {s.entry for s in spans} <= set(extra[:50]) and len(spans) >= 700


def test_a_lead_word_list_is_one_rule_naming_every_bad_entry():
    with pytest.raises(InvalidWordList) as refused:
        clean_words(["*", ".*", "(a+)+$", "\x00", "k*ke", "vermin"])
    message = str(refused.value)
    assert "'*' has fewer than two letters" in message and "'.*' has fewer than two letters" in message
    assert "'(a+)+$' holds characters no word is written with ())" in message
    assert "'\\x00' holds control characters (\\x00)" in message and "'k*ke'" in message
    assert clean_words(["$lut", "o'brien", "half-breed", "porch monkey", "parasite*", "1488"]) == (
        "$lut", "o'brien", "half-breed", "porch monkey", "parasite*", "1488")


def test_a_list_of_look_alike_spellings_costs_a_bounded_walk_per_word():
    # every i/l spelling of an 11-letter word (2,048 entries) against 2,500 spelled-out "1"s: each
    # word start tries a bounded number of readings instead of the whole trie
    import itertools
    import time

    entries = ["".join(p) for p in itertools.product("il", repeat=11)]
    text = " ".join("1" * 2500)
    began = time.process_time()
    mask_spans(text, entries)
    assert time.process_time() - began < 1  # 0.06 s of CPU here; every reading tried took 2.9 s
    assert masked("we are 1ll1ll1ll1l", entries) == ["1ll1ll1ll1l"]
