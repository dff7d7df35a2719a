"""The Dagster UI as a user sees it: `dora ui` (the README command) in a real headless Chromium.

Starts ``dora ui`` (``dagster dev``) on 127.0.0.1 with a free port on a copy of the session's
finished audit (``finished_audit``: one ad-hoc audit of every family, run through the code
path of ``dora audit``; the webserver writes into its home, so a copy), and drives Debian's
Chromium with Playwright (``executable_path=/usr/bin/chromium``; Playwright's own browser
download is never used), in one webserver start: the global asset lineage shows the groups
of the four families and the shared ``audits`` group, expanded it shows the T2T completions
asset and ``fct_associations``; a dbt check of ``fct_associations`` shows its rule's name
(``fisher_q_ge_fisher_p``) and description; the T2T asset's page shows its description; the audit's run
page shows its ``dora/*`` tags (audit id, family, model, model version, target, trigger); the
Partitions tab of ``landing/t2t_completions`` lists the audit's ``adhoc:<model>@<version>``
partition. Screenshots are saved under tmp_path. Skipped only when Chromium is not installed
(``apt-get install -y chromium``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from orchestration.families import FAMILIES
from tests.helpers.cluster import HANG_GUARD
from tests.helpers.dora_cli import free_port

CHROMIUM = shutil.which("chromium") or ("/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None)
REPO = Path(__file__).resolve().parent.parent
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (Debian: apt-get install -y chromium)"),
]


def wait_for_server(url: str, proc: subprocess.Popen, log: Path, timeout: float = HANG_GUARD) -> None:
    """Until `dora ui` answers 200 at ``url``; raises as soon as it exits (``timeout``: a guard against a hang only)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"`dora ui` exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=5) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(1)
    raise AssertionError(f"the Dagster UI did not answer on {url} within {timeout}s:\n{log.read_text()[-3000:]}")


@pytest.fixture
def dagster_ui(tmp_path, finished_audit):
    """`dora ui --port <free>` on a copy of the finished audit's home, in its own process group;
    stopped (SIGINT, then SIGKILL) after."""
    from tests.helpers.homes import copy_home

    port = free_port()
    home = copy_home(finished_audit, tmp_path / "dora_home")
    env = {
        **os.environ,
        "DORA_HOME": str(home),
        "DAGSTER_HOME": str(home / "dagster"),
        "HF_HUB_OFFLINE": "1",
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
    }
    log = tmp_path / "dora_ui.log"
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "orchestration.cli", "ui", "--host", "127.0.0.1", "--port", str(port)],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for_server(f"http://127.0.0.1:{port}/server_info", proc, log)
        yield f"http://127.0.0.1:{port}"
    finally:
        for sig, wait in ((signal.SIGINT, 30), (signal.SIGKILL, 10)):
            if proc.poll() is not None:
                break
            os.killpg(proc.pid, sig)  # the group started above: dagster dev, webserver, daemon, code server
            try:
                proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # leftovers of our own group, if any
        except ProcessLookupError:
            pass


@pytest.mark.scenario
def test_ui_shows_family_groups_lineage_run_tags_and_partitions(dagster_ui, finished_audit, tmp_path):
    from playwright.sync_api import TimeoutError as PlaywrightTimeoutError
    from playwright.sync_api import expect, sync_playwright

    tags = finished_audit.run_tags
    assert finished_audit.partition and finished_audit.partition.startswith("adhoc:smollm2-135m@")
    assert {"dora/audit_id", "dora/family", "dora/model", "dora/model_version", "dora/target", "dora/trigger"} <= set(tags)
    shot = tmp_path / "asset_graph.png"
    with sync_playwright() as pw:
        browser = pw.chromium.launch_persistent_context(
            str(tmp_path / "chromium-profile"),  # a fresh --user-data-dir
            executable_path=CHROMIUM,
            headless=True,
            args=FLAGS,
            viewport={"width": 1600, "height": 1000},
        )
        try:
            page = browser.new_page()
            # Dagster's "Join the Dagster community" pop-up opens a second after some page loads
            # on 127.0.0.1 (not always the first), and its backdrop takes every click until it
            # is skipped: Playwright skips it whenever it shows, before the next action or check
            skip = page.get_by_role("button", name="Skip", exact=True)
            page.add_locator_handler(skip, lambda: skip.click())
            # Pages are awaited until "load", then each check waits for what it reads: Dagster's
            # UI polls its server, so "networkidle" (no request for 500 ms) may never come (a
            # first page timed out after 120 s on a loaded CI run)
            page.goto(f"{dagster_ui}/asset-groups", wait_until="load", timeout=120_000)
            expect(page.get_by_text("Global asset lineage")).to_be_visible(timeout=60_000)
            # the graph starts with groups collapsed: one box per family and the shared group
            for group in (*(g for f in FAMILIES for g in f.groups), "audits"):
                expect(page.get_by_text(group, exact=True).first).to_be_visible(timeout=60_000)
            page.screenshot(path=str(tmp_path / "groups.png"))
            # right-click the canvas -> Expand all groups
            expand = page.get_by_role("menuitem", name="Expand all groups")
            expanded = False
            for x, y in ((1000, 300), (1500, 900), (300, 900), (1500, 150)):
                # a right-click on empty canvas (not on a group box) opens the graph menu
                page.mouse.click(x, y, button="right")
                try:
                    expand.click(timeout=5_000)
                    expanded = True
                    break
                except PlaywrightTimeoutError:
                    page.keyboard.press("Escape")
            assert expanded, "no right-click on the asset graph offered 'Expand all groups'"
            # Expanded, the global graph is zoomed out past its labels (a wait for them timed out
            # on every run): the upstream lineage graph of the mart shows the same chain legibly
            page.goto(
                f"{dagster_ui}/assets/fct_associations?view=lineage&lineageScope=upstream&lineageDepth=10",
                wait_until="load",
                timeout=120_000,
            )
            t2t = page.get_by_text("t2t_completions", exact=True).first
            fct = page.get_by_text("fct_associations", exact=True).first
            expect(t2t).to_be_visible(timeout=60_000)
            expect(fct).to_be_visible(timeout=60_000)
            page.screenshot(path=str(shot))
            # a dbt check is named after its rule and says it (orchestration/defs/dbt/checks.py)
            page.goto(f"{dagster_ui}/assets/fct_associations?view=checks&checkDetail=fisher_q_ge_fisher_p", wait_until="load", timeout=120_000)
            body = page.locator("body")
            expect(page.get_by_text("This is a blocking asset check.")).to_be_visible(timeout=60_000)
            expect(page.get_by_text("unique_key", exact=True).first).to_be_visible(timeout=60_000)
            # the description and the latest result load after the check's header
            expect(body).to_contain_text("Every row of fct_associations satisfies fisher_q >= fisher_p", timeout=60_000)
            expect(body).to_contain_text("Passed", timeout=60_000)
            shown = " ".join(page.inner_text("body").split())
            assert "fisher_q_ge_fisher_p" in shown and "model_rules_" not in shown  # no dbt node name anywhere
            page.screenshot(path=str(tmp_path / "dbt_check.png"))
            # the T2T asset's page shows its description
            page.goto(f"{dagster_ui}/assets/landing/t2t_completions", wait_until="load", timeout=120_000)
            expect(page.get_by_text("T2T word completions", exact=False).first).to_be_visible(timeout=60_000)
            # the audit's run: its dora tags, behind "View tags and config"
            page.goto(f"{dagster_ui}/runs/{finished_audit.run_id}", wait_until="load", timeout=120_000)
            page.get_by_role("button", name="View tags and config").click(timeout=60_000)
            dialog = page.get_by_role("dialog")
            expect(dialog.get_by_text("dora/trigger: cli")).to_be_visible(timeout=60_000)
            shown = dialog.inner_text()
            for key in ("dora/audit_id", "dora/family", "dora/model", "dora/model_version", "dora/target", "dora/trigger"):
                assert f"{key}: {tags[key]}" in shown, key
            assert f"dora/family: {','.join(f.name for f in FAMILIES)}" in shown
            assert "dora/model: smollm2-135m" in shown and "dora/target: (ad hoc)" in shown
            assert "t2t-smollm2-135m-instruct-" in tags["dora/audit_id"]
            page.screenshot(path=str(tmp_path / "run_tags.png"))
            page.keyboard.press("Escape")
            # the Partitions tab of the partitioned probe lists the audit's partition, materialised
            page.goto(f"{dagster_ui}/assets/landing/t2t_completions?view=partitions", wait_until="load", timeout=120_000)
            expect(page.get_by_text("Materialized (1)")).to_be_visible(timeout=60_000)
            expect(page.get_by_text(finished_audit.partition, exact=True).first).to_be_attached(timeout=60_000)
            page.screenshot(path=str(tmp_path / "partitions.png"))
        finally:
            browser.close()
    assert shot.stat().st_size > 10_000
    print(f"screenshots in {tmp_path}")
