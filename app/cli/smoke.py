"""``dynadesk smoke-test``: a hidden command that drives the real main window once, end to end.

Used by ``make package-check`` on the installed bundle: the window appears, the default model is
prepared and answers a typed text, an example is submitted and stored, a screenshot is written.
Prints a JSON summary; exits non-zero with a message when a step does not happen in time.
"""

from __future__ import annotations

import json

import click

from app.cli.base import pass_context


@click.command("smoke-test", hidden=True)
@click.option("--screenshot", type=click.Path(dir_okay=False), required=True, help="Where to save a PNG of the window.")
@click.option("--timeout", type=float, default=300.0, show_default=True, help="Seconds allowed for the whole run.")
@click.option("--text", default="Have a lovely weekend, everyone!", show_default=True, help="The text to type.")
@pass_context
def smoke_test(obj, screenshot: str, timeout: float, text: str) -> None:
    """Start the window on the data folder, predict, submit, screenshot (for package checks)."""
    from app.gui.smoke import SmokeTestFailed, run_smoke_test

    try:
        summary = run_smoke_test(obj.data_dir, screenshot, timeout=timeout, text=text)
    except SmokeTestFailed as exc:
        click.echo(f"Smoke test failed: {exc}", err=True)
        raise SystemExit(3) from exc
    click.echo(json.dumps(summary, indent=2))
