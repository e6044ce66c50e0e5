"""Tokenization that keeps character offsets into the exact text, and says when it truncates.

Only fast (Rust ``tokenizers``) tokenizers are used: they give offsets into the original
string however the text is normalised (lower-casing, accents, dropped zero-width characters).
Truncation is done here rather than by the tokenizer, so that every result knows which
segment was cut and how many characters of it the model read.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from local_models.errors import CorruptModel, InputTooLarge, TokenizerMissing

if TYPE_CHECKING:
    from tokenizers import Tokenizer

log = logging.getLogger(__name__)

ModelInput = str | tuple[str, str]
"""One text, or a pair (premise and hypothesis; question and context)."""

TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.txt", "vocab.json",
    "merges.txt", "spiece.model", "sentencepiece.bpe.model", "added_tokens.json",
)
# Characters are cut before tokenizing only when a text is so long that the model cannot
# possibly read past this many characters per token of its budget; this bounds the time a
# pasted book takes, and the result still says it was truncated.
CHARS_PER_TOKEN_BOUND = 64
MAX_INPUT_CHARS = 5_000_000


def has_tokenizer(folder: Path) -> bool:
    return (folder / "tokenizer.json").is_file() or (folder / "vocab.txt").is_file() or (
        (folder / "tokenizer_config.json").is_file() and any((folder / f).is_file() for f in TOKENIZER_FILES[4:])
    )


def tokenizer_files(folder: Path) -> list[Path]:
    """The files of ``folder`` that define its tokenizer (part of a model's checksum)."""
    return [folder / name for name in TOKENIZER_FILES if (folder / name).is_file()]


def load_tokenizer(folder: Path) -> Tokenizer:
    """A ``tokenizers.Tokenizer`` from a model or tokenizer folder, never from the network."""
    from tokenizers import Tokenizer

    folder = Path(folder)
    if not folder.is_dir() or not has_tokenizer(folder):
        raise TokenizerMissing(
            f"No tokenizer in {folder}: expected tokenizer.json (or vocab.txt). "
            "Give the folder that holds the model's tokenizer."
        )
    path = folder / "tokenizer.json"
    if path.is_file():
        try:
            return Tokenizer.from_file(str(path))
        except Exception as exc:  # the Rust side raises plain Exceptions for every parse problem
            raise CorruptModel(f"{path} is not a readable tokenizer ({_first_line(exc)}).") from exc
    try:
        from transformers import AutoTokenizer

        slow_or_fast = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    except Exception as exc:
        raise TokenizerMissing(f"The tokenizer in {folder} could not be loaded ({_first_line(exc)}).") from exc
    backend: Tokenizer | None = getattr(slow_or_fast, "backend_tokenizer", None)
    if backend is None:
        raise TokenizerMissing(
            f"The tokenizer in {folder} has no fast (offset-keeping) version; Dynadesk needs one "
            "to map results onto the text. Save it with tokenizer.json."
        )
    return backend


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or exc.__class__.__name__
    return text.splitlines()[0][:300]


@dataclass
class EncodedBatch:
    """Model inputs for a batch, padded to its longest item, with what maps them back to text."""

    inputs: list[ModelInput]
    input_ids: np.ndarray  # int64 [batch, length]
    attention_mask: np.ndarray  # int64 [batch, length]
    token_type_ids: np.ndarray  # int64 [batch, length]
    # offsets[i][p]: (segment, start, end) in that segment's text for token p of item i; None for
    # special tokens and padding
    offsets: list[list[tuple[int, int, int] | None]]
    truncated: list[bool]
    seen_chars: list[tuple[int, ...]]  # per item, per segment: characters of that segment the model read
    lengths: list[int] = field(default_factory=list)  # real tokens per item, specials included

    def __len__(self) -> int:
        return len(self.inputs)

    def segments(self, i: int) -> tuple[str, ...]:
        item = self.inputs[i]
        return (item,) if isinstance(item, str) else tuple(item)

    def segment_offsets(self, i: int, segment: int) -> list[tuple[int, int] | None]:
        """Per input position of item i: the token's span in ``segment``, or None."""
        return [(o[1], o[2]) if o is not None and o[0] == segment else None for o in self.offsets[i]]


class TextEncoder:
    """Turns texts and pairs into padded model inputs; safe to share within one thread."""

    def __init__(self, tokenizer: Tokenizer, max_length: int, *, pair_truncation: str = "longest_first",
                 pad_token_id: int | None = None, mask_token: str | None = None):
        if pair_truncation not in ("longest_first", "only_second", "only_first"):
            raise ValueError(f"unknown pair truncation {pair_truncation!r}")
        padding = tokenizer.padding
        self._tokenizer = tokenizer
        tokenizer.no_truncation()
        tokenizer.no_padding()
        self.max_length = int(max_length)
        self.pair_truncation = pair_truncation
        self.vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
        self.pad_token_id = _first_not_none(
            pad_token_id, padding["pad_id"] if padding else None,
            *(tokenizer.token_to_id(t) for t in ("[PAD]", "<pad>")), 0,
        )
        candidates = (mask_token, "[MASK]", "<mask>")
        self.mask_token_id = _first_not_none(*(tokenizer.token_to_id(t) for t in candidates if t), None)
        self._specials = (tokenizer.num_special_tokens_to_add(False), tokenizer.num_special_tokens_to_add(True))
        if self.max_length <= self._specials[1] + 1:
            raise ValueError(f"max_length {max_length} leaves no room for text")

    @classmethod
    def from_folder(cls, folder: Path, max_length: int | None = None, **kwargs: Any) -> TextEncoder:
        tokenizer = load_tokenizer(folder)
        config = _read_json(Path(folder) / "tokenizer_config.json")
        special = _read_json(Path(folder) / "special_tokens_map.json")
        mask = _token_text(config.get("mask_token")) or _token_text(special.get("mask_token"))
        if max_length is None:
            declared = config.get("model_max_length")
            truncation = tokenizer.truncation
            max_length = (int(declared) if isinstance(declared, (int, float)) and declared < 1_000_000
                          else truncation["max_length"] if truncation else 512)
        return cls(tokenizer, max_length, mask_token=mask, **kwargs)

    def vocabulary(self) -> dict[str, int]:
        """Every token of the tokenizer (added ones included) and its id."""
        return dict(self._tokenizer.get_vocab(with_added_tokens=True))

    def special_tokens(self) -> set[str]:
        """The tokenizer's special tokens ([CLS], [SEP], [PAD], ...)."""
        decoder = self._tokenizer.get_added_tokens_decoder()
        return {t.content for t in decoder.values() if t.special}

    def encode(self, inputs: Sequence[ModelInput]) -> EncodedBatch:
        items = [_check_input(x) for x in inputs]
        if not items:
            raise ValueError("nothing to encode")
        char_bound = CHARS_PER_TOKEN_BOUND * self.max_length
        firsts = [x if isinstance(x, str) else x[0] for x in items]
        seconds = [None if isinstance(x, str) else x[1] for x in items]
        cut_first = [len(t) > char_bound for t in firsts]
        cut_second = [s is not None and len(s) > char_bound for s in seconds]
        enc_first = self._tokenizer.encode_batch([t[:char_bound] for t in firsts], add_special_tokens=False)
        second_of = {i: s for i, s in enumerate(seconds) if s is not None}
        pair_idx = list(second_of)
        enc_second_list = self._tokenizer.encode_batch([second_of[i][:char_bound] for i in pair_idx],
                                                       add_special_tokens=False) if pair_idx else []
        enc_second = dict(zip(pair_idx, enc_second_list))

        rows, offsets, truncated, seen, lengths = [], [], [], [], []
        for i, _item in enumerate(items):
            a, b = enc_first[i], enc_second.get(i)
            keep_a, keep_b = self._budget(len(a), None if b is None else len(b))
            cut_a = cut_first[i] or keep_a < len(a)
            cut_b = b is not None and (cut_second[i] or keep_b < len(b))
            seen_a = len(firsts[i]) if not cut_a else (a.offsets[keep_a - 1][1] if keep_a else 0)
            if keep_a < len(a):
                a.truncate(keep_a)
            seen_i = [seen_a]
            if b is not None:
                seen_i.append(len(second_of[i]) if not cut_b else (b.offsets[keep_b - 1][1] if keep_b else 0))
                if keep_b < len(b):
                    b.truncate(keep_b)
            final = self._tokenizer.post_process(a, b, add_special_tokens=True)
            rows.append((final.ids, final.type_ids))
            offsets.append(_segment_offsets(final.offsets, final.special_tokens_mask, keep_a))
            truncated.append(cut_a or cut_b)
            seen.append(tuple(seen_i))
            lengths.append(len(final.ids))

        width = max(lengths)
        ids = np.full((len(items), width), self.pad_token_id, dtype=np.int64)
        mask = np.zeros((len(items), width), dtype=np.int64)
        types = np.zeros((len(items), width), dtype=np.int64)
        for i, (row_ids, row_types) in enumerate(rows):
            n = len(row_ids)
            ids[i, :n] = row_ids
            mask[i, :n] = 1
            types[i, :n] = row_types
        for row in offsets:
            row.extend([None] * (width - len(row)))
        return EncodedBatch(items, ids, mask, types, offsets, truncated, seen, lengths)

    def _budget(self, len_a: int, len_b: int | None) -> tuple[int, int]:
        """How many tokens of each segment fit, by the chosen pair truncation strategy."""
        if len_b is None:
            return min(len_a, self.max_length - self._specials[0]), 0
        room = self.max_length - self._specials[1]
        if len_a + len_b <= room:
            return len_a, len_b
        if self.pair_truncation == "only_second":
            return min(len_a, room - 1), max(room - len_a, 1) if len_a < room else 1
        if self.pair_truncation == "only_first":
            return max(room - len_b, 1) if len_b < room else 1, min(len_b, room - 1)
        # longest_first: shorten the longer one, one token at a time, until both fit
        half = room // 2
        if len_a <= half:
            return len_a, room - len_a
        if len_b <= half:
            return room - len_b, len_b
        return room // 2, room - room // 2


def _segment_offsets(token_offsets: Sequence[tuple[int, int]], special_mask: Sequence[int],
                     first_count: int) -> list[tuple[int, int, int] | None]:
    """Post-processors only add special tokens, in order: the first ``first_count`` ordinary
    tokens belong to segment 0 and the rest to segment 1, whatever the template."""
    out: list[tuple[int, int, int] | None] = []
    ordinary = 0
    for (start, end), special in zip(token_offsets, special_mask):
        if special:
            out.append(None)
            continue
        out.append((0 if ordinary < first_count else 1, start, end))
        ordinary += 1
    return out


def _check_input(item: object) -> ModelInput:
    parts: tuple[str, ...]
    if isinstance(item, str):
        parts = (item,)
    elif isinstance(item, (tuple, list)) and len(item) == 2 and all(isinstance(p, str) for p in item):
        item = (item[0], item[1])
        parts = item
    else:
        raise TypeError(f"a model input is a text or a pair of texts, not {type(item).__name__}")
    for part in parts:
        if len(part) > MAX_INPUT_CHARS:
            raise InputTooLarge(
                f"A text of {len(part):,} characters is beyond what Dynadesk sends to a model "
                f"({MAX_INPUT_CHARS:,}); shorten it."
            )
    return item


def _first_not_none(*values: Any) -> Any:
    for value in values:
        if value is not None:
            return value
    return None


def _token_text(value: object) -> str | None:
    if isinstance(value, dict):  # {"content": "[MASK]", ...} in newer files
        value = value.get("content")
    return value if isinstance(value, str) else None


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CorruptModel(f"{path} is not valid JSON ({_first_line(exc)}).") from exc
    return data if isinstance(data, dict) else {}
