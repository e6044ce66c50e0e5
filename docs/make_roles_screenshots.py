"""Screenshots of who sees what on a team desk, at 1366×768.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/make_roles_screenshots.py

A scratch data folder with the ANLI round-1 development set shared among simulated writers and
validated by simulated peers (tests/simulation.py). Writes dashboard-annotator.png (one writer's
Dashboard: their own row and the team's totals, their figures over time) and profile-team-desk.png (the profile dialog on a desk that syncs with a team
server: the token's holder only, no Switch, no new profile). No server is contacted: the desk only has
one configured, with a token.
"""

import tempfile

from screenshot_kit import OUT, ROOT, application, show_window, snap, wait, wait_until


def main() -> None:
    app = application()  # noqa: F841 (must stay alive)
    from sync.tokens import TokenStore
    from widgets.profile_dialog import ProfileDialog

    with tempfile.TemporaryDirectory() as scratch:
        from app.core.desk import Desk
        from tests.simulation import import_anli_team, simulate_validators

        desk = Desk(scratch)
        team = import_anli_team(desk, ROOT.parent / "shared" / "data" / "anli" / "ANLI_analysis_r1_dev.csv")
        simulate_validators(desk, team, share=0.8)
        desk.switch_person(next(iter(team.writers.values())))
        desk.settings.server_url = "https://dynadesk.team.example"
        desk.settings.sync_interval_s = 3600  # no sync during the pictures
        desk.save_settings()
        TokenStore(desk.root).set(desk.settings.server_url, "ddk_screenshot-token")
        window = show_window(desk, 1366, 768)
        window.task_combo.setCurrentIndex(window.task_combo.findData("nli"))
        window.tabs.setCurrentWidget(window.dashboard_view)
        view = window.dashboard_view
        wait_until(lambda: view.annotator_model.rowCount() == 2)
        snap(window, "dashboard-annotator.png", settle_ms=1500)

        window.open_profiles()
        wait_until(lambda: any(d.isVisible() for d in window.findChildren(ProfileDialog)))
        dialog = next(d for d in window.findChildren(ProfileDialog) if d.isVisible())
        wait(500)
        dialog.grab().save(str(OUT / "profile-team-desk.png"))
        dialog.close()
        window.sync.stop()
        window.close()
        desk.close()


if __name__ == "__main__":
    main()
