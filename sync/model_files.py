"""Model files over sync: downloading open rounds' target models, uploading them to publish, and one identity per model. Qt-free."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path
from typing import Any

from sqlalchemy import select

from app.core import paths
from app.core.domain import ModelFormat, RoundStatus
from app.core.storage.models import ModelRecord, Round, RoundModel
from local_models.files import file_sha256
from sync.protocol import ModelRecordWire, manifest_sha256
from sync.transport import Connection, NotOnServer, SyncError, SyncHandle, SyncReport

log = logging.getLogger(__name__)


class ModelFiles(Connection):
    """Model files of a desk's rounds: fetched from the server, uploaded when an owner publishes."""


    def unify_models(self, handle: SyncHandle, report: SyncReport) -> int:
        """Records of one model under two checksums (exports by older versions differed by the
        exporting desk's paths) become one: the checksum the server knows wins, and the desk's
        predictions move to it, so examples written against the other are no longer put off.
        Returns how many records were merged."""
        from app.core.services.models import merge_model_records
        from app.core.services.target_models import export_twin_key

        with self.db.read() as session:
            groups: dict[tuple[Any, ...], list[ModelRecord]] = {}
            for record in session.scalars(select(ModelRecord).order_by(ModelRecord.created_at)):
                key = export_twin_key(record)
                if key is not None:
                    groups.setdefault(key, []).append(record)
            targets = set(session.scalars(select(RoundModel.model_id)))
        merged = 0
        for records in (g for g in groups.values() if len(g) > 1):
            known = [r for r in records if self.request("GET", f"/models/{r.sha256}", handle, ok=(200, 404),
                                                        report=report).status_code == 200]
            known.sort(key=lambda r: r.id not in targets)  # the one the server's rounds name, when both are known
            keep = (known or [r for r in records if r.path and Path(r.path).exists()] or records)[0]
            with self.db.write() as session:
                kept = session.get(ModelRecord, keep.id)
                for twin in records:
                    if twin.id != keep.id:
                        merge_model_records(session, kept, session.get(ModelRecord, twin.id))
                        merged += 1
            log.info("%s: %d other checksum(s) of it now name %s…", keep.name, len(records) - 1, keep.sha256[:12])
        return merged

    def fetch_models(self, handle: SyncHandle, report: SyncReport) -> None:
        """Download the files of open rounds' target models that this desk does not have."""
        with self.db.read() as session:
            wanted = list(session.scalars(
                select(ModelRecord).join(RoundModel, RoundModel.model_id == ModelRecord.id)
                .join(Round, Round.id == RoundModel.round_id)
                .where(Round.status == RoundStatus.OPEN.value,
                       ModelRecord.format.in_([ModelFormat.HF_TORCH.value, ModelFormat.ONNX.value])).distinct()))
        for record in wanted:
            if record.path and Path(record.path).exists():
                continue
            response = self.request("GET", f"/models/{record.sha256}", handle, ok=(200, 404), report=report)
            if response.status_code == 404:
                continue
            manifest = ModelRecordWire.model_validate_json(response.content)
            if manifest.files:
                self.download_model(record, manifest, handle, report)

    def download_model(self, record: ModelRecord, manifest: ModelRecordWire, handle: SyncHandle,
                       report: SyncReport, *, damaged_attempts: int | None = None) -> Path:
        """Fetch a model's files into the model cache, each checked against its sha256 and the whole
        against the model's checksum, and point the desk's record at them. ``damaged_attempts``: give
        up after that many damaged arrivals of a file (``Interrupted``) instead of the retry policy's."""
        files = manifest.files or []
        if manifest_sha256((f.name, f.sha256) for f in files) != record.sha256:
            raise SyncError(f"The server's file list for {record.name} does not add up to its checksum; "
                            "nothing was downloaded.")
        cache = paths.models_cache_dir(self.desk.root)
        final = cache / f"sync-{record.sha256[:16]}"
        staging = cache / f".sync-{record.sha256[:16]}.partial"
        if not (final / ".complete").is_file():
            staging.mkdir(parents=True, exist_ok=True)
            total, done = sum(f.size for f in files), 0
            for f in files:
                target = staging / _local_name(f.name)
                target.parent.mkdir(parents=True, exist_ok=True)
                if not (target.is_file() and target.stat().st_size == f.size and file_sha256(target) == f.sha256):
                    def arriving(received: int, before: int = done, size: int = f.size) -> None:
                        handle.progress("models", before + min(received, size), total)

                    try:  # resumes file by file, and a file where its connection dropped
                        self.download_blob(f.sha256, target, handle, report, damaged_attempts=damaged_attempts,
                                           on_bytes=arriving)
                    except NotOnServer as exc:
                        raise NotOnServer(f"{exc} Ask an owner to publish {record.name} again.") from exc
                done += f.size
                handle.progress("models", done, total)
            (staging / ".complete").write_text(record.sha256)
            if final.exists():
                shutil.rmtree(final)
            os.replace(staging, final)
        tokenizer = final / "tokenizer"
        with self.db.write() as session:
            row = session.get(ModelRecord, record.id)
            provenance = dict(row.provenance or {})
            runtime = dict(provenance.get("runtime") or {})
            runtime["tokenizer_dir"] = str(tokenizer) if tokenizer.is_dir() else None
            provenance["runtime"] = runtime
            row.path, row.provenance = str(final), provenance
        report.models.append(record.name)
        return final

    def _upload_model_files(self, model: ModelRecord, handle: SyncHandle) -> list[dict[str, Any]]:
        from local_models.backends import backend_named  # heavy; only owners publishing models need it

        runtime = (model.provenance or {}).get("runtime") or {}
        tokenizer = runtime.get("tokenizer_dir")
        named = backend_named(model.format).model_files(Path(model.path), Path(tokenizer) if tokenizer else None)
        files: list[dict[str, Any]] = [{"name": name, "sha256": file_sha256(path), "size": path.stat().st_size}
                                       for name, path in named]
        if manifest_sha256((f["name"], f["sha256"]) for f in files) != model.sha256:
            raise SyncError(f"The files of {model.name} changed since it was registered; register it again.")
        for (name, path), f in zip(named, files):
            self.upload_blob(path, f["sha256"], handle, what=f"{name} of {model.name}")
        return files

    def upload_blob(self, path: Path, sha256: str, handle: SyncHandle, *, what: str) -> None:
        """Store one file on the server under its sha256, unless it is there already."""
        if self.request("HEAD", f"/blobs/{sha256}", handle, ok=(200, 404)).status_code == 200:
            return
        with open(path, "rb") as stream:
            self.request("PUT", f"/blobs/{sha256}", handle, ok=(200, 201), what=what, content=stream.read(),
                         headers={"Content-Type": "application/octet-stream"})


def _local_name(name: str) -> str:
    """Where a file named in a model's checksum goes in its folder: model files at the top,
    tokenizer files in ``tokenizer/`` (passed as the tokenizer folder)."""
    role, _, base = name.partition("/")
    return base if role == "model" else f"tokenizer/{base}"

