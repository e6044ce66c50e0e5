"""The frozen layers' outputs kept across training runs: a warm cache gives the very tensors a cold run
computes (so the trained weights are the same bit for bit), damage is rebuilt with a log line, and the
cache stays within its bound."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from local_models import frozen_cache
from local_models.frozen_cache import FrozenCache, cache_size, frozen_states
from local_models.progress import Progress
from local_models.tokenization import TextEncoder
from local_models.train import LabelledData, TrainingConfig, _classification_model, train_classifier
from tests.model_fixtures import LABELS, trigger_sentences

CONFIG = dict(epochs=1, batch_size=16, max_length=32, num_threads=1, learning_rate=2e-3)


@pytest.fixture
def rows():
    return trigger_sentences(120, seed=31, labels=LABELS)


def _states(base_dir, texts, cache):
    model = _classification_model(base_dir, list(LABELS), 13)
    encoder = TextEncoder.from_folder(base_dir, max_length=32)
    return frozen_states(model, encoder, texts, 1, base_dir=base_dir, max_length=32, num_threads=1,
                         progress=Progress(), cache=cache)


def _train(base_dir, rows, out, cache):
    data = LabelledData([t for t, _ in rows], [LABELS.index(lb) for _, lb in rows], list(LABELS))
    report = train_classifier(data, out, base_dir=base_dir, config=TrainingConfig(**CONFIG), frozen_cache=cache)
    return load_file(out / "trained_part.safetensors"), report.frozen_cache


def test_a_warm_cache_trains_the_same_tensors_as_a_cold_one_and_as_no_cache(tiny_base_dir, rows, tmp_path):
    cache = FrozenCache(tmp_path / "cache")
    none, use_none = _train(tiny_base_dir, rows, tmp_path / "none", None)
    cold, use_cold = _train(tiny_base_dir, rows, tmp_path / "cold", cache)
    warm, use_warm = _train(tiny_base_dir, rows, tmp_path / "warm", cache)
    assert not use_none["used"]
    assert use_cold["computed"] == len({t for t, _ in rows}) and use_cold["from_cache"] == 0
    assert use_warm["from_cache"] == len(rows) and use_warm["computed"] == 0
    for other in (cold, warm):
        assert other.keys() == none.keys()
        assert all(other[k].numpy().tobytes() == none[k].numpy().tobytes() for k in none)


def test_states_do_not_depend_on_which_texts_were_cached_before(tiny_base_dir, rows, tmp_path):
    """A run that finds some texts cached (from another run's batches) gets what computing all gives."""
    texts = [t for t, _ in rows]
    alone, _ = _states(tiny_base_dir, texts, None)
    cache = FrozenCache(tmp_path / "cache")
    _states(tiny_base_dir, texts[::3] + ["a text only the first run saw"], cache)
    mixed, use = _states(tiny_base_dir, texts, cache)
    assert use.from_cache == len(texts[::3]) and use.computed == len(set(texts)) - len(set(texts[::3]))
    assert all(torch.equal(a, b) for a, b in zip(alone, mixed))
    singles = [_states(tiny_base_dir, [text], None)[0][0] for text in texts[:24]]
    assert all(torch.equal(a, b) for a, b in zip(alone, singles))  # a batch of one: the same bits again


@pytest.fixture
def threads():
    """Sets torch's thread count for a test and restores it after (the kernels chosen depend on it)."""
    before = torch.get_num_threads()
    yield torch.set_num_threads
    torch.set_num_threads(before)


@pytest.mark.parametrize("count", [1, 2])
def test_a_texts_states_are_the_same_bits_alone_or_with_any_company(tiny_base_dir, threads, count):
    """Short texts are where the matrix products change kernels with their row count (batch x tokens: on an AMD
    EPYC, 1-3 rows with one thread, up to 11 with two), so texts of 3 to 12 tokens are computed alone, in small
    groups and all at once; every text's states must be the same bits each time."""
    threads(count)
    words = ("red blue green city river garden teacher doctor friend walked talked waited smiled near "
             "behind under over today slowly always").split()
    texts = list(dict.fromkeys(" ".join(words[(i * 7 + k) % len(words)] for k in range(n))
                               for n in range(1, 11) for i in range(2)))
    model = _classification_model(tiny_base_dir, list(LABELS), 13)
    encoder = TextEncoder.from_folder(tiny_base_dir, max_length=32)
    assert set(encoder.encode(texts).lengths) == set(range(3, 13))  # one word is three tokens with CLS/SEP

    def states(group):
        return frozen_states(model, encoder, group, 1, base_dir=tiny_base_dir, max_length=32, num_threads=count,
                             progress=Progress())[0]

    together = states(texts)
    alone = [states([text])[0] for text in texts]
    pairs = [state for first in range(0, len(texts), 2) for state in states(texts[first:first + 2])]
    for company in (alone, pairs):
        differing = [text for text, a, b in zip(texts, together, company) if not torch.equal(a, b)]
        assert not differing, f"{len(differing)} of {len(texts)} texts get other states, e.g. {differing[:3]}"


def test_a_damaged_shard_is_removed_and_rebuilt_with_a_log_line(tiny_base_dir, rows, tmp_path, monkeypatch):
    texts = [t for t, _ in rows]
    cache = FrozenCache(tmp_path / "cache")
    first, _ = _states(tiny_base_dir, texts, cache)
    (shard,) = list((tmp_path / "cache").glob("*/shard-*.safetensors"))
    for damage in ("truncate", "flip"):
        data = bytearray(shard.read_bytes())
        if damage == "truncate":
            data = data[:len(data) // 2]
        else:
            data[-5] ^= 0xFF  # inside the data: only the checksum sees it
        shard.write_bytes(bytes(data))
        messages = []
        monkeypatch.setattr(frozen_cache.log, "warning", lambda text, *args, messages=messages: messages.append(text % args))
        again, use = _states(tiny_base_dir, texts, cache)
        assert "is damaged" in messages[0] and shard.name in messages[0]
        assert use.damaged_shards_removed == 1 and use.computed == len(set(texts))
        assert all(torch.equal(a, b) for a, b in zip(first, again))
        (shard,) = list((tmp_path / "cache").glob("*/shard-*.safetensors"))


def test_the_cache_stays_within_its_bound_dropping_the_least_recently_used(tiny_base_dir, rows, tmp_path):
    texts = [t for t, _ in rows]
    roomy = FrozenCache(tmp_path / "cache", max_bytes=10 ** 9)
    _states(tiny_base_dir, texts[:40], roomy)
    one_shard = cache_size(roomy)
    _states(tiny_base_dir, texts[40:80], roomy)
    _states(tiny_base_dir, texts[:40], roomy)  # the first shard is used again: the second is now the oldest
    tight = FrozenCache(tmp_path / "cache", max_bytes=int(one_shard * 2.5))
    _, use = _states(tiny_base_dir, texts[80:], tight)
    assert use.evicted_shards == 1 and cache_size(tight) <= tight.max_bytes
    _, reuse = _states(tiny_base_dir, texts[:40], tight)
    assert reuse.from_cache == 40  # kept: it was used more recently than the evicted one
    tiny = FrozenCache(tmp_path / "cache", max_bytes=10)
    _states(tiny_base_dir, ["one more text"], tiny)
    assert cache_size(tiny) == 0  # nothing fits: nothing is kept


def test_an_unusable_cache_folder_costs_time_never_the_run(tiny_base_dir, rows, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    states, use = _states(tiny_base_dir, [t for t, _ in rows][:10], FrozenCache(blocker / "cache"))
    assert len(states) == 10 and use.computed == 10 and use.notes
