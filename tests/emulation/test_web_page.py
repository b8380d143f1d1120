"""The live web page during a real `bigraph-emu run --web` (as root), in
headless Chromium: the fabric drawn, links changing from sample to sample
while a call runs, the call table filling; the server gone after Ctrl-C.

BIGRAPH_SCREENSHOT_DIR=docs keeps the live page's screenshot as
docs/web-view.png (shown in docs/web-view.md)."""
from __future__ import annotations

import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from emulator import exit_codes
from emulator.fabric.topology import build
from webtools import URL_LINE, Output, drawn_links, screenshot_path, stop

pytestmark = pytest.mark.emulation

TOPOLOGY = "bigraph:m=2,n=4"
# two 8 MiB calls (a warm-up and one counted) at 50 Mbit/s: several seconds of samples each
RUN = ["run", "-t", TOPOLOGY, "-a", "halving-doubling", "-m", "naive", "-b", "8M", "-e", "8M", "-n", "1", "-w", "1",
       "--bw", "50"]
BRING_UP_S = 300   # generous: the VM stage runs under software emulation
CALL_S = 300


def _start(tmp_path) -> tuple[subprocess.Popen, Output]:
    """The run, with Ctrl-C's SIGINT handled even if pytest was started with it ignored."""
    proc = subprocess.Popen([sys.executable, "-m", "emulator.cli", *RUN, "--web", "--out", str(tmp_path / "out")],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    return proc, Output(proc.stdout)


def test_the_live_page_follows_a_run(browser, tmp_path, clean_machine):
    from selenium.webdriver.support.ui import WebDriverWait
    fabric = build(TOPOLOGY)
    proc, out = _start(tmp_path)
    try:
        url = out.wait_for(URL_LINE, 60).group(1)
        browser.get(url)
        WebDriverWait(browser, BRING_UP_S).until(
            lambda b: len(b.find_elements("css selector", "g.link")) == len(fabric.links))
        assert len(browser.find_elements("css selector", "line.dir")) == \
            2 * sum(l.kind == "switch" for l in fabric.links)

        # while a call runs: two samples apart, some link's use or colour differs
        status = browser.find_element("id", "status")
        WebDriverWait(browser, BRING_UP_S).until(lambda b: " rep " in status.text or "warm-up" in status.text)
        before, deadline, changed = drawn_links(browser), time.monotonic() + CALL_S, []
        while not changed and time.monotonic() < deadline:
            time.sleep(0.25)
            now = drawn_links(browser)
            changed = [link for link in now if now[link] != before[link] and now[link][0]]
        assert changed, "no link's use or colour changed between samples while a call ran"
        assert len(browser.find_elements("css selector", "#ranks .rank")) == len(fabric.hosts)
        browser.save_screenshot(screenshot_path(tmp_path, "web-view.png"))

        WebDriverWait(browser, CALL_S).until(lambda b: len(b.find_elements("css selector", "#calls tbody tr")) == 2)
        rows = [r.text for r in browser.find_elements("css selector", "#calls tbody tr")]
        assert "warm-up" in rows[0] and "Mbit/s" in rows[1], rows
        out.wait_for(r"the run has finished", CALL_S)
        WebDriverWait(browser, 30).until(lambda b: b.find_element("id", "end").is_displayed())
        assert "fabric.png" in browser.find_element("id", "plots").text
        proc.send_signal(signal.SIGINT)   # Ctrl-C: the page stops, the run's exit code stands
        assert proc.wait(timeout=60) in exit_codes.FINISHED, "".join(out.lines)
    finally:
        stop(proc, 120)


def test_ctrl_c_during_a_run_stops_the_page_with_everything_else(tmp_path, clean_machine):
    proc, out = _start(tmp_path)
    try:
        url = out.wait_for(URL_LINE, 60).group(1)
        out.wait_for(r"^\[1/2\]|# dataplane", BRING_UP_S)   # the fabric is coming up or up
        with urllib.request.urlopen(url, timeout=10) as page:
            assert page.status == 200
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=120) == 130, "".join(out.lines)   # torn down, page and all
    finally:
        stop(proc, 120)


# a program of its own: every rank but 0 sends 8 MB to rank 0 over TCP (a few seconds at 50 Mbit/s)
SENDERS = r"""
import os, socket, time
rank, world, port = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ["MASTER_PORT"])
if rank == 0:
    server = socket.create_server(("", port), backlog=world)
    peers = [server.accept()[0] for _ in range(world - 1)]
    for peer in peers:
        while peer.recv(1 << 16):
            pass
else:
    for _ in range(100):
        try:
            peer = socket.create_connection((os.environ["MASTER_ADDR"], port))
            break
        except OSError:
            time.sleep(0.1)
    peer.sendall(bytes(8 << 20))
    peer.close()
"""


def test_the_live_page_follows_a_program_under_exec(browser, tmp_path, clean_machine):
    """exec --web: the links, each rank's state (running, then exited 0), the program's line."""
    from selenium.webdriver.support.ui import WebDriverWait
    fabric = build(TOPOLOGY)
    proc = subprocess.Popen([sys.executable, "-m", "emulator.cli", "exec", "-t", TOPOLOGY, "--bw", "50", "--ranks", "4",
                             "--web", "--out", str(tmp_path / "out"), "--", sys.executable, "-c", SENDERS],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    out = Output(proc.stdout)
    try:
        browser.get(out.wait_for(URL_LINE, 60).group(1))
        WebDriverWait(browser, BRING_UP_S).until(
            lambda b: len(b.find_elements("css selector", "g.link")) == len(fabric.links))
        # in one script: the page replaces the rank rows at every sample (elements found earlier go stale)
        ranks = lambda b: b.execute_script(   # noqa: E731
            "return [...document.querySelectorAll('#ranks .rank')].map((r) => r.textContent)")
        WebDriverWait(browser, BRING_UP_S).until(lambda b: any("running" in r for r in ranks(b)))
        before, deadline, changed = drawn_links(browser), time.monotonic() + CALL_S, []
        while not changed and time.monotonic() < deadline:
            time.sleep(0.25)
            now = drawn_links(browser)
            changed = [link for link in now if now[link] != before[link] and now[link][0]]
        assert changed, "no link's use changed between samples while the program ran"
        WebDriverWait(browser, CALL_S).until(lambda b: len(b.find_elements("css selector", "#calls tbody tr")) == 1)
        assert all("exited 0" in r for r in ranks(browser)) and len(ranks(browser)) == 4, ranks(browser)
        assert "program" in browser.find_element("css selector", "#calls tbody tr").text
        out.wait_for(r"the program has finished", CALL_S)
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) in (0, 3), "".join(out.lines)   # 3: finished, its verdict failed
    finally:
        stop(proc, 120)
