"""Screenshots of what a lead needs in Review and what its author then sees, at 1366×768.

    QT_QPA_PLATFORM=offscreen .venv/bin/python docs/make_review_screenshots.py

A scratch data folder with the ANLI round-1 development set (read from ../shared/data), validated
by four simulated people (tests/validation_sim.py). Writes review-objections.png (the Review tab
filtered to examples a validator said were incorrect or flagged, with the Objected column and the
lead's agreement threshold) and returned-work.png (the author's Create tab and status bar after a
lead returned two of their examples), and dashboard-threshold-warning.png (a team of two, whose
task needs three matching verdicts).
"""

import tempfile

from screenshot_kit import anli_desk, application, show_window, snap, wait, wait_until


def main() -> None:
    app = application()  # noqa: F841 (must stay alive)
    from app.core.desk import Desk

    with tempfile.TemporaryDirectory() as scratch:
        desk, sim = anli_desk(scratch)
        window = show_window(desk, 1366, 768)
        window._profile_chosen(str(sim.lead.id))  # as the profile dialog does
        window.task_combo.setCurrentIndex(window.task_combo.findData("nli"))
        window.tabs.setCurrentWidget(window.review_view)
        review = window.review_view
        wait_until(lambda: review.model.rowCount() > 0)
        review.filters.objected.setCurrentIndex(review.filters.objected.findData(True))
        review.filters.validation.setCurrentIndex(review.filters.validation.findData("in_progress"))
        wait(1200)
        review.table.selectRow(1)
        review.table.setFocus()
        snap(window, "review-objections.png", ready=lambda: window.review_page.detail is not None)

        # the lead returns two examples of one author; that author opens the app
        first = review.model.row_data(0)
        author_id = desk.examples.get(first.id).author_id
        from app.core.services.review import ExampleFilter

        theirs = [r.id for r in desk.review.rows(ExampleFilter(author_ids=[author_id]), limit=2)]
        desk.lead.return_examples(sim.lead.id, theirs, "Say which words of the context support the label.")
        window._profile_chosen(str(author_id))
        window.tabs.setCurrentWidget(window.workspace_view)
        snap(window, "returned-work.png", ready=lambda: window.workspace_view.returned.isVisible(), settle_ms=1500)
        window.close()
        desk.close()

    # a team of two on hate speech: the dashboard says the task's 3 matching verdicts are out of reach
    with tempfile.TemporaryDirectory() as scratch:
        desk = Desk(scratch)
        desk.people.create("Sam Writer", "annotator")
        desk.switch_person(desk.people.create("Lena Lead", "lead").id)
        window = show_window(desk, 1366, 768)
        window.task_combo.setCurrentIndex(window.task_combo.findData("hate_speech"))
        window.tabs.setCurrentWidget(window.dashboard_view)
        snap(window, "dashboard-threshold-warning.png", ready=lambda: window.dashboard_view.threshold_warning.isVisible(),
             settle_ms=800)
        window.close()
        desk.close()
    print("wrote review-objections.png, returned-work.png, dashboard-threshold-warning.png")


if __name__ == "__main__":
    main()
