"""The assistant finds the PyTorch form of a target that runs as ONNX, as the desk registered it."""

from __future__ import annotations

import shutil
import uuid

import pytest

from app.core import paths
from app.core.assist.forms import gradient_form
from app.core.services import target_models


@pytest.fixture
def onnx_target(desk, default_model_cache):
    shutil.copytree(default_model_cache, paths.models_cache_dir(desk.root))  # prepared once per test run
    record = target_models.ensure_default_model(desk)
    assert record.format == "onnx"
    return record


def test_an_onnx_target_leads_to_the_pytorch_form_it_was_exported_from(desk, onnx_target):
    form = gradient_form(desk, onnx_target)
    assert form is not None and form.format == "hf-torch"
    assert form.id == uuid.UUID(onnx_target.provenance["parent_model"]["id"])
    assert gradient_form(desk, form).id == form.id  # a PyTorch target is its own gradient form
    engine = target_models.model_spec(form, num_threads=1).load()
    assert engine.supports_gradients and engine.sha256 == form.sha256
    engine.close()


def test_without_the_pytorch_files_there_is_no_gradient_form(desk, onnx_target):
    form = gradient_form(desk, onnx_target)
    shutil.rmtree(form.path)
    assert gradient_form(desk, onnx_target) is None
