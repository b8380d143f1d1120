"""Bad input (issue 6): wrong experiments driven through the real command
line, `bigraph-emu run ...`. Each must exit with code 2, name the field on
stderr, and leave the machine as it was: no results folder, no new network
interfaces named bgs*/bgh*, the run lock not taken.

No root needed. As root, nothing is built either: validation comes first,
and as a second guard the network part of every command refuses here.
"""
from __future__ import annotations

import os
import signal
import subprocess

import pytest

from controller.routing import POLICIES
from emulator import cli, pipeline
from emulator.net import capabilities
from emulator.net.processes import LOCK_FILE, STATE_DIR

GOOD_TOML = '[defaults]\ntopology = "bigraph:m=2,n=4"\n'

# (case, argv after `run`, words stderr must hold: the field first)
# {dir} is a fresh folder, {old} one holding earlier results.
CASES = [
    ("topology kind unknown", ["-t", "torus:k=4"], ["topology", "torus", "bigraph, fattree, leafspine"]),
    ("bigraph odd n", ["-t", "bigraph:m=2,n=3"], ["topology", "n=3", "even"]),
    ("bigraph n=0", ["-t", "bigraph:m=2,n=0"], ["topology", "n=0"]),
    ("bigraph m=0", ["-t", "bigraph:m=0,n=4"], ["topology", "m=0"]),
    ("bigraph parameter not a number", ["-t", "bigraph:m=two"], ["topology", "two"]),
    ("fattree odd k", ["-t", "fattree:k=3"], ["topology", "k=3"]),
    ("leafspine zero hosts", ["-t", "leafspine:leaves=4,spines=2,hosts=0"], ["topology", "hosts=0"]),
    ("too big for one machine", ["-t", "bigraph:m=32,n=64"], ["topology", "at most", "bigraph-emu model"]),
    ("policy unknown", ["-p", "nosuch"], ["policy", "nosuch", *POLICIES]),
    ("bigraph policy on a fat-tree", ["-p", "bigraph", "-t", "fattree:k=4"], ["policy", "bigraph"]),
    ("mapping unknown", ["-m", "nosuch"], ["mapping", "nosuch", "naive, round-robin, random, hdrm"]),
    ("algorithm unknown", ["-a", "nosuch"], ["algorithm", "nosuch", "ring, halving-doubling"]),
    ("collective unknown", ["-c", "nosuch"], ["collective", "nosuch", "allreduce"]),
    ("datapath unknown", ["--datapath", "fast"], ["datapath", "auto, kernel, user"]),
    ("offload unknown", ["--offload", "gso"], ["offload", "gso", "off, tso"]),
    ("hdrm on 12 ranks", ["-t", "bigraph:m=3,n=4", "-m", "hdrm"], ["mapping", "power-of-two", "12"]),
    ("hdrm on a fat-tree", ["-t", "fattree:k=4", "-m", "hdrm"], ["mapping", "hdrm"]),
    ("halving-doubling reduce-scatter on 12 ranks",
     ["-t", "bigraph:m=3,n=4", "-c", "reduce-scatter", "-a", "halving-doubling"], ["algorithm", "power-of-two"]),
    ("ranks more than hosts", ["--ranks", "9"], ["ranks", "2 to 8"]),
    ("ranks not an integer", ["--ranks", "1.5"], ["ranks", "1.5"]),
    ("size negative", ["--minbytes=-1M"], ["sizes", "-1M"]),
    ("size zero", ["-b", "0"], ["sizes"]),
    ("size over the limit", ["-b", "8G"], ["sizes", "limit"]),
    ("size not a size", ["-b", "1X"], ["sizes", "1X"]),
    ("sweep backwards", ["-b", "8M", "-e", "1M"], ["sizes"]),
    ("sweep factor 1", ["-b", "1M", "-e", "8M", "-f", "1"], ["sizes", "factor"]),
    ("step factor alone", ["-f", "4"], ["sizes", "-f"]),
    ("host rate 0", ["--host-rate", "0"], ["host_rate_mbps", "between 1 and 100000"]),
    ("switch rate above the maximum", ["--switch-rate", "200000"], ["switch_rate_mbps", "100000"]),
    ("rate not a number", ["--bw", "fast"], ["host_rate_mbps", "fast"]),
    ("queue 0", ["--host-queue", "0"], ["host_queue_packets"]),
    ("queue above the maximum", ["--queue", "1000000"], ["host_queue_packets"]),
    ("mtu too small", ["--mtu", "100"], ["mtu", "576", "9000"]),
    ("mtu too large", ["--mtu", "9500"], ["mtu", "576", "9000"]),
    ("delay without netem", ["--delay", "5"], ["link_delay_ms", "netem", "sch_netem"]),
    ("loss without netem", ["--loss", "1"], ["link_loss_pct", "netem"]),
    ("loss 150 percent", ["--loss", "150"], ["link_loss_pct", "between 0 and 100"]),
    ("delay negative", ["--delay=-1"], ["link_delay_ms"]),
    ("connections 0", ["--connections", "0"], ["connections", "between 1 and 16"]),
    ("monitor interval 1 ms", ["--monitor-interval", "1"], ["monitor_interval_ms", "between 10 and 1000"]),
    ("link event on no link", ["--link-event", "1:bgs0-bgs1:down"], ["link_events", "bgs0-bgs1", "bgs0-bgs2"]),
    ("link event unknown switch", ["--link-event", "1:bgs0-bgs42:down"], ["link_events", "bgs42"]),
    ("link event action", ["--link-event", "1:bgs0-bgs2:sideways"], ["link_events", "down, up"]),
    ("link event before the start", ["--link-event=-1:bgs0-bgs2:down"], ["link_events", ">= 0"]),
    ("link event form", ["--link-event", "bgs0-bgs2"], ["link_events", "TIME:SWITCH-SWITCH"]),
    ("link up that is not down", ["--link-event", "1:bgs0-bgs2:up"], ["link_events", "not down"]),
    ("repetitions 0", ["-n", "0"], ["repetitions"]),
    ("warmup negative", ["--warmup=-1"], ["warmup"]),
    ("unknown key in TOML", ["--experiment", "{dir}/unknown.toml"], ["bogus_key", "unknown key", "run 1"]),
    ("unknown top-level TOML key", ["--experiment", "{dir}/toplevel.toml"], ["topology", "[defaults]"]),
    ("malformed TOML", ["--experiment", "{dir}/broken.toml"], ["broken.toml", "not valid TOML"]),
    ("TOML value of the wrong type", ["--experiment", "{dir}/wrongtype.toml"], ["repetitions", "run 2"]),
    ("missing TOML file", ["--experiment", "{dir}/missing.toml"], ["missing.toml", "cannot read"]),
    ("output folder with earlier results", ["--out", "{old}"], ["--out", "not empty"]),
    ("output folder is a file", ["--out", "{dir}/unknown.toml"], ["--out", "not a folder"]),
]

TOML_FILES = {
    "unknown.toml": GOOD_TOML + "bogus_key = 1\n",
    "toplevel.toml": 'topology = "bigraph:m=2,n=4"\n',
    "broken.toml": 'name = "unterminated\n[[runs]\n',
    "wrongtype.toml": GOOD_TOML + "[[runs]]\nrepetitions = 2\n[[runs]]\nrepetitions = \"many\"\n",
}


# --- what "the machine as it was" means ------------------------------------------------------

def our_links() -> set[str]:
    """Interfaces named like the project's (bgs*/bgh*); `ip` needs no root."""
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    names = {line.split(":")[1].strip().split("@")[0] for line in out.splitlines() if ":" in line}
    return {n for n in names if n.startswith(("bgs", "bgh"))}


def lock_holders() -> set[int]:
    """Processes holding the run lock, read from /proc/locks (never by taking it:
    that could make a real run elsewhere on this machine fail)."""
    try:
        inode = os.stat(LOCK_FILE).st_ino
        with open("/proc/locks") as f:
            lines = f.read().splitlines()
    except OSError:
        return set()
    holders = set()
    for line in lines:
        fields = line.split()
        if "->" not in fields and len(fields) > 5 and fields[1] == "FLOCK" \
                and int(fields[5].rsplit(":", 1)[1]) == inode:
            holders.add(int(fields[4]))
    return holders


def lock_open_here() -> bool:
    fd_dir = "/proc/self/fd"
    for fd in os.listdir(fd_dir):
        try:
            if os.readlink(os.path.join(fd_dir, fd)) == LOCK_FILE:
                return True
        except OSError:
            pass
    return False


def machine_state() -> dict:
    return {"links": our_links(), "others_emulating": bool(lock_holders() - {os.getpid()}),
            "state_dir": os.path.isdir(STATE_DIR)}


# --- fixtures ----------------------------------------------------------------------------------

@pytest.fixture(autouse=True)
def guarded(monkeypatch):
    """Nothing can be built even if a case were accepted; netem is missing;
    pytest gets its SIGTERM handler back."""
    def refuse(*_a, **_k):
        raise AssertionError("bad input reached the network")
    for name in ("emulate", "interactive"):
        monkeypatch.setattr(pipeline, name, refuse)
    monkeypatch.setattr(cli, "cmd_clean", refuse)
    monkeypatch.setattr(capabilities, "netem_available", lambda: False)
    old = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    yield
    for s, handler in old.items():
        signal.signal(s, handler)


@pytest.fixture
def folders(tmp_path):
    for name, text in TOML_FILES.items():
        (tmp_path / name).write_text(text)
    old = tmp_path / "old"
    old.mkdir()
    (old / "collectives.csv").write_text("topology,time_s\nbigraph:m=2,n=4,0.5\n")
    return {"dir": str(tmp_path), "old": str(old), "out": str(tmp_path / "out")}


def expand(argv: list[str], folders: dict) -> list[str]:
    return [a.format(**folders) for a in argv]


def assert_refused(capsys, argv: list[str], words: list[str], folders: dict) -> None:
    """exit 2, the field named, nothing created."""
    before = machine_state()
    old_listing = sorted(os.listdir(folders["old"]))
    if "--out" not in argv:
        argv = [*argv, "--out", folders["out"]]
    rc = cli.main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith("bigraph-emu: error: ") and "Traceback" not in err
    for word in words:
        assert word in err, f"{word!r} not in {err!r}"
    after = machine_state()
    assert not os.path.exists(folders["out"]), "a results folder was created"
    assert sorted(os.listdir(folders["old"])) == old_listing, "earlier results were touched"
    assert not lock_open_here() and os.getpid() not in lock_holders(), "the run lock was taken"
    assert after["state_dir"] or not before["state_dir"], "the state folder was removed"
    if not before["state_dir"]:
        assert not after["state_dir"], f"{STATE_DIR} was created"
    if not (before["others_emulating"] or after["others_emulating"]):   # a real run elsewhere changes them
        assert after["links"] == before["links"], "network interfaces changed"


# --- the table ---------------------------------------------------------------------------------

def test_table_is_large_enough():
    assert len(CASES) >= 24
    assert len({case for case, _, _ in CASES}) == len(CASES)


@pytest.mark.parametrize("case, argv, words", CASES, ids=[c[0] for c in CASES])
def test_run_refuses_bad_input(capsys, folders, case, argv, words):
    assert_refused(capsys, ["run", *expand(argv, folders)], words, folders)


@pytest.mark.parametrize("case, argv, words", CASES[::4], ids=[c[0] for c in CASES[::4]])
def test_bad_input_refused_before_needs_root(capsys, monkeypatch, folders, case, argv, words):
    """A non-root user learns what is wrong with the input, not only that root is needed."""
    monkeypatch.setattr(cli.os, "geteuid", lambda: 1000)
    assert_refused(capsys, ["run", *expand(argv, folders)], words, folders)
    assert "needs root" not in capsys.readouterr().err


@pytest.mark.parametrize("argv, words", [
    (["compare", "--vary", "policy=shortest,nosuch"], ["policy", "nosuch"]),
    (["compare", "--vary", "nosuch=1,2"], ["--vary", "nosuch"]),
    (["compare", "--vary", "mapping=naive,hdrm", "-t", "fattree:k=4"], ["mapping", "hdrm"]),
    (["compare", "--vary", "policy=shortest,ecmp", "--out", "{old}"], ["--out", "not empty"]),
    (["cli", "-t", "bigraph:m=2,n=5"], ["topology", "n=5"]),
    (["cli", "--delay", "3"], ["link_delay_ms", "netem"]),
    (["cli", "--out", "{old}"], ["--out", "not empty"]),
    (["demo", "--out", "{old}"], ["--out", "not empty"]),
], ids=["compare policy", "compare key", "compare mapping", "compare out", "cli topology", "cli delay",
        "cli out", "demo out"])
def test_other_network_commands_refuse_bad_input(capsys, folders, argv, words):
    assert_refused(capsys, expand(argv, folders), words, folders)


@pytest.mark.parametrize("argv, words", [
    (["--mtu", "100"], ["--mtu", "576 and 9000"]),
    (["--mtu", "1500,jumbo"], ["--mtu", "integers"]),
    (["--offload", "off,gso"], ["--offload", "off,tso"]),
    (["--steps", "0"], ["--steps", "1 to 10"]),
])
def test_calibrate_refuses_bad_input(capsys, monkeypatch, tmp_path, argv, words):
    """Checked before root and before anything is measured or written."""
    monkeypatch.setattr(cli.os, "geteuid", lambda: 1000)
    target = tmp_path / "calibration.json"
    assert cli.main(["calibrate", *argv, "--file", str(target)]) == 2
    err = capsys.readouterr().err
    assert all(w in err for w in words) and "needs root" not in err, err
    assert not target.exists()


def test_tso_without_open_vswitchs_userspace_tso_is_refused_before_anything(capsys, monkeypatch, folders):
    from emulator.net import dataplane
    monkeypatch.setattr(dataplane, "_module_loaded", lambda name: False)
    monkeypatch.setattr(dataplane, "_try_modprobe", lambda name: False)
    monkeypatch.setattr(dataplane, "userspace_tso_enabled", lambda: False)
    assert_refused(capsys, ["run", "--offload", "tso"], ["tso", "vm/provision.sh --userspace-tso on"], folders)


def test_valid_input_as_non_root_stops_at_needs_root(capsys, monkeypatch, folders):
    """Valid input from a non-root user: the needs-root message, and still nothing created."""
    monkeypatch.setattr(cli.os, "geteuid", lambda: 1000)
    assert_refused(capsys, ["run", "-t", "bigraph:m=1,n=2"], ["needs root"], folders)


def test_netem_present_accepts_delay(monkeypatch, folders):
    """The same delay passes validation where netem exists (it then reaches the network part)."""
    monkeypatch.setattr(capabilities, "netem_available", lambda: True)
    reached = []
    monkeypatch.setattr(pipeline, "emulate", lambda experiment, plans, out: reached.append(plans[0].spec) or 0)
    monkeypatch.setattr(cli.os, "geteuid", lambda: 0)
    assert cli.main(["run", "--delay", "5", "--loss", "1", "--out", folders["out"]]) == 0
    assert (reached[0].link_delay_ms, reached[0].link_loss_pct) == (5.0, 1.0)
    assert not os.path.exists(folders["out"])          # emulate (replaced here) creates it, not validation


def test_default_results_folder_not_created(capsys, monkeypatch, tmp_path):
    """Without --out the run would write results/<time>-run/: not even results/ appears."""
    monkeypatch.chdir(tmp_path)
    assert cli.main(["run", "-t", "bigraph:m=2,n=3"]) == 2
    assert "topology" in capsys.readouterr().err
    assert os.listdir(tmp_path) == []
