"""Hugging Face model folders, run with PyTorch.

Safety: weights come from safetensors, or from ``torch.load(weights_only=True)``; a folder
whose weights need code unpickled is refused. The model class is looked up in transformers by
the config's architecture and never from the folder (no ``trust_remote_code``), and nothing is
downloaded (``local_files_only=True``).
"""

from __future__ import annotations

import inspect
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from local_models.backends.base import (
    METADATA_FILE,
    Backend,
    Runtime,
    labels_from_config,
    read_json_file,
    register_backend,
)
from local_models.backends.hf_checks import (
    Shapes,
    check_config_fields,
    check_config_fits_weights,
    check_inside,
    check_skeleton_fits,
    indexed_weight_file,
)
from local_models.errors import (
    CorruptModel,
    DeviceUnavailable,
    ModelNotFound,
    TokenizerMismatch,
    UnsafeModelFile,
    UnsupportedModel,
)
from local_models.heads import Head, head_for_architecture
from local_models.tokenization import EncodedBatch, TextEncoder, tokenizer_files

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)

SAFETENSORS_INDEX = "model.safetensors.index.json"
PICKLE_INDEX = "pytorch_model.bin.index.json"


def quiet_transformers() -> None:
    """Loading prints progress bars and load reports; the desk shows its own messages."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def weight_files(folder: Path) -> tuple[list[Path], bool]:
    """The weight files of a folder, and whether they are safetensors. Each must lie inside the
    folder: an index naming ../ or an absolute path, or a link out, is refused."""
    files, safe = _named_weight_files(folder)
    for file in files:
        check_inside(folder, file)
    return files, safe


def _named_weight_files(folder: Path) -> tuple[list[Path], bool]:
    for index_name, safe in ((SAFETENSORS_INDEX, True), (PICKLE_INDEX, False)):
        index = folder / index_name
        if index.is_file():
            weight_map = read_json_file(index, "weight index").get("weight_map")
            if not isinstance(weight_map, dict) or not weight_map:
                raise CorruptModel(f"The weight index {index} has no weight_map naming the weight files.")
            shards = sorted({indexed_weight_file(folder, name, index_name) for name in weight_map.values()})
            missing = [s.name for s in shards if not s.is_file()]
            if missing:
                raise CorruptModel(f"{folder} is missing weight shards listed in {index_name}: {', '.join(missing)}.")
            return shards, safe
    if (folder / "model.safetensors").is_file():
        return [folder / "model.safetensors"], True
    if (folder / "pytorch_model.bin").is_file():
        return [folder / "pytorch_model.bin"], False
    return [], True


def check_weights(files: list[Path], safe: bool) -> Shapes:
    """Read every header (safetensors) or map the file under ``weights_only`` (pickles) before
    use; the shape of every tensor, by name."""
    shapes: Shapes = {}
    if safe:
        from safetensors import safe_open

        for path in files:
            try:
                with safe_open(str(path), framework="pt") as handle:
                    for key in handle.keys():
                        shapes[key] = tuple(handle.get_slice(key).get_shape())
            except Exception as exc:  # SafetensorError, OSError
                raise CorruptModel(f"The weights file {path} is truncated or damaged ({_first_line(exc)}).") from exc
        return shapes
    import pickle

    import torch

    for path in files:
        _refuse_legacy_pickle(path)
        try:
            loaded = torch.load(str(path), map_location="cpu", weights_only=True, mmap=True)
        except pickle.UnpicklingError as exc:
            raise UnsafeModelFile(
                f"{path} is a pickle that holds more than tensors: it can only be read by unpickling code, "
                "which Dynadesk refuses to do, since a model file can run anything that way. Dynadesk loads "
                "only safetensors or weights-only torch files: ask for the model as safetensors "
                "(model.safetensors)."
            ) from exc
        except Exception as exc:
            raise CorruptModel(f"The weights file {path} is truncated or damaged ({_first_line(exc)}).") from exc
        if isinstance(loaded, dict):
            shapes.update((key, tuple(value.shape)) for key, value in loaded.items()
                          if isinstance(value, torch.Tensor))
    return shapes


_PICKLE_START = b"\x80"  # the PROTO opcode a pickle of protocol 2 or later begins with


def _refuse_legacy_pickle(path: Path) -> None:
    """torch files are zip archives since PyTorch 1.6. A bare pickle is the legacy format, which
    cannot be mapped, only read whole: say what it is and how to convert it."""
    import zipfile

    if zipfile.is_zipfile(path):
        return
    with open(path, "rb") as handle:
        start = handle.read(1)
    if start != _PICKLE_START:
        raise CorruptModel(f"The weights file {path} is truncated or damaged (it is not a torch zip archive).")
    raise UnsafeModelFile(
        f"{path.name} in {path.parent} is a legacy pickle file, not the zip archive torch has written "
        "since 1.6. Dynadesk loads only safetensors or weights-only torch files. Convert it where you "
        "trust it, in that folder: "
        "python -c \"import torch; from safetensors.torch import save_file; save_file({k: v.clone() for k, v in "
        f"torch.load('{path.name}', weights_only=True).items()}}, 'model.safetensors', metadata={{'format': 'pt'}})\""
    )


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or exc.__class__.__name__
    return text.splitlines()[0][:300]


def model_class(config: dict[str, Any], folder: Path) -> tuple[Any, type[Head], str]:
    architectures = config.get("architectures") or []
    if not architectures:
        raise UnsupportedModel(f"{folder}/config.json names no architecture, so Dynadesk cannot tell what the model does.")
    architecture = architectures[0]
    head = head_for_architecture(architecture)
    import transformers

    cls = getattr(transformers, architecture, None)
    if cls is None:
        if config.get("auto_map"):
            raise UnsupportedModel(
                f"{architecture} is defined by code shipped inside the model folder; Dynadesk never runs "
                "such code. Use a model whose architecture transformers provides."
            )
        raise UnsupportedModel(f"transformers {transformers.__version__} has no model class {architecture}.")
    return cls, head, architecture


@dataclass
class TorchRuntime(Runtime):
    module: Any = None
    takes_token_types: bool = True
    extra: dict[str, Any] = field(default_factory=dict)

    def feeds(self, batch: EncodedBatch) -> dict[str, Any]:
        import torch

        device = self.module.device
        feeds = {
            "input_ids": torch.from_numpy(batch.input_ids).to(device),
            "attention_mask": torch.from_numpy(batch.attention_mask).to(device),
        }
        if self.takes_token_types:
            feeds["token_type_ids"] = torch.from_numpy(batch.token_type_ids).to(device)
        return feeds

    def run(self, batch: EncodedBatch) -> dict[str, np.ndarray]:
        import torch

        with torch.inference_mode():
            out = self.module(**self.feeds(batch))
        return {name: getattr(out, name).float().cpu().numpy() for name in self.head_type.output_names}

    def embedding_layer(self) -> Any:
        return self.module.get_input_embeddings()

    def last_hidden_state(self, batch: EncodedBatch) -> np.ndarray:
        import torch

        with torch.inference_mode():  # the encoder under the head: its output is the last hidden state
            out = self.module.base_model(**self.feeds(batch))
        return np.asarray(out.last_hidden_state.float().cpu().numpy())

    def close(self) -> None:
        self.module = None


@register_backend
class HFTorchBackend(Backend):
    name = "hf-torch"
    description = "a Hugging Face model folder (config.json with model.safetensors)"
    supports_gradients = True
    exportable = True
    priority = 10

    @classmethod
    def recognises(cls, path: Path) -> bool:
        path = Path(path)
        if not (path.is_dir() and (path / "config.json").is_file()):
            return False
        try:
            return bool(weight_files(path)[0])
        except Exception:  # a damaged index still means "meant for this back-end"; load explains
            return True

    @classmethod
    def devices(cls) -> list[str]:
        import torch

        return ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])

    @classmethod
    def model_files(cls, path: Path, tokenizer_dir: Path | None = None) -> list[tuple[str, Path]]:
        path = Path(path)
        files, _ = weight_files(path)
        named = [("model/config.json", path / "config.json")] + [(f"model/{f.name}", f) for f in files]
        for index in (SAFETENSORS_INDEX, PICKLE_INDEX):
            if (path / index).is_file():
                named.append((f"model/{index}", path / index))
        named += [(f"tokenizer/{f.name}", f) for f in tokenizer_files(Path(tokenizer_dir or path))]
        return named

    @classmethod
    def load(cls, path: Path, *, device: str = "cpu", tokenizer_dir: Path | None = None,
             max_length: int | None = None, num_threads: int | None = None) -> TorchRuntime:
        from local_models.files import files_sha256

        path = Path(path)
        if not (path / "config.json").is_file():
            raise ModelNotFound(f"{path} is not a Hugging Face model folder (there is no config.json).")
        config = read_json_file(path / "config.json", "model configuration")
        check_config_fields(config, path / "config.json")
        model_cls, head, architecture = model_class(config, path)
        files, safe = weight_files(path)
        if not files:
            raise CorruptModel(f"{path} holds no weights (model.safetensors or pytorch_model.bin).")
        shapes = check_weights(files, safe)
        # Before anything is built: transformers would allocate whatever the config claims.
        weights_name = files[0].name if len(files) == 1 else f"the {len(files)} weight files"
        check_config_fits_weights(config, shapes, weights_name, labelled=head.has_labels)
        quiet_transformers()
        check_skeleton_fits(model_cls, path, shapes)
        tokenizer_home = Path(tokenizer_dir or path)
        metadata = read_json_file(path / METADATA_FILE, "model description") if (path / METADATA_FILE).is_file() else {}
        encoder = TextEncoder.from_folder(
            tokenizer_home, max_length=_max_length(config, tokenizer_home, max_length, metadata),
            pair_truncation=head.pair_truncation, pad_token_id=config.get("pad_token_id"),
        )
        vocab = config.get("vocab_size")
        if isinstance(vocab, int) and encoder.vocab_size > vocab:
            raise TokenizerMismatch(
                f"The tokenizer in {tokenizer_home} knows {encoder.vocab_size} tokens but the model only "
                f"{vocab}: they do not belong together."
            )
        torch_device = _torch_device(device)
        import torch

        if num_threads:
            torch.set_num_threads(int(num_threads))
        try:
            module, info = model_cls.from_pretrained(
                str(path), local_files_only=True, use_safetensors=safe, attn_implementation="eager",
                output_loading_info=True,
            )
        except (RuntimeError, ValueError, OSError, KeyError) as exc:
            raise CorruptModel(f"The model in {path} could not be loaded: its weights and config.json do not fit "
                               f"({_first_line(exc)}).") from exc
        missing = sorted(info.get("missing_keys") or [])
        if missing:
            shown = ", ".join(missing[:4]) + (" ..." if len(missing) > 4 else "")
            raise CorruptModel(
                f"The weights in {path} lack {len(missing)} tensor(s) that {architecture} needs ({shown}); "
                "it is not a trained model of that kind."
            )
        module.eval()
        module.requires_grad_(False)
        try:
            module.to(torch_device)
        except RuntimeError as exc:
            raise DeviceUnavailable(f"The model could not be moved to {device}: {_first_line(exc)}") from exc
        actual = str(next(module.parameters()).device)
        labels = labels_from_config(config) if head.has_labels else []
        return TorchRuntime(
            backend=cls, path=path, head_type=head, model_labels=labels, encoder=encoder, device=actual,
            sha256=files_sha256(cls.model_files(path, tokenizer_dir)), architecture=architecture,
            metadata=metadata, module=module,
            takes_token_types="token_type_ids" in inspect.signature(module.forward).parameters,
        )


def _torch_device(device: str) -> torch.device:
    import torch

    if device == "cpu":
        return torch.device("cpu")
    if device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise DeviceUnavailable(
                "CUDA was chosen but PyTorch sees no usable GPU here; choose the CPU instead."
            )
        return torch.device(device)
    raise DeviceUnavailable(f"Unknown device '{device}'; use cpu or cuda.")


def _max_length(config: dict[str, Any], tokenizer_home: Path, explicit: int | None,
                metadata: dict[str, Any]) -> int:
    positions = config.get("max_position_embeddings")
    limit = int(positions) if isinstance(positions, int) and positions > 0 else None
    if config.get("model_type") in ("roberta", "xlm-roberta", "camembert") and limit:
        limit -= int(config.get("pad_token_id", 1)) + 1  # these count positions from padding_idx + 1
    chosen = explicit or metadata.get("max_length")
    if not chosen:
        tok_config = tokenizer_home / "tokenizer_config.json"
        declared = read_json_file(tok_config, "tokenizer configuration").get("model_max_length") if tok_config.is_file() else None
        chosen = int(declared) if isinstance(declared, (int, float)) and declared < 1_000_000 else (limit or 512)
    return min(int(chosen), limit) if limit else int(chosen)
