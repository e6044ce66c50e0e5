"""The first start's two halves without Qt: round 1 takes the PyTorch form at once, switches to the
ONNX form only while it is exactly as the first start left it, and a later start knows it waits."""

from __future__ import annotations

import shutil

import pytest

from app.core import paths
from app.core.services import default_model_forms as forms

pytestmark = pytest.mark.slow


@pytest.fixture
def stand_in(desk, default_model_cache):
    shutil.copytree(default_model_cache, paths.models_cache_dir(desk.root))  # prepared once per test run
    forms.prepare_torch_files(desk)
    record = forms.adopt_torch_form(desk)
    assert record is not None and record.format == "hf-torch"
    return record


def round_one_targets(desk) -> list:
    return desk.models.round_models(desk.tasks.round("hate_speech").id)


def test_round_one_waits_for_its_fast_form_then_switches_once(desk, stand_in):
    assert forms.waiting_stand_in(desk).id == stand_in.id
    assert forms.adopt_torch_form(desk) is None  # a second start adopts nothing
    fast = forms.switch_to_fast_form(desk, forms.prepared_fast_files(desk))
    assert fast.format == "onnx" and fast.provenance["parent_model"]["sha256"] == stand_in.sha256
    assert [r.id for r in round_one_targets(desk)] == [fast.id]
    assert forms.waiting_stand_in(desk) is None
    assert forms.switch_to_fast_form(desk, forms.prepared_fast_files(desk)) is None  # nothing left to switch


def test_a_round_a_lead_changed_meanwhile_keeps_their_choice(desk, stand_in):
    lead = desk.people.create("Lee Lead", "lead")
    round_ = desk.tasks.round("hate_speech")
    desk.rounds.set_models(round_.id, lead.id, [stand_in.id])  # the lead wants PyTorch (gradients), on purpose
    assert forms.waiting_stand_in(desk) is None
    assert forms.switch_to_fast_form(desk, forms.prepared_fast_files(desk)) is None
    assert [r.id for r in round_one_targets(desk)] == [stand_in.id]


def test_a_pytorch_form_known_from_the_teams_server_without_files_takes_the_files_prepared_here(
        desk, default_model_cache):
    """A pull brings the record of the target's PyTorch form (published for word substitution) without its
    files; the first start that prepares the same files points that record at them instead of using a
    record without files."""
    from local_models.engine import model_sha256

    shutil.copytree(default_model_cache, paths.models_cache_dir(desk.root))  # prepared once per test run
    prepared = forms.prepare_torch_files(desk)
    pulled = desk.models.register("Hate speech R1, PyTorch (the team's)", "hf-torch",
                                  model_sha256(prepared.torch_dir, format="hf-torch"),
                                  task_id=desk.tasks.task("hate_speech").id)
    assert not pulled.path
    record = forms.adopt_torch_form(desk)
    assert record is not None and record.id == pulled.id and record.path == str(prepared.torch_dir)
    assert [r.id for r in round_one_targets(desk)] == [pulled.id]


def test_the_bundled_models_pytorch_form_is_built_here_for_word_substitution_not_downloaded(
        desk, default_model_cache):
    """A target that is a form of the bundled model (as round 1 arrives through sync, before any first start
    here): its PyTorch form is assembled from the bundled files, with no server asked; a target naming
    another PyTorch form still needs the team's server."""
    from local_models.engine import model_sha256
    from sync.client import ClientFactory
    from sync.gradient_forms import fetch_gradient_form, gradient_source
    from sync.transport import SyncError

    shutil.copytree(default_model_cache, paths.models_cache_dir(desk.root))  # prepared once per test run
    bundled_sha = model_sha256(forms.prepare_torch_files(desk).torch_dir, format="hf-torch")
    task_id = desk.tasks.task("hate_speech").id
    lead = desk.people.create("Lee Lead", "lead")

    def synced_target(name: str, sha: str, parent: str):
        record = desk.models.register(name, "onnx", sha, task_id=task_id, label_map={"0": "not hate", "1": "hate"},
                                      provenance={"default_model": True, "parent_model": {"sha256": parent}})
        desk.rounds.set_models(desk.tasks.round("hate_speech").id, lead.id, [record.id])
        return [record]

    source = gradient_source(desk, synced_target("the team's int8 form", "e" * 64, bundled_sha))
    assert source is not None and source.bundled and source.sha256 == bundled_sha
    form = fetch_gradient_form(desk, ClientFactory(desk), source)  # this desk has no server at all
    assert form.format == "hf-torch" and form.sha256 == bundled_sha
    assert model_sha256(form.path, format="hf-torch") == bundled_sha
    assert gradient_source(desk, synced_target("the team's int8 form", "e" * 64, bundled_sha)) is None  # here now

    other = gradient_source(desk, synced_target("another model's int8 form", "f" * 64, "d" * 64))
    assert other is not None and other.bundled
    with pytest.raises(SyncError, match="no team server"):
        fetch_gradient_form(desk, ClientFactory(desk), other)
