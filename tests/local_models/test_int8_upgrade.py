"""The int8 form under another transformers release than the lock's: ``make check-transformers
TRANSFORMERS=5.24.0`` installs that release apart and runs this. The bundled model, prepared from scratch
with it, keeps its int8 form: the same bytes as the graph whose parity was checked, or the same answers on
the recipe's check texts. Run it before widening pyproject.toml's transformers range; skipped otherwise."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys

import pytest

from local_models.int8_check import MAX_CHECK_CHANGE
from tests.conftest import ROOT

OTHER = os.environ.get("DYNADESK_OTHER_TRANSFORMERS")  # a folder holding another transformers release

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not OTHER, reason="no other transformers release installed apart "
                                                   "(make check-transformers TRANSFORMERS=...)")]

PREPARE = """
import json, sys
from pathlib import Path
import transformers
import resources
from local_models.default_model import prepare_default_model

prepared = prepare_default_model(resources.ROOT / "models" / "hate_speech_r1", Path(sys.argv[1]))
export = json.loads((prepared.onnx_dir / "dynadesk_model.json").read_text())["export"]
print(json.dumps({"transformers": transformers.__version__, "int8": prepared.onnx_int8,
                  "notes": list(prepared.notes), "parity": export.get("parity")}))
"""


def test_the_bundled_model_keeps_its_int8_form_under_another_transformers_release(tmp_path):
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(OTHER), str(ROOT)])}
    run = subprocess.run([sys.executable, "-c", PREPARE, str(tmp_path / "cache")], env=environment, cwd=ROOT,
                         capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stderr[-3000:]
    result = json.loads(run.stdout.strip().splitlines()[-1])
    assert result["transformers"] != importlib.metadata.version("transformers"), "not another release"
    assert result["int8"] and result["notes"] == [], result["notes"]
    verification = result["parity"]["verification"]
    if verification["by"] == "answers":
        assert verification["check"]["passed"] and verification["check"]["max_change"] <= MAX_CHECK_CHANGE
    else:
        assert verification["by"] == "sha256" and verification["int8_sha256"] == verification["checked_int8_sha256"]
