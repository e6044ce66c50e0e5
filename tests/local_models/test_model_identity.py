"""One model, one identity: the same weights give the same sha256 on every desk, whatever the
install path of Dynadesk, of its Python packages or of the model folder."""

from __future__ import annotations

import importlib.util
import shutil
import sys

import onnx
import pytest

import local_models.export
import resources
from local_models.engine import model_sha256
from local_models.export import canonicalize_onnx_file

PART = resources.ROOT / "models" / "hate_speech_r1"


def _export_module_from(checkout) -> object:
    """local_models/export.py loaded from another folder, as a second checkout would run it: the
    stack traces that the exporter records then name other source paths."""
    checkout.mkdir(parents=True)
    source = checkout / "export.py"
    shutil.copy2(local_models.export.__file__, source)
    spec = importlib.util.spec_from_file_location("other_checkout_export", source)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module


def test_exports_from_two_checkouts_and_folders_are_the_same_bytes(trigger_model_dir, trigger_onnx_dir, tmp_path):
    other = _export_module_from(tmp_path / "home" / "someone-else" / "dynadesk-checkout")
    moved = shutil.copytree(trigger_model_dir, tmp_path / "elsewhere" / "trigger")
    second = other.export_onnx(moved, tmp_path / "elsewhere" / "trigger-onnx")

    first_bytes = (trigger_onnx_dir / "model.onnx").read_bytes()
    assert (second.path / "model.onnx").read_bytes() == first_bytes
    assert second.sha256 == model_sha256(trigger_onnx_dir, format="onnx")
    assert b"dynadesk-checkout" not in first_bytes and b"stack_trace" not in first_bytes
    kept = {p.key for p in onnx.load(str(second.path / "model.onnx")).metadata_props}
    assert {"id2label", "max_length", "parent_sha256", "exported_by"} <= kept


def test_an_export_with_build_details_gets_the_identity_of_a_clean_one(trigger_onnx_dir, tmp_path):
    """Exports made before the details were stripped are repaired in place to the same bytes."""
    old = shutil.copytree(trigger_onnx_dir, tmp_path / "old-export")
    model = onnx.load(str(old / "model.onnx"))
    for node in model.graph.node:
        node.metadata_props.add(key="pkg.torch.onnx.stack_trace",
                                value='File "/home/someone/dynadesk/local_models/export.py", line 164, in forward')
    model.graph.input[0].metadata_props.add(key="pkg.torch.onnx.original_node_name", value="input_ids")
    onnx.save(model, str(old / "model.onnx"))
    assert model_sha256(old, format="onnx") != model_sha256(trigger_onnx_dir, format="onnx")

    assert canonicalize_onnx_file(old / "model.onnx") is True
    assert (old / "model.onnx").read_bytes() == (trigger_onnx_dir / "model.onnx").read_bytes()
    assert canonicalize_onnx_file(old / "model.onnx") is False  # already clean: untouched


def _with_build_details(clean, folder):
    """A copy of the export ``clean`` as an older version wrote it: stack traces with its paths."""
    shutil.copytree(clean, folder)
    model = onnx.load(str(folder / "model.onnx"))
    for node in model.graph.node:
        node.metadata_props.add(key="pkg.torch.onnx.stack_trace", value=f'File "{folder}/export.py", line 1')
    onnx.save(model, str(folder / "model.onnx"))
    return folder


def _upgrade_through_0009(desk_dir):
    """Run migration 0009 alone on a desk set back to 0008 (later migrations are in its schema already)."""
    import sqlite3

    from app.core.paths import database_path
    from app.core.storage.db import Database, head_revision

    path = database_path(desk_dir)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE alembic_version SET version_num = '0008'")
    database = Database(path, upgrade=False)
    try:
        database.upgrade("0009")
    finally:
        database.close()
    with sqlite3.connect(path) as db:
        db.execute("UPDATE alembic_version SET version_num = ?", (head_revision(),))


def test_migration_0009_gives_registered_old_exports_and_their_predictions_the_one_identity(trigger_onnx_dir,
                                                                                          tmp_path):
    from app.core.desk import Desk
    from tests.conftest import hate_content, hate_output

    old = _with_build_details(trigger_onnx_dir, tmp_path / "models" / "old-export")
    old_sha, clean_sha = model_sha256(old, format="onnx"), model_sha256(trigger_onnx_dir, format="onnx")
    with Desk(tmp_path / "desk") as desk:
        author = desk.people.create("Ann", "annotator")
        record = desk.models.register("exported model", "onnx", old_sha, path=str(old),
                                      task_id=desk.tasks.task("hate_speech").id)
        example = desk.examples.create(author.id, "hate_speech", hate_content("kind words", "not hate"),
                                       [hate_output(record, "not hate")])
    _upgrade_through_0009(tmp_path / "desk")

    with Desk(tmp_path / "desk") as desk:
        assert [(m.id, m.sha256) for m in desk.models.all()] == [(record.id, clean_sha)]
        assert [o.model_sha256 for o in desk.examples.get(example.id).outputs] == [clean_sha]
    assert (old / "model.onnx").read_bytes() == (trigger_onnx_dir / "model.onnx").read_bytes()


def test_migration_0009_merges_an_old_export_into_the_record_that_already_has_its_new_checksum(trigger_onnx_dir,
                                                                                               tmp_path):
    """The desk holds the clean export (pulled from the server, say) and an old export of the same model: once
    repaired they are one model, so the old record's predictions and round targets move to the clean one, where
    the clean one has none of its own, and the old record goes."""
    from app.core.desk import Desk
    from app.core.storage.models import ModelOutputRow
    from tests.conftest import hate_content, hate_output

    old = _with_build_details(trigger_onnx_dir, tmp_path / "models" / "old-export")
    clean_sha = model_sha256(trigger_onnx_dir, format="onnx")
    with Desk(tmp_path / "desk") as desk:
        lead = desk.people.create("Lee", "lead")
        author = desk.people.create("Ann", "annotator")
        task_id = desk.tasks.task("hate_speech").id
        clean = desk.models.register("clean export", "onnx", clean_sha, path=str(trigger_onnx_dir), task_id=task_id)
        stale = desk.models.register("old export", "onnx", model_sha256(old, format="onnx"), path=str(old),
                                     task_id=task_id)
        round_ = desk.tasks.round("hate_speech")
        desk.rounds.set_models(round_.id, lead.id, [clean.id, stale.id])
        both = desk.examples.create(author.id, "hate_speech", hate_content("kind words", "not hate"),
                                    [hate_output(clean, "not hate", 0.2), hate_output(stale, "not hate", 0.3)])
        only_old = desk.examples.create(author.id, "hate_speech", hate_content("other words", "not hate"),
                                        [hate_output(clean, "not hate", 0.1), hate_output(stale, "hate", 0.7)])
        with desk.db.write() as session:  # an example that only the old export answered
            session.query(ModelOutputRow).filter_by(example_id=only_old.id, model_id=clean.id).delete()

    _upgrade_through_0009(tmp_path / "desk")

    with Desk(tmp_path / "desk") as desk:
        assert [(m.id, m.sha256) for m in desk.models.all()] == [(clean.id, clean_sha)]
        assert [m.id for m in desk.models.round_models(round_.id)] == [clean.id]
        kept = desk.examples.get(both.id).outputs
        assert [(o.model_id, o.model_sha256, o.probabilities["hate"]) for o in kept] == [(clean.id, clean_sha, 0.2)]
        moved = desk.examples.get(only_old.id).outputs
        assert [(o.model_id, o.model_sha256, o.label) for o in moved] == [(clean.id, clean_sha, "hate")]
    assert (old / "model.onnx").read_bytes() == (trigger_onnx_dir / "model.onnx").read_bytes()


@pytest.mark.slow
def test_a_desk_holding_the_bundled_model_under_the_servers_checksum_does_not_list_it_twice(desk,
                                                                                          default_model_cache):
    from app.core import paths
    from app.core.services.target_models import DEFAULT_MODEL_NAME, ensure_default_model
    from local_models.default_model import prepare_default_model
    from local_models.export import read_export_description

    cache = paths.models_cache_dir(desk.root)
    shutil.copytree(default_model_cache, cache)
    prepared = prepare_default_model(PART, cache)
    flavour = "ONNX int8" if prepared.onnx_int8 else "ONNX fp32"
    # pulled from the server, as the owner's desk exported it, and its files downloaded
    export = read_export_description(prepared.onnx_dir)["export"]
    servers = desk.models.register(f"{DEFAULT_MODEL_NAME}, {flavour}", "onnx", "d" * 64, path=str(prepared.onnx_dir),
                                   task_id=desk.tasks.task("hate_speech").id,
                                   provenance={"default_model": True, "export": export})

    assert ensure_default_model(desk).id == servers.id
    assert [m.id for m in desk.models.all() if m.format == "onnx"] == [servers.id]
