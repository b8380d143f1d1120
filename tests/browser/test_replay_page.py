"""The replay page in headless Chromium, no root: `bigraph-emu report --web`
serves a results folder written by the project's writers; the page must
draw its fabric, fill the call table, end with the demo's story and step
and play a call's samples from links.csv."""
from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from webtools import URL_LINE, Output, drawn_links, screenshot_path, stop, write_results_folder

TIMEOUT_S = 20


@pytest.fixture
def served(tmp_path):
    """`bigraph-emu report --web FOLDER` on a free port: (URL, plans, process);
    stopped in the end (SIGTERM, as Ctrl-C), killed if it does not stop."""
    folder = str(tmp_path / "results")
    plans = write_results_folder(folder)
    proc = subprocess.Popen([sys.executable, "-m", "emulator.cli", "report", "--web", folder],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        yield Output(proc.stdout).wait_for(URL_LINE, TIMEOUT_S).group(1), plans, proc
    finally:
        stop(proc, 10)


def test_replay_page_draws_the_fabric_steps_plays_and_lists_the_calls(browser, served, tmp_path):
    from selenium.webdriver.support.ui import Select, WebDriverWait
    url, plans, proc = served
    fabric = plans[0].fabric
    wait = WebDriverWait(browser, TIMEOUT_S)
    browser.get(url)

    wait.until(lambda b: len(b.find_elements("css selector", "#calls tbody tr")) == 2)
    assert len(browser.find_elements("css selector", "g.link")) == len(fabric.links) == 12
    assert len(browser.find_elements("css selector", "line.dir")) == 2 * sum(l.kind == "switch" for l in fabric.links)
    assert len(browser.find_elements("css selector", "g.node.switch")) == len(fabric.switches)
    rows = [r.text for r in browser.find_elements("css selector", "#calls tbody tr")]
    assert "naive" in rows[0] and "Mbit/s" in rows[0] and "ok" in rows[0] and "hdrm" in rows[1]
    assert "HDRM made the same allreduce" in browser.find_element("id", "story").text
    plots = [a.get_attribute("href") for a in browser.find_elements("css selector", "#plots a")]
    assert url + "results/fabric.png" in plots

    wait.until(lambda b: len(Select(b.find_element("id", "replay-call")).options) == 2)
    Select(browser.find_element("id", "replay-call")).select_by_index(1)   # the hdrm call
    info = browser.find_element("id", "replay-info")
    wait.until(lambda b: info.text.startswith("replay: sample 1/6"))
    first = drawn_links(browser)
    browser.find_element("id", "replay-step").click()
    wait.until(lambda b: info.text.startswith("replay: sample 2/6"))
    second = drawn_links(browser)
    assert set(first) == set(second) and len(first) == 8
    changed = [link for link in first if first[link] != second[link]]
    assert changed, "no link changed between two replay samples"
    assert any(first[link][1] != second[link][1] for link in changed), "no colour changed"
    browser.save_screenshot(screenshot_path(tmp_path, "replay-page.png"))

    Select(browser.find_element("id", "replay-speed")).select_by_value("4")
    browser.find_element("id", "replay-play").click()
    wait.until(lambda b: info.text.startswith("replay: sample 6/6"))
    wait.until(lambda b: b.find_element("id", "replay-play").text == "play")   # it stops at the end
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    assert os.path.getsize(screenshot_path(tmp_path, "replay-page.png")) > 10_000

    proc.send_signal(signal.SIGTERM)   # as Ctrl-C: the server stops and the command succeeds
    assert proc.wait(timeout=10) == 0


def test_the_page_boxes_each_node_of_accelerators(browser, tmp_path):
    """4 nodes of 4 accelerators (2 NICs a node on BiGraph): one dashed box
    each, drawn around its accelerators and its PCIe switches."""
    from selenium.webdriver.support.ui import WebDriverWait
    folder = str(tmp_path / "nodes")
    plans = write_results_folder(folder, mappings=("naive",), keys={"accelerators": 4, "nics": 2})
    proc = subprocess.Popen([sys.executable, "-m", "emulator.cli", "report", "--web", folder],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        browser.get(Output(proc.stdout).wait_for(URL_LINE, TIMEOUT_S).group(1))
        WebDriverWait(browser, TIMEOUT_S).until(lambda b: b.find_elements("css selector", "rect.accelerator-node"))
        boxes = browser.find_elements("css selector", "rect.accelerator-node")
        assert len(boxes) == len(plans[0].fabric.nodes()) == 4
        switches = browser.find_elements("css selector", "g.node.switch")
        assert len(switches) == len(plans[0].fabric.switches) == 4 + 4 * 3   # BiGraph's, and 2 PCIe + a root a node
    finally:
        stop(proc, 10)
