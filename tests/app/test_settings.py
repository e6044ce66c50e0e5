import json

from app.core.settings import MIGRATIONS, SETTINGS_VERSION, Settings, SettingsStore, migrate


def test_settings_round_trip_as_text(tmp_path):
    store = SettingsStore(tmp_path / "settings.json")
    settings = store.load()
    settings.font_size = 14
    settings.last_task = "nli"
    store.save(settings)
    raw = json.loads((tmp_path / "settings.json").read_text())
    assert raw["version"] == SETTINGS_VERSION and raw["font_size"] == 14
    assert SettingsStore(tmp_path / "settings.json").load() == settings


def test_an_unreadable_file_is_kept_aside_and_defaults_are_used(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text('{"font_size": "huge"')
    store = SettingsStore(path)
    assert store.load() == Settings()
    assert "could not be read" in store.problem
    kept = list(tmp_path.glob("settings.json.unreadable-*"))
    assert len(kept) == 1 and kept[0].read_text() == '{"font_size": "huge"'


def test_older_versions_are_migrated_step_by_step(monkeypatch):
    monkeypatch.setattr("app.core.settings.SETTINGS_VERSION", 3)
    def rename(old, new):
        def step(raw):
            raw[new] = raw.pop(old)
            return raw
        return step

    monkeypatch.setitem(MIGRATIONS, 1, rename("fontsize", "font"))
    monkeypatch.setitem(MIGRATIONS, 2, rename("font", "font_size"))
    assert migrate({"version": 1, "fontsize": 13}) == {"version": 3, "font_size": 13}


def test_a_newer_file_is_not_silently_downgraded(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"version": SETTINGS_VERSION + 1}))
    store = SettingsStore(path)
    assert store.load() == Settings() and "newer" in store.problem
    assert list(tmp_path.glob("settings.json.unreadable-*"))
