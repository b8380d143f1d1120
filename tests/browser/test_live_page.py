"""The live page in headless Chromium, no root: the pipeline runs with
FakeEmulation (synthetic counters every 100 ms) in place of the network,
feeding a real server; the page must draw the fabric, change links from
sample to sample while a call runs, show the ranks and fill the call table.
tests/emulation/test_web_page.py does the same during a real run."""
from __future__ import annotations

import threading

from emulator import preflight
from emulator import pipeline
from emulator.plan.run_plan import plan_run
from emulator.spec.experiment import Experiment, make_run
from emulator.web.server import WebView
from webtools import FakeEmulation, drawn_links, screenshot_path

TIMEOUT_S = 30


def test_live_page_follows_the_samples_and_calls_of_a_run(browser, tmp_path, monkeypatch):
    import emulator.emulation
    from selenium.webdriver.support.ui import WebDriverWait
    monkeypatch.setattr(emulator.emulation, "Emulation",
                        lambda plan, run_dir: FakeEmulation(plan, run_dir, interval_s=0.1, samples=25))
    monkeypatch.setattr(preflight, "capacity_checks", lambda plans: [])
    plan = plan_run(make_run({"topology": "bigraph:m=2,n=4", "collective": "allreduce",
                              "algorithm": "halving-doubling", "mapping": "naive", "sizes": "2M",
                              "repetitions": 1, "warmup": 1}))
    codes, wait = [], WebDriverWait(browser, TIMEOUT_S)
    with WebView() as page:
        run = threading.Thread(target=lambda: codes.append(
            pipeline._emulate(Experiment("t", [plan.spec]), [plan], str(tmp_path / "out"), page)))
        run.start()
        try:
            browser.get(page.url)
            wait.until(lambda b: len(b.find_elements("css selector", "g.link")) == len(plan.fabric.links))
            status = browser.find_element("id", "status")
            wait.until(lambda b: "warm-up" in status.text)
            before = drawn_links(browser)
            wait.until(lambda b: any(v != before[k] for k, v in drawn_links(b).items()))
            assert len(browser.find_elements("css selector", "#ranks .rank")) == plan.ranks
            assert browser.find_elements("css selector", "#busiest tr")
            browser.save_screenshot(screenshot_path(tmp_path, "live-page.png"))
            wait.until(lambda b: len(b.find_elements("css selector", "#calls tbody tr")) == 2)
            rows = [r.text for r in browser.find_elements("css selector", "#calls tbody tr")]
            assert "warm-up" in rows[0] and "ok" in rows[1], rows
        finally:
            run.join(timeout=TIMEOUT_S)
    assert codes == [0]
