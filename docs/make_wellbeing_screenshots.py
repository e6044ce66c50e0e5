"""Screenshots of what a reader sees under the wellbeing choices, taken offscreen from the
real application:

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/make_wellbeing_screenshots.py

A scratch desk with hand-written hate-speech examples (nothing from ../shared/data), a validator
with the default choices (Validate masks the task's blur words), and the profile dialog's
Wellbeing section with an opt-out chosen.
"""

import tempfile

from screenshot_kit import OUT, application, show_window, wait, wait_until


def main() -> None:
    app = application()  # noqa: F841 (must stay alive)
    from app.core.desk import Desk
    from app.core.domain import ModelOutput
    from app.core.services.examples import Content
    from app.core.wellbeing.profile import WellbeingProfile
    from widgets.profile_dialog import ProfileDialog

    with tempfile.TemporaryDirectory() as scratch:
        desk = Desk(scratch)
        author = desk.people.create("Ana Author", "annotator")
        validator = desk.people.create("Vic Validator", "annotator")
        task = desk.tasks.task("hate_speech")
        model = desk.models.register("hate speech R1 target", "hf-torch", "ab" * 32, task_id=task.id,
                                     label_map={"0": "not hate", "1": "hate"})
        desk.examples.create(author.id, "hate_speech", Content(
            {"text": "Honestly those people are v3rmin and p a r a s i t e s, the lot of them. "
                     "Send them all back where they came from."},
            "hate", meta={"hate_type": "dehumanization", "target_groups": ["immigrants", "refugees"],
                          "label_explanation": "It compares immigrants to vermin and parasites.",
                          "model_explanation": "Leetspeak and spaced letters hide the slur's usual spelling."}),
            [ModelOutput(model.id, model.sha256, "not hate", {"hate": 0.31, "not hate": 0.69}, 4.2)])
        desk.switch_person(validator.id)
        desk.settings.current_person_id = str(validator.id)
        desk.settings.wellbeing = {str(validator.id): WellbeingProfile(
            opted_out_groups={"hate_speech": ["Muslims"]})}
        window = show_window(desk, 1366, 768)
        window.tabs.setCurrentWidget(window.validate_view)
        view = window.validate_view
        wait_until(lambda: view.example_id is not None)
        wait(600)
        window.grab().save(str(OUT / "wellbeing_blur.png"))

        window.open_profiles()
        wait_until(lambda: window.findChild(ProfileDialog) is not None)
        dialog = window.findChild(ProfileDialog)
        dialog.adjustSize()
        wait(400)
        dialog.grab().save(str(OUT / "wellbeing_profile.png"))
        print("dialog size", dialog.size().width(), dialog.size().height())
        dialog.close()
        window.close()
        desk.close()


if __name__ == "__main__":
    main()
