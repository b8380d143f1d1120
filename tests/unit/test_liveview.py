"""Unit tests of the live terminal view (emulator/liveview.py)."""
from __future__ import annotations

from emulator.results import liveview


def row(link, util, backlog=0, drops=0, kind="switch"):
    return {"link": link, "util": util, "backlog_bytes": backlog, "drops": drops, "kind": kind}


def test_bar_fills_with_the_share_of_the_rate():
    assert liveview.bar(0.5, 10) == "#####....."
    assert liveview.bar(0.0, 4) == "...."
    assert liveview.bar(1.7, 4) == "####"


def test_render_shows_the_busiest_switch_links_first_and_the_step_progress():
    rows = [row("bgs0:5>bgs4", 0.25), row("bgs1:5>bgs4", 1.0, backlog=90_000, drops=3),
            row("bgh0:0>bgs0", 1.0, kind="host")] + [row(f"bgs2:{p}>bgs7", 0.1) for p in range(10)]
    text = liveview.render("hdrm 8M", rows, steps_done=[2, 4, 3, 3], steps_total=10, elapsed_s=3.25)
    lines = text.splitlines()
    assert lines[0] == "hdrm 8M  t=  3.2s"
    assert "bgs1:5>bgs4" in lines[1] and "100%" in lines[1] and "queue   90 kB" in lines[1] and "drops 3" in lines[1]
    assert "bgs0:5>bgs4" in lines[2] and " 25%" in lines[2]
    assert not any("bgh0" in l for l in lines)                     # host links are not shown
    assert len(lines) == 1 + liveview.SHOWN_LINKS + 1
    assert lines[-1].endswith("30%  slowest rank at 2/10, fastest at 4/10")
