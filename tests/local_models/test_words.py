"""Words of the exact text, and tokens grouped onto them, for scripts and tricks annotators use."""

from __future__ import annotations

import pytest

from local_models.words import WordUnit, group_tokens, split_words, utf16_offset


def texts(source: str) -> list[str]:
    words = split_words(source)
    for w in words:
        assert source[w.start:w.end] == w.text  # spans index the exact string
    return [w.text for w in words]


@pytest.mark.parametrize("source, expected", [
    ("", []),
    ("   \n\t ", []),
    ("hello world", ["hello", "world"]),
    ("(hello, world!)", ["(", "hello", ",", "world", "!)"]),
    ('"quoted" ...', ['"', "quoted", '"', "..."]),
    ("don't stop", ["don't", "stop"]),
    # leetspeak and masked swearing stay whole
    ("ur s0 st00pid, sh!t @ss $hit f*ck h4t3rs", ["ur", "s0", "st00pid", ",", "sh!t", "@ss", "$hit", "f*ck", "h4t3rs"]),
    # emoji stand apart from letters, with their joiners, selectors and skin tones
    ("I❤️you", ["I", "❤️", "you"]),
    ("family 👨\u200d👩\u200d👧 time", ["family", "👨\u200d👩\u200d👧", "time"]),
    ("👍🏽nice", ["👍🏽", "nice"]),
    # zero-width characters hide inside words and do not split them
    ("n\u200bice hel\u200dlo", ["n\u200bice", "hel\u200dlo"]),
    ("\u200b", ["\u200b"]),
    # right-to-left scripts, with their own punctuation, in logical order
    ("שלום עולם، مرحبا!", ["שלום", "עולם", "،", "مرحبا", "!"]),
    ("abc \u202eevil\u202c", ["abc", "\u202eevil\u202c"]),
    ("Ça été déjà", ["Ça", "été", "déjà"]),
    ("20°C ™x 1️⃣", ["20°C", "™x", "1️⃣"]),
])
def test_split_words(source, expected):
    assert texts(source) == expected


def test_group_tokens_maps_subwords_onto_words():
    text = "unbelievable h4t3rs"
    # as a WordPiece tokenizer splits them: un ##bel ##iev ##able, h ##4 ##t ##3 ##rs
    offsets = [None, (0, 2), (2, 5), (5, 8), (8, 12), (13, 14), (14, 15), (15, 16), (16, 17), (17, 19), None]
    units = group_tokens(text, 0, offsets)
    assert [(u.text, u.token_positions) for u in units] == [("unbelievable", (1, 2, 3, 4)), ("h4t3rs", (5, 6, 7, 8, 9))]


def test_a_token_across_words_merges_them():
    # a tokenizer that turns "I❤️you" into one unknown token cannot tell the three words apart
    text = "so I❤️you"
    units = group_tokens(text, 0, [None, (0, 2), (3, 9), None])
    assert [(u.text, u.start, u.end, u.token_positions) for u in units] == [("so", 0, 2, (1,)), ("I❤️you", 3, 9, (2,))]


def test_words_the_model_never_saw_have_no_tokens():
    text = "read this \u200b and the rest"
    units = group_tokens(text, 1, [None, (0, 4), (5, 9), None])  # truncated after "this"
    assert all(isinstance(u, WordUnit) and u.segment == 1 for u in units)
    assert [u.seen for u in units] == [True, True, False, False, False, False]


def test_utf16_offsets_count_astral_characters_twice():
    text = "a😀b"
    assert [utf16_offset(text, i) for i in range(4)] == [0, 1, 3, 4]
