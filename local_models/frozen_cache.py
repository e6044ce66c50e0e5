"""The frozen layers' outputs: computed once per text, and kept on disk across training runs.

Training runs the frozen bottom layers of the encoder once over every text and trains only the top ones on
their outputs (``local_models.train``). Most of a next-round run's texts are the same base data as the run
before, so ``FrozenCache`` keeps those outputs between runs.

Each text's states are a pure function of the text (and the key below), whatever texts share its batch, on
any CPU (checked bit for bit): texts are run in batches of equal token length, so there is no padding; every
batch of a length has the same shape (``BATCH`` rows, filled up with copies of its first text), because the
matrix products pick their kernels by their number of rows (on an AMD EPYC a product of 1-3 rows, or of up to
11 with two threads, rounds otherwise than a larger one); and attention runs one text at a time (see
``_per_text_attention``). A run that finds every text in the cache therefore trains on exactly the tensors a
run that computed them would, and reproduces its weights bit for bit.

Layout: ``<folder>/<key>/shard-*.safetensors``; a key names everything that shapes the states (the base
encoder's weights, config and tokenizer files, the number of frozen layers, the maximum length, torch's
version, the thread count, the machine and its CPU); a shard holds the states of some texts (``states``: their tokens
one after another, float32; ``lengths``; ``hashes``: each text's sha256) and a checksum of all three.
Shards are written to a temporary file and renamed into place, so a reader never sees half of one and two
processes may fill the cache at once (at worst both store the same texts). A shard that cannot be read or
fails its checksum is removed and its texts computed again, with a log line. The cache is bounded: after a
write the least recently used shards go until it fits ``max_bytes``.
"""

from __future__ import annotations

import collections
import hashlib
import json
import logging
import os
import platform
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from local_models.files import file_sha256
from local_models.machine import cpu_info
from local_models.progress import Progress
from local_models.tokenization import ModelInput

log = logging.getLogger(__name__)

FORMAT = "dynadesk-frozen-states"
VERSION = 3  # 2: attention one text at a time; 3: a fixed batch shape (states made before could depend on their batch)
BATCH = 16  # texts per batch, always (fill rows cost at most BATCH - 1 per token length)
DEFAULT_MAX_BYTES = 3 * 1024 ** 3  # ~75,000 tweets with all-MiniLM-L6-v2 (measured: 1.06 GB for 27,067 texts)
STALE_TEMP_SECONDS = 3600


@dataclass
class FrozenCache:
    """Where the states live and how much room they may take."""

    folder: Path
    max_bytes: int = DEFAULT_MAX_BYTES


@dataclass
class CacheUse:
    """What a run took from the cache and added to it (recorded in a training manifest)."""

    used: bool = False
    folder: str | None = None
    key: str | None = None
    texts: int = 0
    from_cache: int = 0
    computed: int = 0
    bytes_written: int = 0
    damaged_shards_removed: int = 0
    evicted_shards: int = 0
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def text_sha256(text: str) -> bytes:
    return hashlib.sha256(text.encode("utf-8")).digest()


def input_sha256(item: ModelInput, pair_truncation: str) -> bytes:
    """What a model input's states are stored under: a text's own sha256; a pair's, over both texts and the rule
    that cuts a long pair (it decides which tokens the states hold), never equal to a single text's."""
    if isinstance(item, str):
        return text_sha256(item)
    return hashlib.sha256(json.dumps(["pair", pair_truncation, *item], ensure_ascii=False).encode("utf-8")).digest()


def cache_key(base_dir: Path, frozen_count: int, max_length: int, num_threads: int) -> tuple[str, dict[str, Any]]:
    """The key of the states a run computes (its sha256, and what went into it)."""
    import torch

    from local_models.tokenization import CHARS_PER_TOKEN_BOUND, tokenizer_files

    base_dir = Path(base_dir)
    described = {
        "format": FORMAT, "version": VERSION,
        "weights_sha256": file_sha256(base_dir / "model.safetensors"),
        "config_sha256": file_sha256(base_dir / "config.json"),
        "tokenizer": {p.name: file_sha256(p) for p in sorted(tokenizer_files(base_dir))},
        "frozen_layers": frozen_count, "max_length": max_length, "chars_per_token_bound": CHARS_PER_TOKEN_BOUND,
        "torch": torch.__version__, "num_threads": num_threads, "machine": platform.machine(),
        "cpu": cpu_info(),  # another CPU's kernels round otherwise: its states are not mixed in
        "dtype": "float32",
    }
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode()).hexdigest(), described


def frozen_states(model: Any, encoder: Any, texts: Sequence[ModelInput], frozen_count: int, *, base_dir: Path,
                  max_length: int, num_threads: int, progress: Progress,
                  cache: FrozenCache | None = None) -> tuple[list[Any], CacheUse]:
    """The hidden states entering the first trained layer, per text (or pair), trimmed to its tokens; with
    ``cache``, read from and added to it."""
    started = time.perf_counter()
    use = CacheUse(texts=len(texts))
    hashes = [input_sha256(t, encoder.pair_truncation) for t in texts]
    found: dict[bytes, Any] = {}
    folder: Path | None = None
    if cache is not None:
        key, described = cache_key(base_dir, frozen_count, max_length, num_threads)
        folder = Path(cache.folder) / key[:32]
        use.used, use.folder, use.key = True, str(folder), key
        try:
            folder.mkdir(parents=True, exist_ok=True)
            _write_key_file(folder, described)
            found = _read_shards(folder, set(hashes), use)
        except OSError as exc:  # an unwritable or vanished cache costs time, never the run
            log.warning("frozen-layer cache %s cannot be used (%s); computing every text", folder, exc)
            use.notes.append(f"cache unusable: {exc}")
            folder, found = None, {}
    missing = list(dict.fromkeys(h for h in hashes if h not in found))
    use.from_cache = sum(1 for h in hashes if h in found)
    if missing:
        text_of = dict(zip(hashes, texts))
        computed = _compute(model, encoder, [text_of[h] for h in missing], frozen_count, progress)
        found.update(zip(missing, computed))
        use.computed = len(missing)
        if folder is not None and cache is not None:
            _store(folder, cache, missing, computed, use)
    else:
        progress.report(len(texts), len(texts))
    use.seconds = round(time.perf_counter() - started, 2)
    return [found[h] for h in hashes], use


def _compute(model: Any, encoder: Any, texts: list[ModelInput], frozen_count: int, progress: Progress) -> list[Any]:
    """States of distinct texts, run in batches of equal token length (no padding: see the module's note)."""
    import torch

    base = model.base_model
    layers = base.encoder.layer
    lengths = [int(n) for first in range(0, len(texts), 512)
               for n in encoder.encode(texts[first:first + 512]).lengths]
    by_length: dict[int, list[int]] = collections.defaultdict(list)
    for i, n in enumerate(lengths):
        by_length[n].append(i)
    batches = [idx[k:k + BATCH] for n in sorted(by_length) for idx in [by_length[n]] for k in range(0, len(idx), BATCH)]
    out: list[Any] = [None] * len(texts)
    model.eval()
    base.encoder.layer = torch.nn.ModuleList(list(layers)[:frozen_count])
    attention = base.config._attn_implementation
    base.config._attn_implementation = _per_text_attention()
    done = 0
    try:
        with torch.inference_mode():
            for chunk in batches:
                progress.check()
                # fixed shape: always BATCH rows (the first text repeated), see the module's note
                batch = encoder.encode([texts[i] for i in chunk] + [texts[chunk[0]]] * (BATCH - len(chunk)))
                hidden = base(input_ids=torch.from_numpy(batch.input_ids),
                              attention_mask=torch.from_numpy(batch.attention_mask),
                              token_type_ids=torch.from_numpy(batch.token_type_ids)).last_hidden_state
                for row, i in enumerate(chunk):
                    out[i] = hidden[row, :batch.lengths[row]].clone()
                done += len(chunk)
                progress.report(done, len(texts))
    finally:
        base.encoder.layer = layers
        base.config._attn_implementation = attention
    return out


PER_TEXT_ATTENTION = "dynadesk_per_text_sdpa"


def _per_text_attention() -> str:
    """The name of an attention that runs SDPA one text at a time (registered once).

    The batched attention products (SDPA and eager alike) round differently with the number of texts in the batch on
    some CPUs (AMD EPYC without AMX), so a text's states would depend on which texts share its batch; text by text,
    its inputs have the same shape whatever the batch, and so the same kernel. (The projections around it get a
    fixed shape from the fixed batch size instead.)"""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface, sdpa_mask

    if PER_TEXT_ATTENTION not in ALL_MASK_ATTENTION_FUNCTIONS:
        def per_text(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, **kwargs: Any) -> tuple[Any, None]:
            import torch

            rows = []
            for i in range(query.shape[0]):
                mask = None if attention_mask is None else attention_mask[i:i + 1]
                rows.append(sdpa_attention_forward(module, query[i:i + 1], key[i:i + 1], value[i:i + 1], mask,
                                                   **kwargs)[0])
            return torch.cat(rows), None

        AttentionInterface.register(PER_TEXT_ATTENTION, per_text)
        AttentionMaskInterface.register(PER_TEXT_ATTENTION, sdpa_mask)
    return PER_TEXT_ATTENTION


def _write_key_file(folder: Path, described: dict[str, Any]) -> None:
    path = folder / "key.json"
    if not path.is_file():
        _atomic_write(path, (json.dumps(described, indent=2, sort_keys=True) + "\n").encode())


def _atomic_write(path: Path, data: bytes) -> None:
    temp = path.with_name(f".tmp-{os.getpid()}-{secrets.token_hex(4)}-{path.name}")
    try:
        with open(temp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    finally:
        temp.unlink(missing_ok=True)


def _shards(folder: Path) -> list[Path]:
    return sorted(folder.glob("shard-*.safetensors"))


def _read_shards(folder: Path, wanted: set[bytes], use: CacheUse) -> dict[bytes, Any]:
    """The states of the wanted texts that the folder's shards hold; damaged shards are removed."""
    from safetensors import safe_open

    found: dict[bytes, Any] = {}
    for shard in _shards(folder):
        if not wanted - set(found):
            break
        try:
            with safe_open(str(shard), framework="pt") as handle:
                meta = handle.metadata() or {}
                if meta.get("format") != FORMAT or meta.get("version") != str(VERSION):
                    raise ValueError("it is not a shard of this format")
                hash_rows = handle.get_tensor("hashes")
                hashes = [bytes(row) for row in hash_rows.numpy()]
                if not (set(hashes) & wanted) - set(found):
                    continue
                length_rows = handle.get_tensor("lengths")
                states = handle.get_tensor("states")
            lengths = length_rows.tolist()
            if len(lengths) != len(hashes) or sum(lengths) != states.shape[0]:
                raise ValueError("its index does not match its states")
            if _checksum(hash_rows, length_rows, states) != meta.get("sha256"):
                raise ValueError("it fails its checksum")
        except FileNotFoundError:  # evicted by another process meanwhile: its texts are computed
            continue
        except Exception as exc:  # noqa: BLE001 - any damage (truncated, garbled, foreign) means: rebuild
            log.warning("frozen-layer cache: %s is damaged (%s); it is removed and its texts are computed again",
                        shard, exc)
            use.damaged_shards_removed += 1
            use.notes.append(f"removed damaged shard {shard.name}: {exc}")
            shard.unlink(missing_ok=True)
            continue
        offsets = [0]
        for n in lengths:
            offsets.append(offsets[-1] + n)
        taken = [i for i, digest in enumerate(hashes) if digest in wanted and digest not in found]
        share = len(taken) > len(hashes) // 2  # views keep the whole shard in memory: worth it when most is used
        for i in taken:
            piece = states[offsets[i]:offsets[i + 1]]
            found[hashes[i]] = piece if share else piece.clone()
        _touch(shard)
    return found


def _checksum(*tensors: Any) -> str:
    digest = hashlib.sha256()
    for tensor in tensors:
        digest.update(tensor.contiguous().numpy().tobytes())
    return digest.hexdigest()


def _touch(path: Path) -> None:
    try:
        os.utime(path)  # least recently *used* goes first
    except OSError:
        pass


def _store(folder: Path, cache: FrozenCache, hashes: list[bytes], states: list[Any], use: CacheUse) -> None:
    import numpy as np
    import torch
    from safetensors.torch import save

    try:
        joined = torch.cat([s.contiguous() for s in states]).contiguous()
        lengths = torch.tensor([s.shape[0] for s in states], dtype=torch.int64)
        hash_rows = torch.from_numpy(np.frombuffer(b"".join(hashes), dtype=np.uint8).reshape(-1, 32).copy())
        data = save({"states": joined, "lengths": lengths, "hashes": hash_rows},
                    metadata={"format": FORMAT, "version": str(VERSION),
                              "sha256": _checksum(hash_rows, lengths, joined)})
        name = f"shard-{time.time_ns():020d}-{secrets.token_hex(4)}.safetensors"
        _atomic_write(folder / name, data)
        use.bytes_written = len(data)
        use.evicted_shards = evict(cache, keep=folder / name)
    except OSError as exc:  # a full disk costs the next run time, never this one
        log.warning("frozen-layer cache: the states could not be stored in %s (%s)", folder, exc)
        use.notes.append(f"not stored: {exc}")


def cache_size(cache: FrozenCache) -> int:
    return sum(p.stat().st_size for p in Path(cache.folder).glob("*/shard-*.safetensors") if p.is_file())


def evict(cache: FrozenCache, keep: Path | None = None) -> int:
    """Remove the least recently used shards (of any key) until the cache fits; returns how many went. A shard
    just written goes too when it alone is larger than the cache may be."""
    entries = []
    now = time.time()
    for path in Path(cache.folder).glob("*/*"):
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        if path.name.startswith(".tmp-") and now - stat.st_mtime > STALE_TEMP_SECONDS:
            path.unlink(missing_ok=True)  # left by a process that died while writing
        elif path.name.startswith("shard-"):
            entries.append((stat.st_mtime, path != keep, path, stat.st_size))
    total = sum(e[3] for e in entries)
    removed = 0
    for _, _, path, size in sorted(entries, key=lambda e: (not e[1], e[0])):
        if total <= cache.max_bytes:
            break
        path.unlink(missing_ok=True)
        total -= size
        removed += 1
    return removed
