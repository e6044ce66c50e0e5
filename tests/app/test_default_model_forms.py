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
