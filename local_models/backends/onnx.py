"""ONNX models, run with onnxruntime.

The CPU always works. The CUDA provider is used only when it is present and chosen, and then
the session is asked which provider it really got: onnxruntime quietly falls back to the CPU
when CUDA fails to start, and Dynadesk reports that as an error instead of hiding it.

A model is a ``.onnx`` file, or a folder with ``model.onnx``. Its tokenizer sits beside it or
in a folder given alongside. Labels come from the model's metadata (``id2label``, written by
Dynadesk's export) or from a ``config.json`` beside it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from local_models.backends.base import (
    METADATA_FILE,
    Backend,
    Runtime,
    labels_from_config,
    read_json_file,
    register_backend,
)
from local_models.backends.hf_checks import check_config_fields
from local_models.backends.per_text_int8 import PROBE_TOLERANCE, PerTextSession, per_text_session
from local_models.backends.row_pool import RowPool
from local_models.errors import (
    CorruptModel,
    DeviceUnavailable,
    ModelNotFound,
    TokenizerMissing,
    UnsupportedModel,
    UnsupportedOperation,
)
from local_models.heads import head_for_outputs
from local_models.quiet import first_line
from local_models.tokenization import EncodedBatch, TextEncoder, has_tokenizer, tokenizer_files

log = logging.getLogger(__name__)

MODEL_FILENAME = "model.onnx"
PER_TEXT_BATCHES = False  # whether row-by-row batches run as per-text batches; see OnnxRuntime.per_text_batches
PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}
_NUMPY_TYPES = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}


def onnx_file(path: Path) -> Path:
    path = Path(path)
    if path.is_dir():
        candidate = path / MODEL_FILENAME
        if candidate.is_file():
            return candidate
        found = sorted(path.glob("*.onnx"))
        if len(found) == 1:
            return found[0]
        raise ModelNotFound(f"{path} holds no single ONNX model ({MODEL_FILENAME}).")
    if not path.is_file():
        raise ModelNotFound(f"There is no ONNX model at {path}.")
    return path


def external_data_files(file: Path) -> list[Path]:
    import onnx

    model = onnx.load(str(file), load_external_data=False)
    locations = set()
    for tensor in model.graph.initializer:
        for entry in tensor.external_data:
            if entry.key == "location":
                locations.add(entry.value)
    return [file.parent / name for name in sorted(locations)]


def check_onnx_file(file: Path) -> None:
    """Refuse truncated, damaged or invalid ONNX files before onnxruntime sees them."""
    import onnx

    if file.stat().st_size == 0:
        raise CorruptModel(f"The ONNX file {file} is empty.")
    try:
        onnx.checker.check_model(str(file))
    except Exception as exc:  # DecodeError, ValidationError, OSError from the C++ side
        raise CorruptModel(
            f"The ONNX file {file} is truncated, damaged or invalid ({first_line(exc)})."
        ) from exc




@dataclass
class OnnxRuntime(Runtime):
    session: Any = None
    input_types: dict[str, Any] | None = None
    hidden: tuple[Any, str] | None = None  # a second session that also gives the last hidden state, and its name
    row_by_row: bool = False  # dynamically quantized classifier: batches run one text at a time
    # a row-by-row batch's texts run on this many threads at once (same answers; see row_pool.py)
    row_threads: int = 1
    # a row-by-row batch runs as one batch of the per-text graph (per_text_int8.py); off by default:
    # measured side by side on the 2-core EPYC in two runs each (bench "models" and "assist") against
    # each text alone on the row pool's two threads: word ablation 0.87x and 1.01x as fast, the
    # whole suggest call 1.02x and 1.05x, a 480-text evaluation the same CPU time in one run and
    # 21 % less in the other; its probabilities are only close to alone (up to 1.6e-3), so the
    # exact rule stays
    per_text_batches: bool = PER_TEXT_BATCHES
    # how a batch's texts run ("batch rule"): said by per_text() once it has been asked
    batch_rule: str = "one text at a time (the per-text graph is built on the first batch)"
    _rows: RowPool | None = field(default=None, init=False, repr=False)
    _per_text: PerTextSession | None = field(default=None, init=False, repr=False)
    _per_text_tried: bool = field(default=False, init=False, repr=False)
    _per_text_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _rows_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def feeds(self, batch: EncodedBatch) -> dict[str, np.ndarray]:
        available = {"input_ids": batch.input_ids, "attention_mask": batch.attention_mask,
                     "token_type_ids": batch.token_type_ids}
        assert self.input_types is not None, "set by load()"
        return {name: available[name].astype(dtype, copy=False) for name, dtype in self.input_types.items()}

    def run(self, batch: EncodedBatch) -> dict[str, np.ndarray]:
        names = list(self.head_type.output_names)
        feeds = self.feeds(batch)
        if self.row_by_row and len(batch) > 1:
            # dynamic int8 takes one activation scale per tensor, so in a plain batch a text's answer
            # would depend on the texts beside it (0.05 seen). Every text gets its own answer alone:
            # in one batch of the per-text graph (per_text_int8.py) when it passed its probe check,
            # else each text alone, unpadded; both on the runtime's threads (row_pool.py). A text
            # that comes twice runs once (same answer)
            lengths = batch.lengths or [batch.input_ids.shape[1]] * len(batch)
            session = self.session
            distinct: list[dict[str, np.ndarray]] = []
            position: dict[tuple[bytes, ...], int] = {}
            which = []  # each text's place in distinct
            for i in range(len(batch)):
                text = {k: v[i:i + 1, :lengths[i]] for k, v in feeds.items()}
                key = tuple(text[k].tobytes() for k in sorted(text))
                if key not in position:
                    position[key] = len(distinct)
                    distinct.append(text)
                which.append(position[key])

            def run_row(n: int) -> list[Any]:
                row: list[Any] = session.run(names, distinct[n])
                return row

            per_text = self.per_text() if len(distinct) > 1 else None
            if per_text is not None:
                rows = per_text.run(names, distinct, self.row_pool(), self.row_threads)
            else:
                rows = self.row_pool().map(run_row, len(distinct))
            return {name: np.concatenate([np.asarray(rows[n][j], dtype=np.float32) for n in which])
                    for j, name in enumerate(names)}
        values = self.session.run(names, feeds)
        return {name: np.asarray(value, dtype=np.float32) for name, value in zip(names, values)}

    def last_hidden_state(self, batch: EncodedBatch) -> np.ndarray:
        """An exported classifier names only its logits; the encoder's output is the last
        [batch, tokens, hidden] float tensor the graph computes (the final layer norm), exposed
        as an extra output of a second session made on first use."""
        if self.hidden is None:
            self.hidden = _hidden_state_session(onnx_file(self.path), self.session)
        session, name = self.hidden
        (value,) = session.run([name], self.feeds(batch))
        if value.shape[:2] != batch.input_ids.shape:
            raise UnsupportedOperation(f"{self.path.name}: the tensor {name} is not a hidden state per token "
                                       f"(shape {list(value.shape)}); this model cannot give sentence embeddings.")
        return np.asarray(value, dtype=np.float32)

    @property
    def batch_tolerance(self) -> float:
        """How far (logits) a text's answer in a batch may sit from its answer alone: 0 where a
        batch gives every text its answer alone bit for bit."""
        refused = self._per_text_tried and self._per_text is None  # before the first batch: expected
        return PROBE_TOLERANCE if self.row_by_row and self.per_text_batches and not refused else 0.0

    def run_alone(self, batch: EncodedBatch, rows: Sequence[int]) -> dict[str, np.ndarray]:
        """The outputs of ``rows`` of ``batch``, each run alone and unpadded on the model's own graph."""
        names = list(self.head_type.output_names)
        feeds = self.feeds(batch)
        lengths = batch.lengths or [batch.input_ids.shape[1]] * len(batch)
        values = [self.session.run(names, {k: v[i:i + 1, :lengths[i]] for k, v in feeds.items()}) for i in rows]
        return {name: np.concatenate([np.asarray(v[j], dtype=np.float32) for v in values])
                for j, name in enumerate(names)}

    def per_text(self) -> PerTextSession | None:
        """The per-text graph of a dynamically quantized model, built and probe-checked on first
        use (about a second for the default model); None when it is refused (``batch_rule`` says
        why) or the model is not row by row. ``per_text_batches = False`` keeps one text at a time."""
        if not (self.row_by_row and self.per_text_batches):
            return None
        with self._per_text_lock:
            if not self._per_text_tried:
                self._per_text_tried = True
                assert self.input_types is not None, "set by load()"
                self._per_text, self.batch_rule = per_text_session(
                    onnx_file(self.path), self.session, list(self.head_type.output_names), self.input_types,
                    self.encoder.pad_token_id)
                if self._per_text is None:
                    log.warning("%s: batches run %s", self.path, self.batch_rule)
            return self._per_text

    def row_pool(self) -> RowPool:
        """The runtime's pool for row-by-row batches, made on first use (``row_threads`` threads)."""
        with self._rows_lock:
            previous = self._rows
            if previous is None or previous.threads != self.row_threads:
                self._rows = RowPool(self.row_threads, name="onnx-rows")
            rows = self._rows
        assert rows is not None
        if previous is not None and previous is not rows:
            previous.close()
        return rows

    def close(self) -> None:
        with self._rows_lock:
            rows, self._rows = self._rows, None
        if rows is not None:
            rows.close()
        self.session = None
        self.hidden = None
        with self._per_text_lock:
            self._per_text, self._per_text_tried = None, True


def hidden_state_name(model: Any) -> str:
    """The last rank-3 float tensor (batch, tokens, hidden) the graph computes, in node order."""
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    typed = {v.name: v.type.tensor_type for v in list(inferred.graph.value_info) + list(inferred.graph.output)}
    found = None
    for node in inferred.graph.node:
        for name in node.output:
            tensor = typed.get(name)
            if (tensor is not None and tensor.elem_type == onnx.TensorProto.FLOAT and len(tensor.shape.dim) == 3
                    and tensor.shape.dim[2].dim_value > 0):
                found = name
    if found is None:
        raise UnsupportedOperation("The ONNX graph computes no [batch, tokens, hidden] tensor, so it cannot give "
                                   "sentence embeddings.")
    return str(found)


def _hidden_state_session(file: Path, session: Any) -> tuple[Any, str]:
    import onnx
    import onnxruntime

    model = onnx.load(str(file))
    name = hidden_state_name(model)
    model.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    options = session.get_session_options()
    try:
        return onnxruntime.InferenceSession(model.SerializeToString(), sess_options=options,
                                            providers=session.get_providers()), name
    except Exception as exc:  # onnxruntime raises its own types
        raise UnsupportedOperation(f"onnxruntime cannot expose the hidden state of {file} ({first_line(exc)}).") from exc


@register_backend
class OnnxBackend(Backend):
    name = "onnx"
    description = "an ONNX file (.onnx, or a folder with model.onnx) with its tokenizer"
    supports_gradients = False
    exportable = False
    priority = 5

    @classmethod
    def recognises(cls, path: Path) -> bool:
        path = Path(path)
        if path.is_file():
            return path.suffix.lower() == ".onnx"
        return path.is_dir() and (path / MODEL_FILENAME).is_file()

    @classmethod
    def devices(cls) -> list[str]:
        import onnxruntime

        available = onnxruntime.get_available_providers()
        return [d for d, provider in PROVIDERS.items() if provider in available]

    @classmethod
    def model_files(cls, path: Path, tokenizer_dir: Path | None = None) -> list[tuple[str, Path]]:
        file = onnx_file(path)
        named = [("model/model.onnx", file)] + [(f"model/{f.name}", f) for f in external_data_files(file)]
        for folder in dict.fromkeys([file.parent, Path(tokenizer_dir or file.parent)]):
            if (folder / "config.json").is_file():
                named.append(("model/config.json", folder / "config.json"))
                break
        named += [(f"tokenizer/{f.name}", f) for f in tokenizer_files(Path(tokenizer_dir or file.parent))]
        return named

    @classmethod
    def load(cls, path: Path, *, device: str = "cpu", tokenizer_dir: Path | None = None,
             max_length: int | None = None, num_threads: int | None = None) -> OnnxRuntime:
        from local_models.files import files_sha256

        file = onnx_file(path)
        check_onnx_file(file)
        tokenizer_home = Path(tokenizer_dir or file.parent)
        if not has_tokenizer(tokenizer_home):
            raise TokenizerMissing(
                f"The ONNX model {file} comes without a tokenizer: there is no tokenizer.json beside it. "
                "Give the folder that holds its tokenizer alongside it."
            )
        session = _session(file, device, num_threads)
        meta = session.get_modelmeta().custom_metadata_map
        output_names = [o.name for o in session.get_outputs()]
        head = head_for_outputs(output_names)
        input_types = {}
        for node in session.get_inputs():
            if node.name not in ("input_ids", "attention_mask", "token_type_ids"):
                raise UnsupportedModel(f"The ONNX model {file} wants an input '{node.name}' that Dynadesk cannot give.")
            if node.type not in _NUMPY_TYPES:
                raise UnsupportedModel(f"The ONNX model {file} wants {node.name} as {node.type}; Dynadesk gives integers.")
            input_types[node.name] = _NUMPY_TYPES[node.type]
        if "input_ids" not in input_types:
            raise UnsupportedModel(f"The ONNX model {file} takes no input_ids, so it is not a text model.")
        config = _config_beside(file, tokenizer_home)
        metadata = read_json_file(file.parent / METADATA_FILE, "model description") if (file.parent / METADATA_FILE).is_file() else {}
        labels: list[str] = []
        if head.has_labels:
            if "id2label" in meta:
                try:
                    labels = labels_from_config({"id2label": json.loads(meta["id2label"])})
                except ValueError as exc:
                    raise CorruptModel(f"The label names stored in {file} are not valid JSON ({exc}).") from exc
            elif config.get("id2label") or _static_label_count(session):
                labels = labels_from_config(config, _static_label_count(session))
            # otherwise the engine counts the outputs on its first run and names them LABEL_i
        chosen_length = (max_length or _int_or_none(meta.get("max_length")) or metadata.get("max_length")
                         or _config_length(config))
        encoder = TextEncoder.from_folder(
            tokenizer_home, max_length=chosen_length,
            pair_truncation=head.pair_truncation, pad_token_id=config.get("pad_token_id"),
        )
        row_by_row = head.output_names == ("logits",) and _dynamically_quantized(file)
        return OnnxRuntime(
            backend=cls, path=Path(path), head_type=head, model_labels=labels, encoder=encoder,
            device=_device_in_use(session, device), sha256=files_sha256(cls.model_files(path, tokenizer_dir)),
            architecture=meta.get("architecture", "onnx"), metadata={**metadata, "onnx_metadata": dict(meta)},
            session=session, input_types=input_types,
            row_by_row=row_by_row, row_threads=row_threads_for(row_by_row, device, num_threads),
        )


ROW_THREADS = 2  # the desk's machines have 2 cores or more: the second one takes every other text


def row_threads_for(row_by_row: bool, device: str, num_threads: int | None) -> int:
    """Threads for a row-by-row batch: 2 on the CPU when each run has one intra-op thread (the desk's
    default on 2 cores) and there is a second core; otherwise 1, as a run with several intra-op
    threads already spreads over the cores (and the GPU runs one kernel stream)."""
    import os

    if not row_by_row or not device.startswith("cpu") or num_threads != 1 or (os.cpu_count() or 1) < 2:
        return 1
    return ROW_THREADS


def _dynamically_quantized(file: Path) -> bool:
    """Whether the graph quantizes its activations at run time (DynamicQuantizeLinear, one scale per tensor)."""
    with open(file, "rb") as handle:
        return b"DynamicQuantizeLinear" in handle.read()


def session_options(num_threads: int | None) -> Any:
    """The options every desk session runs with (also what the bench's floor graphs run with)."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.execution_mode = onnxruntime.ExecutionMode.ORT_SEQUENTIAL
    options.inter_op_num_threads = 1
    if num_threads:
        options.intra_op_num_threads = int(num_threads)
    options.log_severity_level = 3
    return options


def _session(file: Path, device: str, num_threads: int | None) -> Any:
    import onnxruntime

    kind = device.split(":")[0]
    provider = PROVIDERS.get(kind)
    if provider is None:
        raise DeviceUnavailable(f"Unknown device '{device}'; use cpu or cuda.")
    if provider not in onnxruntime.get_available_providers():
        raise DeviceUnavailable(
            f"onnxruntime here has no {provider} (it has {', '.join(onnxruntime.get_available_providers())}); "
            "install onnxruntime-gpu for CUDA, or choose the CPU."
        )
    options = session_options(num_threads)
    providers: list[Any] = ["CPUExecutionProvider"]
    if kind == "cuda":
        index = int(device.split(":")[1]) if ":" in device else 0
        providers = [(provider, {"device_id": index}), "CPUExecutionProvider"]
    try:
        return onnxruntime.InferenceSession(str(file), sess_options=options, providers=providers)
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph/... types
        raise CorruptModel(f"onnxruntime cannot run {file} ({first_line(exc)}).") from exc


def _device_in_use(session: Any, requested: str) -> str:
    """Read back the provider the session really uses; a silent fallback is an error."""
    in_use = session.get_providers()[0]
    kind = requested.split(":")[0]
    if in_use != PROVIDERS[kind]:
        raise DeviceUnavailable(
            f"{PROVIDERS[kind]} could not start (onnxruntime fell back to {in_use}); "
            "Dynadesk does not switch devices behind your back. Choose the CPU, or fix the GPU set-up."
        )
    if kind == "cuda":
        options = session.get_provider_options().get(in_use, {})
        return f"cuda:{options.get('device_id', 0)}"
    return "cpu"


def _static_label_count(session: Any) -> int | None:
    shape = session.get_outputs()[0].shape
    return shape[-1] if shape and isinstance(shape[-1], int) else None


def _config_beside(file: Path, tokenizer_home: Path) -> dict[str, Any]:
    for folder in (file.parent, tokenizer_home):
        if (folder / "config.json").is_file():
            config = read_json_file(folder / "config.json", "model configuration")
            check_config_fields(config, folder / "config.json")
            return config
    return {}


def _config_length(config: dict[str, Any]) -> int | None:
    value = config.get("max_position_embeddings")
    return min(int(value), 512) if isinstance(value, int) else None


def _int_or_none(value: Any) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
