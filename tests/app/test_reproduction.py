"""`dynadesk train --manifest` says how close it came: bit for bit, within tolerance on another machine (same
labels on every held-out text, a small largest change of probability), or a difference report; never a silent
difference. Another machine is faked by rewriting the machine the manifest records, and another machine's
weights by nudging the recorded trained part (and recording its new sha256, as that machine would have)."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from app.core.next_round.reproduction import (
    BIT_FOR_BIT,
    DIFFERENT,
    TOLERANCE,
    WITHIN_TOLERANCE,
    judge,
    recorded_trained_part,
)
from local_models import machine
from local_models.files import file_sha256
from tests.local_models.test_train_rounds import TINY, dynadesk, round_one_and_base_data  # noqa: F401 - dynadesk: the CLI fixture

INTEL = {"cpu": "Intel(R) Xeon(R) Platinum 8480+", "isa": ["amx_bf16", "amx_int8", "amx_tile", "avx2", "avx512bw",
         "avx512f", "avx512_vnni", "fma"], "torch_cpu_capability": "AVX512", "platform": "x86_64"}


@pytest.fixture
def trained(desk, people, data_dir, tmp_path, tiny_base_dir, hate_trigger_model_dir, dynadesk):  # noqa: F811
    """A desk run with base data and held-out round examples: its folder and manifest."""
    _, _, base = round_one_and_base_data(desk, people, hate_trigger_model_dir, tmp_path, decided=48)
    out = tmp_path / "first"
    result = dynadesk(data_dir, "train", "--task", "hate_speech", "--rounds", "1", "--base", base, "--text-column",
                      "sentence", "--label-column", "kind", "--encoder", tiny_base_dir, "--out", out, *TINY)
    assert result.exit_code == 0, result.output
    return out, json.loads((out / "manifest.json").read_text(encoding="utf-8"))


def _as_if_made_elsewhere(folder, manifest, *, scale: float | None, where: dict | None, head=None) -> dict:
    """Rewrite the recorded run as another machine would have left it: its machine, and (with ``scale``) its
    trained part nudged by that much of each tensor's spread (``head``: also a change of the head's tensors),
    with the new sha256 recorded."""
    recorded = json.loads(json.dumps(manifest))
    if where is not None:
        recorded["machine"] = {**manifest["machine"], **where}
    if scale is not None:
        part = load_file(str(folder / "trained_part.safetensors"))
        generator = torch.Generator().manual_seed(3)
        nudged = {k: v + scale * v.std() * torch.randn(v.shape, generator=generator) for k, v in part.items()}
        if head is not None:
            nudged = {k: head(v) if k.startswith("classifier.") else v for k, v in nudged.items()}
        save_file(nudged, str(folder / "trained_part.safetensors"), metadata={"format": "pt"})
        recorded["output"]["trained_part_sha256"] = file_sha256(folder / "trained_part.safetensors")
    (folder / "manifest.json").write_text(json.dumps(recorded), encoding="utf-8")
    return recorded


def test_the_manifest_records_the_machine_its_bits_depend_on(trained):
    _, manifest = trained
    recorded = manifest["machine"]
    assert set(machine.SAME_BITS_FIELDS) <= set(recorded)
    assert recorded["cpu"] and recorded["torch"] == torch.__version__ and recorded["threads"] == 1
    assert recorded["torch_cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert all(flag.startswith(("avx", "amx", "fma")) for flag in recorded["isa"])
    assert machine.changes(recorded, machine.describe(1)) == []


def test_cpuinfo_gives_the_model_and_only_the_flags_that_choose_kernels():
    text = ("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9654 96-Core Processor\n"
            "flags\t\t: fpu sse sse2 avx avx2 fma avx512f avx512bw avx512_bf16 sha_ni\nprocessor\t: 1\n"
            "model name\t: AMD EPYC 9654 96-Core Processor\nflags\t\t: fpu avx2\n")
    assert machine.cpu_info(text) == ("AMD EPYC 9654 96-Core Processor", ["avx2", "avx512_bf16", "avx512bw",
                                                                         "avx512f", "fma"])
    here = {"cpu": "AMD EPYC 9654", "isa": ["avx2", "avx512f", "fma"], "torch_cpu_capability": "AVX512",
            "torch": "2.13.0", "transformers": "5.0.0", "threads": 2, "platform": "x86_64"}
    said = machine.changes({**here, **INTEL}, here)
    assert said[0] == "CPU: Intel(R) Xeon(R) Platinum 8480+ recorded, AMD EPYC 9654 here"
    assert "without amx_bf16, amx_int8, amx_tile, avx512_vnni, avx512bw here" in said[1]
    assert machine.changes(None, here) == ["the manifest does not record the machine it was made on"]


def test_each_outcome_of_a_reproduction_is_said_with_its_figures(desk, trained):
    """The judgement alone: the recorded run rewritten as another machine's, against the run itself."""
    out, manifest = trained
    recorded_dir = out.parent / "recorded"
    recorded_dir.mkdir()
    save_file(load_file(str(out / "trained_part.safetensors")), str(recorded_dir / "trained_part.safetensors"))

    def outcome(scale, where, head=None):
        recorded = _as_if_made_elsewhere(recorded_dir, manifest, scale=scale, where=where, head=head)
        return judge(desk, recorded, recorded_trained_part(recorded_dir, recorded), manifest, out)

    same = outcome(None, INTEL)
    assert same.outcome == BIT_FOR_BIT and same.reproduced and same.sentence.startswith("Reproduced bit for bit")
    assert "Recorded on Intel(R) Xeon(R) Platinum 8480+" in same.sentence
    close = outcome(1e-4, INTEL)
    assert close.outcome == WITHIN_TOLERANCE and close.reproduced
    assert 0 < close.difference.max_delta <= TOLERANCE and close.difference.labels_differing == 0
    held = sum(len(manifest["data"]["splits"][k]) for k in ("base_dev", "base_test", "round_dev", "held_out"))
    assert close.difference.texts == held > 0
    assert close.sentence.startswith(f"Reproduced within tolerance: same labels on every held-out text ({held:,}), "
                                     f"max |Δp| {close.difference.max_delta:.2g}")
    assert "CPU: Intel(R) Xeon(R) Platinum 8480+ recorded" in close.sentence
    # the same small change where the same bits were due: a difference, with its figures
    here = outcome(1e-4, None)
    assert here.outcome == DIFFERENT and not here.reproduced and here.machine_changes == []
    assert "Not reproduced bit for bit on the machine the manifest records" in here.sentence
    moved = outcome(1e-4, INTEL, head=lambda v: v * 0.05)  # the same labels (a positive scale), other probabilities
    assert moved.outcome == DIFFERENT and moved.difference.max_delta > TOLERANCE
    assert moved.difference.labels_differing == 0 and "every held-out text" in moved.sentence
    assert f"max |Δp| {moved.difference.max_delta:.2g} (tolerance {TOLERANCE:g})" in moved.sentence
    far = outcome(1e-4, INTEL, head=lambda v: v.flip(0))  # the two labels swapped: every label another
    assert far.outcome == DIFFERENT and far.difference.labels_differing == held
    assert far.sentence.startswith(f"Not reproduced: {held:,} of {held:,} held-out texts get another label (e.g. ")
    (recorded_dir / "trained_part.safetensors").unlink()
    missing = judge(desk, {**manifest, "output": {**manifest["output"], "trained_tensors_sha256": "0" * 64}},
                    recorded_trained_part(recorded_dir, manifest), manifest, out)
    assert missing.outcome == DIFFERENT and "is not beside the manifest" in missing.sentence


def test_the_cli_says_within_tolerance_on_another_cpu_and_fails_on_a_difference(trained, data_dir, tmp_path,
                                                                               dynadesk):  # noqa: F811
    out, manifest = trained
    _as_if_made_elsewhere(out, manifest, scale=1e-4, where=INTEL)
    result = dynadesk(data_dir, "train", "--manifest", out / "manifest.json", "--out", tmp_path / "again")
    assert result.exit_code == 0, result.output
    assert "Reproduced within tolerance: same labels on every held-out text" in result.output
    assert "Recorded on Intel(R) Xeon(R) Platinum 8480+" in result.output
    _as_if_made_elsewhere(out, manifest, scale=1e-4, where=INTEL, head=lambda v: v.flip(0))
    result = dynadesk(data_dir, "train", "--manifest", out / "manifest.json", "--out", tmp_path / "third")
    assert result.exit_code == 1 and "Not reproduced: " in result.output
    assert "did not reproduce the manifest's model" in result.output and (tmp_path / "third" / "model").is_dir()
