"""Word substitution on a team desk: the owner publishes a round whose target runs as ONNX int8, with the
PyTorch form it was exported from; an annotator's desk syncs (and gets only the int8 form), and the first
time its assistant needs gradients it fetches the PyTorch form from the server, every file checked, then
substitutes words the target itself confirms. A connection that drops or a file that arrives damaged leaves
nothing installed (and a dropped download resumes); a server without the form says what the owner can do.
Real desks, a real server on loopback, real small models."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest

from app.core import paths
from app.core.assist.forms import first_gradient_form
from app.core.assist.pipeline import suggest
from app.core.assist.types import Generator, Goal, Unavailable
from app.core.desk import Desk
from app.core.services.rounds import parse_settings
from app.core.services.target_models import load_engine_for, load_ensemble, model_input, register_model
from local_models.engine import model_sha256
from local_models.files import file_sha256
from sync.client import ClientFactory
from sync.gradient_forms import (
    GradientFormMissing,
    GradientFormNotFetched,
    fetch_gradient_form,
    gradient_source,
)
from sync.server import store
from sync.tokens import TokenStore
from sync.transport import RetryPolicy, SyncHandle
from tests.model_fixtures import built_once
from tests.sync.helpers import prepare_desk
from tests.sync.test_client import QUICK, client_for

HATEFUL = "the banana people ruin everything"  # the trigger model says "hate" for "banana"


@pytest.fixture(scope="session")
def hate_trigger_int8_dir(tmp_path_factory, hate_trigger_model_dir) -> Path:
    from local_models.export import export_onnx

    return built_once(tmp_path_factory, "hate-trigger-int8", lambda root: export_onnx(
        hate_trigger_model_dir, root / "int8", int8=True, force=True)) / "int8"


def owner_publishes_round_3(team, tmp_path, torch_dir: Path, int8_dir: Path, *, with_gradient_forms: bool = True):
    """The owner's desk: the PyTorch model and its int8 export, round 3 (assistant on) with the int8 form
    as its target, published. Returns (PyTorch record, int8 record)."""
    owner = prepare_desk(tmp_path / "owner", team.owner)
    try:
        torch_record = register_model(owner, torch_dir, task_code="hate_speech", name="Trigger R3", format="hf-torch")
        int8 = register_model(owner, int8_dir, task_code="hate_speech", name="Trigger R3, ONNX int8", format="onnx",
                              provenance={"parent_model": {"id": str(torch_record.id), "sha256": torch_record.sha256}})
        round_3 = owner.tasks.get_or_create_round("hate_speech", 3)
        owner.rounds.set_models(round_3.id, team.owner.id, [int8.id])
        owner.rounds.update(round_3.id, team.owner.id, settings=parse_settings({"assistant": "on"}))
        with client_for(owner, team.url, team.owner) as client:
            results = client.publish("hate_speech", [3], with_gradient_forms=with_gradient_forms).results
        assert {r.status for r in results} <= {"stored", "already_stored"}, results
        return torch_record, int8
    finally:
        owner.close()


def synced_annotator(team, root: Path) -> Desk:
    """Ann's desk, set up for the team's server (as `dynadesk sync configure` leaves it), after one sync."""
    desk = prepare_desk(root, team.ann)
    desk.settings.server_url = team.url
    desk.settings.acknowledged_warnings = ["hate_speech"]
    desk.save_settings()
    TokenStore(desk.root).set(team.url, team.ann.token)
    with client_for(desk, team.url, team.ann) as client:
        client.run()
    return desk


def round_3_targets(desk: Desk) -> list:
    return desk.models.round_models(desk.tasks.round("hate_speech", 3).id)


def files_checksum(record) -> str:
    """The checksum of a fetched form's files as they lie on this desk (the tokenizer in its own folder)."""
    tokenizer = ((record.provenance or {}).get("runtime") or {}).get("tokenizer_dir")
    return model_sha256(record.path, format="hf-torch", tokenizer_dir=tokenizer)


def largest_file(server_db, sha256: str):
    return max(store.model_manifest(server_db, sha256).files, key=lambda f: f.size)


def no_form_installed(desk: Desk, sha256: str) -> bool:
    """Nothing of the form is registered with files, and no folder of it was moved into place."""
    with_files = [r for r in desk.models.all() if r.sha256 == sha256 and r.path]
    return not with_files and not (paths.models_cache_dir(desk.root) / f"sync-{sha256[:16]}").exists()


class FaultyBlobs(httpx.BaseTransport):
    """The loopback connection, except for one file's downloads: each is cut after ``cut`` bytes (the
    connection drops), or has one byte flipped (``flip``); ``faults`` of them, then they pass. Every range
    asked for that file is kept. Closing a client leaves it open: several clients go through it."""

    def __init__(self, sha256: str, *, cut: int | None = None, flip: bool = False, faults: int = 10**6,
                 gate: threading.Event | None = None, no_ranges: bool = False):
        self.inner = httpx.HTTPTransport()
        self.sha256, self.cut, self.flip, self.faults, self.gate = sha256, cut, flip, faults, gate
        self.no_ranges = no_ranges  # as a server (or proxy) that always sends the whole file
        self.ranges: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        asked = request.headers.get("Range")
        if self.no_ranges and asked is not None:
            del request.headers["Range"]
        response = self.inner.handle_request(request)
        if not request.url.path.endswith(f"/blobs/{self.sha256}") or response.status_code not in (200, 206):
            return response
        self.ranges.append(asked)
        if self.gate is not None:
            assert self.gate.wait(60), "the test never let the file come"
        if self.faults <= 0:
            return response
        self.faults -= 1
        return httpx.Response(response.status_code, headers=response.headers, request=request,
                              stream=_Faulty(response.stream, self.cut, self.flip), extensions=response.extensions)

    def close(self) -> None:
        pass


class _Faulty(httpx.SyncByteStream):
    def __init__(self, inner, cut: int | None, flip: bool):
        self.inner, self.cut, self.flip = inner, cut, flip

    def __iter__(self):
        sent = 0
        for chunk in self.inner:
            if self.flip and sent == 0 and chunk:
                chunk = bytes([chunk[0] ^ 0xFF]) + chunk[1:]
            if self.cut is not None and sent + len(chunk) >= self.cut:
                yield chunk[:self.cut - sent]
                raise httpx.ReadError("the connection dropped (test)")
            sent += len(chunk)
            yield chunk

    def close(self) -> None:
        self.inner.close()


def test_a_synced_annotator_fetches_the_pytorch_form_when_substitution_first_needs_it(
        team, tmp_path, server_db, hate_trigger_model_dir, hate_trigger_int8_dir):
    torch_record, int8 = owner_publishes_round_3(team, tmp_path, hate_trigger_model_dir, hate_trigger_int8_dir)
    published = store.model_manifest(server_db, torch_record.sha256)
    assert published is not None and published.format.value == "hf-torch" and published.files  # with the round

    desk = synced_annotator(team, tmp_path / "ann")
    try:
        targets = round_3_targets(desk)
        assert [(r.sha256, r.format) for r in targets] == [(int8.sha256, "onnx")] and Path(targets[0].path).is_dir()
        # the sync brought the int8 form's files, and the PyTorch form's record without its (large) files
        assert no_form_installed(desk, torch_record.sha256)
        assert first_gradient_form(desk, targets) is None
        definition = desk.tasks.definition_by_code("hate_speech")
        inputs = model_input(definition, {"text": HATEFUL})
        models = load_ensemble(targets, num_threads=1)
        try:
            before = suggest(models, definition, inputs, goal=Goal.FOOL, writer_label="hate", gradients=None)
            assert before.unavailable[Generator.SUBSTITUTION] is Unavailable.NO_GRADIENTS

            source = gradient_source(desk, targets)
            assert source is not None and source.sha256 == torch_record.sha256
            assert (source.target, source.task, source.round_number) == (int8.name, "hate_speech", 3)
            seen: list[tuple[int, int]] = []
            handle = SyncHandle(on_progress=lambda phase, done, total: seen.append((done, total)))
            form = fetch_gradient_form(desk, ClientFactory(desk, policy=QUICK), source, handle=handle)

            assert form.sha256 == torch_record.sha256 and form.format == "hf-torch"
            assert files_checksum(form) == torch_record.sha256  # checked again, here
            assert file_sha256(Path(form.path) / "model.safetensors") == \
                file_sha256(hate_trigger_model_dir / "model.safetensors")
            total = sum(f.size for f in published.files)
            assert seen[0] == (0, total) and seen[-1] == (total, total)
            assert all(a[0] <= b[0] for a, b in zip(seen, seen[1:]))  # bytes only ever add up
            assert first_gradient_form(desk, targets).id == form.id  # the assistant finds it from now on

            gradients = load_engine_for(form, num_threads=1)
            try:
                after = suggest(models, definition, inputs, goal=Goal.FOOL, writer_label="hate", gradients=gradients)
            finally:
                gradients.close()
            substituted = [s for s in after.suggestions if s.candidate.generator is Generator.SUBSTITUTION]
            assert Generator.SUBSTITUTION not in after.unavailable and substituted
            target = models.engines[0]
            assert not target.supports_gradients  # every suggestion was checked by the int8 target itself
            for checked in substituted:
                answer = target.predict_one(checked.candidate.text)
                assert answer.label == checked.predicted
                assert answer.probabilities["hate"] == pytest.approx(checked.probabilities["hate"], abs=1e-5)
            assert any(s.fools and "banana" not in s.candidate.text for s in substituted)
        finally:
            models.close()
    finally:
        desk.close()


def test_a_dropped_or_damaged_download_installs_nothing_and_a_dropped_one_resumes(
        team, tmp_path, server_db, hate_trigger_model_dir, hate_trigger_int8_dir):
    torch_record, _int8 = owner_publishes_round_3(team, tmp_path, hate_trigger_model_dir, hate_trigger_int8_dir)
    big = largest_file(server_db, torch_record.sha256)
    desk = synced_annotator(team, tmp_path / "ann")
    try:
        source = gradient_source(desk, round_3_targets(desk))
        assert source is not None
        staged = paths.models_cache_dir(desk.root) / f".sync-{torch_record.sha256[:16]}.partial"

        # the connection drops after a quarter of the file, every time: two tries, then a clear stop
        quarter = big.size // 4
        dropping = FaultyBlobs(big.sha256, cut=quarter)
        clients = ClientFactory(desk, policy=RetryPolicy(attempts=2, first_delay=0.01, max_delay=0.02),
                                transport=dropping)
        with pytest.raises(GradientFormNotFetched, match="did not arrive whole.*nothing of it is used"):
            fetch_gradient_form(desk, clients, source)
        assert no_form_installed(desk, torch_record.sha256) and first_gradient_form(desk, round_3_targets(desk)) is None
        assert dropping.ranges == [None, f"bytes={quarter}-"]  # the second try asked only for the rest
        kept = list(staged.rglob("*.part"))
        assert [p.stat().st_size for p in kept] == [2 * quarter]  # what arrived waits for the next try

        # asked again on a healthy connection: it resumes where it stopped, and the whole is checked
        healthy = FaultyBlobs(big.sha256, faults=0)
        form = fetch_gradient_form(desk, ClientFactory(desk, policy=QUICK, transport=healthy), source)
        assert healthy.ranges == [f"bytes={2 * quarter}-"]
        assert files_checksum(form) == torch_record.sha256
        assert first_gradient_form(desk, round_3_targets(desk)).id == form.id

        # another desk whose copy arrives damaged each time: refused, nothing kept, nothing registered
        other = synced_annotator(team, tmp_path / "ann2")
        try:
            flipping = FaultyBlobs(big.sha256, flip=True)
            with pytest.raises(GradientFormNotFetched, match="its sha256 does not match"):
                fetch_gradient_form(other, ClientFactory(other, policy=QUICK, transport=flipping),
                                    gradient_source(other, round_3_targets(other)))
            assert len(flipping.ranges) == 2 and flipping.ranges[0] is None
            assert no_form_installed(other, torch_record.sha256)
            assert not list(paths.models_cache_dir(other.root).rglob("*.part"))  # no damaged bytes kept
        finally:
            other.close()
    finally:
        desk.close()


def test_a_server_without_the_pytorch_form_says_what_the_owner_can_do(
        team, tmp_path, server_db, hate_trigger_model_dir, hate_trigger_int8_dir):
    torch_record, _int8 = owner_publishes_round_3(team, tmp_path, hate_trigger_model_dir, hate_trigger_int8_dir,
                                                  with_gradient_forms=False)
    assert store.model_manifest(server_db, torch_record.sha256) is None
    desk = synced_annotator(team, tmp_path / "ann")
    try:
        source = gradient_source(desk, round_3_targets(desk))
        assert source is not None and source.sha256 == torch_record.sha256  # named by the int8 form's record
        with pytest.raises(GradientFormMissing) as missing:
            fetch_gradient_form(desk, ClientFactory(desk, policy=QUICK), source)
        message = str(missing.value)
        assert message.count(". ") == 0 and message.endswith(".")  # one sentence
        assert "PyTorch form of Trigger R3, ONNX int8" in message and "owner" in message
        assert "`dynadesk sync publish hate_speech --round 3`" in message
        assert no_form_installed(desk, torch_record.sha256)

        # the owner does as it says: the next ask fetches it
        owner_publishes_round_3(team, tmp_path, hate_trigger_model_dir, hate_trigger_int8_dir)
        form = fetch_gradient_form(desk, ClientFactory(desk, policy=QUICK), source)
        assert files_checksum(form) == torch_record.sha256
    finally:
        desk.close()


def test_dynadesk_suggest_on_a_synced_desk_fetches_the_form_and_substitutes(
        team, tmp_path, hate_trigger_model_dir, hate_trigger_int8_dir):
    import json

    from tests.cli_in_process import run_dynadesk

    torch_record, _int8 = owner_publishes_round_3(team, tmp_path, hate_trigger_model_dir, hate_trigger_int8_dir)
    synced_annotator(team, tmp_path / "ann").close()
    ran = run_dynadesk("--data-dir", tmp_path / "ann", "suggest", "--task", "hate_speech", "--round", "3",
                       "--label", "hate", "--top", "64", "--json", HATEFUL)
    assert ran.returncode == 0, ran.stderr
    assert "Fetching the PyTorch form of Trigger R3, ONNX int8 from the team's server" in ran.stderr
    document = json.loads(ran.stdout)
    assert Generator.SUBSTITUTION.value not in document["unavailable"]
    assert [s for s in document["suggestions"] if s["generator"] == Generator.SUBSTITUTION.value]
    with Desk(tmp_path / "ann") as desk:
        assert [files_checksum(r) for r in desk.models.all() if r.sha256 == torch_record.sha256] == \
            [torch_record.sha256]


def test_a_server_that_sends_whole_files_only_still_completes_a_dropped_download(
        team, tmp_path, server_db, hate_trigger_model_dir, hate_trigger_int8_dir):
    """Resuming asks for the rest; a server that answers with the whole file (200) is read from its start."""
    torch_record, _int8 = owner_publishes_round_3(team, tmp_path, hate_trigger_model_dir, hate_trigger_int8_dir)
    big = largest_file(server_db, torch_record.sha256)
    desk = synced_annotator(team, tmp_path / "ann")
    try:
        whole_only = FaultyBlobs(big.sha256, cut=big.size // 3, faults=1, no_ranges=True)
        form = fetch_gradient_form(desk, ClientFactory(desk, policy=QUICK, transport=whole_only),
                                   gradient_source(desk, round_3_targets(desk)))
        assert whole_only.ranges == [None, f"bytes={big.size // 3}-"]  # asked for the rest, got the whole
        assert files_checksum(form) == torch_record.sha256
        assert file_sha256(Path(form.path) / "model.safetensors") == \
            file_sha256(hate_trigger_model_dir / "model.safetensors")
    finally:
        desk.close()
