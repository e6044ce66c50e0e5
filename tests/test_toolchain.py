"""The toolchain's promises that a reviewer cannot see in one file: the lock covers pyproject.toml's ranges
and leaves torch to its pin, transformers is a range with one release locked inside it, the torch pin and the
version are written once, and mypy's "to fix" list only shrinks."""

from __future__ import annotations

import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from tests.conftest import ROOT

# The length of [tool.mypy]'s "to fix" list (the override with ignore_errors). Fix a module, take it off the
# list, and lower this number: it never grows.
MYPY_TO_FIX = 37
# Releases that change exported graphs' bytes: a desk takes a rebuilt int8 graph by its answers on the recipe's
# check texts (local_models/int8_check.py), so pyproject.toml gives these a tested range, never one release;
# the lock holds the one release CI runs
RANGED = ("transformers",)

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _locked() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "requirements.lock").read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].split(";", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"requirements.lock: {line!r} is not pinned with =="
            pins[canonicalize_name(name)] = version.strip()
    return pins


def _wanted() -> list[Requirement]:
    project = PYPROJECT["project"]
    lines = project["dependencies"] + [r for extra in project["optional-dependencies"].values() for r in extra]
    return [Requirement(line) for line in lines]


def test_the_lock_pins_every_requirement_within_its_range_and_leaves_torch_to_its_pin():
    locked = _locked()
    for requirement in _wanted():
        name = canonicalize_name(requirement.name)
        if name in ("dynadesk", "torch") or (requirement.marker and not requirement.marker.evaluate()):
            continue
        assert name in locked, f"{name} is in pyproject.toml but not in requirements.lock: run make lock"
        assert requirement.specifier.contains(locked[name], prereleases=True), (
            f"requirements.lock pins {name}=={locked[name]}, outside pyproject.toml's {requirement}: run make lock")
    # torch comes from its pin (the CPU wheel on disk); a locked torch would be PyPI's CUDA build and its stack
    assert not [n for n in locked if n in ("torch", "triton") or n.startswith("nvidia-")]


def test_transformers_is_a_range_and_the_lock_pins_one_release_inside_it():
    for name in RANGED:
        (requirement,) = [r for r in _wanted() if canonicalize_name(r.name) == name]
        bounds = {spec.operator: Version(spec.version) for spec in requirement.specifier}
        assert set(bounds) == {">=", "<"}, f"{requirement}: a range with a lower and an upper bound, not a pin"
        lower, upper = bounds[">="], bounds["<"]
        assert requirement.specifier.contains(f"{lower.major}.{lower.minor + 1}.0"), (
            f"{requirement} admits only {lower}'s patch releases: that is a pin")
        assert upper.major <= lower.major + 1, f"{requirement}: the upper bound is past the next major release"
        locked = _locked()[canonicalize_name(name)]
        assert re.fullmatch(r"\d+\.\d+\.\d+", locked) and requirement.specifier.contains(locked), (
            f"requirements.lock pins {name}=={locked}, not one release inside {requirement}")
        installed = importlib.metadata.version(name)
        assert requirement.specifier.contains(installed), f"{name} {installed} is installed, outside {requirement}"


def test_the_torch_pin_is_written_once_and_read_by_the_makefile_and_packaging():
    pins = [r for r in PYPROJECT["project"]["dependencies"] if r.replace(" ", "").startswith("torch")]
    assert len(pins) == 1 and re.fullmatch(r"torch==\d+\.\d+\.\d+", pins[0].replace(" ", "")), pins
    release = pins[0].split("==")[1].strip()
    for path in ("Makefile", ".ci/run", "packaging/build.py", "packaging/dynadesk.spec", "requirements.lock"):
        text = (ROOT / path).read_text(encoding="utf-8")
        assert not re.search(r"torch\s*==\s*\d", text) and release not in text, f"{path} pins torch again"
    sys.path.insert(0, str(ROOT / "packaging"))
    try:
        import build
    finally:
        sys.path.remove(str(ROOT / "packaging"))
    assert f"torch=={build.torch_pin()}" == pins[0].replace(" ", "")


def test_the_version_is_written_once():
    import app

    assert PYPROJECT["project"]["dynamic"] == ["version"] and "version" not in PYPROJECT["project"]
    assert PYPROJECT["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "app.__version__"}
    assert importlib.metadata.version("dynadesk") == app.__version__


def _mypy_to_fix() -> list[str]:
    lists = [o["module"] for o in PYPROJECT["tool"]["mypy"]["overrides"] if o.get("ignore_errors")]
    assert len(lists) == 1, "one 'to fix' list (an override with ignore_errors), not several"
    return lists[0]


def test_mypy_checks_the_whole_shipped_package_and_its_to_fix_list_only_shrinks():
    shipped = {p.rstrip("*") for p in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]}
    assert set(PYPROJECT["tool"]["mypy"]["files"]) == shipped - {"resources"}
    to_fix = _mypy_to_fix()
    assert len(set(to_fix)) == len(to_fix)
    for module in to_fix:  # named modules only: a wildcard would hide new modules
        path = ROOT / Path(*module.split("."))
        assert "*" not in module and (path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()), module
    assert len(to_fix) <= MYPY_TO_FIX, f"a module joined mypy's 'to fix' list ({len(to_fix)} > {MYPY_TO_FIX}): fix it"
    assert len(to_fix) == MYPY_TO_FIX, f"the 'to fix' list shrank to {len(to_fix)}: lower MYPY_TO_FIX to match"
