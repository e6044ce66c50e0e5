"""Model files over sync: downloading open rounds' target models, uploading them to publish, and one identity per model. Qt-free."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import select

from app.core import paths
from app.core.domain import ModelFormat, RoundStatus
from app.core.storage.models import ModelRecord, Round, RoundModel
from local_models.files import file_sha256
from sync.protocol import API, ModelRecordWire, manifest_sha256
from sync.transport import (CHUNK, RETRY_STATUS, Connection, Damaged, Interrupted, Refused, SyncError, SyncHandle,
                            SyncReport, _errors, _expect)

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
            known = [r for r in records
                     if self._call("GET", f"{API}/models/{r.sha256}", handle, report=report).status_code == 200]
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
            response = self._call("GET", f"{API}/models/{record.sha256}", handle, report=report)
            if response.status_code == 404:
                continue
            _expect(response, 200)
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
                    self._download_blob(f.sha256, target, handle, report,  # resumes file by file
                                        damaged_attempts=damaged_attempts)
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

    def _download_blob(self, sha256: str, target: Path, handle: SyncHandle, report: SyncReport, *,
                       damaged_attempts: int | None = None) -> None:
        """Fetch one file into ``target``, its sha256 checked; a damaged arrival is fetched again, up to
        the retry policy's attempts (or ``damaged_attempts`` damaged arrivals), then ``Interrupted``."""
        part = target.with_name(target.name + ".part")
        last = ""
        attempt, paced, damaged = 0, 0.0, 0
        while attempt < self.policy.attempts:
            handle.check()
            digest = hashlib.sha256()
            limited = None
            try:
                with self.http.stream("GET", f"{API}/blobs/{sha256}") as response:
                    if response.status_code == 404:
                        raise SyncError(f"The server has no file {sha256}; ask an owner to publish the model again.")
                    if response.status_code == 429:
                        limited = response
                    elif response.status_code in RETRY_STATUS:
                        last = f"HTTP {response.status_code}"
                    else:
                        _expect(response, 200)
                        with open(part, "wb") as out:
                            for chunk in response.iter_bytes(CHUNK):
                                handle.check()
                                digest.update(chunk)
                                out.write(chunk)
                            out.flush()
                            os.fsync(out.fileno())
                        if digest.hexdigest() == sha256:
                            os.replace(part, target)
                            return
                        last = "the file arrived damaged (its sha256 does not match)"
                        damaged += 1
            except httpx.TransportError as exc:
                last = f"{exc.__class__.__name__}: {exc}"
            if limited is not None:
                paced += self._pace(limited, handle, report, paced)
                continue
            attempt += 1
            part.unlink(missing_ok=True)
            if damaged_attempts is not None and damaged >= damaged_attempts:
                raise Damaged(f"A model file could not be downloaded ({last}); the next sync tries again.")
            self.retries += 1
            report.retries += 1
            handle.sleep(self.policy.delay(attempt))
        raise Interrupted(f"A model file could not be downloaded ({last}); the next sync tries again.")

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
        head = self._call("HEAD", f"{API}/blobs/{sha256}", handle)
        if head.status_code == 200:
            return
        with open(path, "rb") as stream:
            response = self._call("PUT", f"{API}/blobs/{sha256}", handle, content=stream.read(),
                                  headers={"Content-Type": "application/octet-stream"})
        if response.status_code not in (200, 201):
            raise Refused(f"The server refused {what}: {_errors(response).detail}")


def _local_name(name: str) -> str:
    """Where a file named in a model's checksum goes in its folder: model files at the top,
    tokenizer files in ``tokenizer/`` (passed as the tokenizer folder)."""
    role, _, base = name.partition("/")
    return base if role == "model" else f"tokenizer/{base}"

