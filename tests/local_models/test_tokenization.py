"""Offsets into the exact text, truncation that says what it cut, and inputs that are refused."""

from __future__ import annotations

import pytest

from local_models.errors import CorruptModel, InputTooLarge, TokenizerMissing
from local_models.tokenization import TextEncoder, load_tokenizer
from tests.model_fixtures import minilm_dir


@pytest.fixture(scope="module")
def encoder() -> TextEncoder:
    return TextEncoder.from_folder(minilm_dir(), max_length=16)


def spans(encoder, text):
    batch = encoder.encode([text])
    return [text[s:e] for s, e in (o for o in batch.segment_offsets(0, 0) if o is not None)]


@pytest.mark.parametrize("text, pieces", [
    ("Hello World", ["Hello", "World"]),
    ("Ça été", ["Ça", "ét", "é"]),  # lower-cased and accent-stripped for the model, exact here
    ("n\u200bigger", ["n\u200bi", "gger"]),  # the zero-width space is dropped by the model, kept in the span
    ("I ❤️ you", ["I", "❤", "you"]),
    ("שלום", ["ש", "ל", "ו", "ם"]),
])
def test_offsets_index_the_exact_text(encoder, text, pieces):
    assert spans(encoder, text) == pieces


def test_batch_is_padded_with_masks(encoder):
    batch = encoder.encode(["a b c d e", "a"])
    assert batch.input_ids.shape == (2, 7)
    assert batch.attention_mask.tolist() == [[1] * 7, [1, 1, 1, 0, 0, 0, 0]]
    assert batch.lengths == [7, 3]
    assert batch.input_ids[1, 3:].tolist() == [encoder.pad_token_id] * 4


def test_empty_text_is_just_the_special_tokens(encoder):
    batch = encoder.encode([""])
    assert batch.lengths == [2] and batch.truncated == [False] and batch.seen_chars == [(0,)]


def test_long_text_is_truncated_and_says_where(encoder):
    text = "one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen"
    batch = encoder.encode([text])
    assert batch.lengths == [16] and batch.truncated == [True]
    assert batch.seen_chars == [(len("one two three four five six seven eight nine ten eleven twelve thirteen fourteen"),)]


def test_pairs_keep_the_segments_apart(encoder):
    batch = encoder.encode([("is it?", "yes it is")])
    assert batch.token_type_ids[0].tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 1]
    assert [o[0] for o in batch.offsets[0] if o is not None] == [0, 0, 0, 1, 1, 1]
    assert batch.truncated == [False] and batch.seen_chars == [(6, 9)]


def test_only_second_truncation_keeps_the_whole_question():
    encoder = TextEncoder.from_folder(minilm_dir(), max_length=12, pair_truncation="only_second")
    context = "alpha beta gamma delta epsilon zeta eta theta iota kappa"
    batch = encoder.encode([("what is it?", context)])
    assert batch.lengths == [12] and batch.truncated == [True]
    assert batch.seen_chars[0][0] == len("what is it?")
    assert batch.seen_chars[0][1] == len("alpha beta gamma delta epsilon")


def test_longest_first_truncation_shortens_the_longer_text(encoder):
    batch = encoder.encode([("a b c d e f g h i j k l m n", "x y")])
    assert batch.lengths == [16] and batch.truncated == [True]
    assert batch.seen_chars == [(len("a b c d e f g h i j k"), 3)]


def test_huge_text_is_cut_before_tokenizing_and_flagged(encoder):
    text = "word " * 200_000  # a megabyte pasted by mistake
    batch = encoder.encode([text])
    assert batch.truncated == [True] and batch.lengths == [16]
    assert batch.seen_chars[0][0] < 100


def test_absurd_inputs_are_refused(encoder):
    with pytest.raises(InputTooLarge, match="characters"):
        encoder.encode(["x" * 5_000_001])
    with pytest.raises(TypeError):
        encoder.encode([42])
    with pytest.raises(TypeError):
        encoder.encode([("only one",)])


def test_missing_and_broken_tokenizers(tmp_path):
    with pytest.raises(TokenizerMissing, match="tokenizer.json"):
        load_tokenizer(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{ not json")
    with pytest.raises(CorruptModel, match="not a readable tokenizer"):
        load_tokenizer(tmp_path)


def test_vocab_txt_alone_is_enough(tmp_path):
    import shutil

    shutil.copy2(minilm_dir() / "vocab.txt", tmp_path / "vocab.txt")
    shutil.copy2(minilm_dir() / "tokenizer_config.json", tmp_path / "tokenizer_config.json")
    encoder = TextEncoder.from_folder(tmp_path, max_length=8)
    assert spans(encoder, "Hello there") == ["Hello", "there"]
