"""Bad input: wrong experiments driven through the real command
line, `bigraph-emu run ...`. Each must exit with code 2, name the field on
stderr, and leave the machine as it was: no results folder, no new network
interfaces named bgs*/bgh*, the run lock not taken.

No root needed. As root, nothing is built either: validation comes first,
and as a second guard the network part of every command refuses here.
"""
from __future__ import annotations

import csv
import io
import json
import os
import pathlib
import shutil
import struct
import signal
import subprocess

import pytest

from emulator import exit_codes
from emulator.routes.routing import POLICIES
from emulator import cli, pipeline
from emulator import preflight
from emulator.net import capabilities
from emulator.net.processes import LOCK_FILE, STATE_DIR

EMULATE, WEB_VIEW = pipeline.emulate, pipeline.web_view   # the real ones, before the guard below replaces them
GOOD_TOML = '[defaults]\ntopology = "bigraph:m=2,n=4"\n'
FIFO, FOLDER, DEVICE = "a named pipe", "a folder", "a character device"   # a file made one of these (make())

# (case, argv after `run`, words stderr must hold: the field first)
# {dir} is a fresh folder, {old} one holding earlier results.
CASES = [
    ("topology kind unknown", ["-t", "hypercube:k=4"], ["topology", "hypercube", "bigraph, fattree, leafspine"]),
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
    ("capture of no link", ["--capture", "bgs0-bgs1"], ["--capture (capture)", "'bgs0-bgs1' is not a link", "bgs0-bgs2"]),
    ("capture of no host", ["--capture", "bgh8"], ["--capture (capture)", "'bgh8'", "bigraph-emu topo"]),
    ("capture of a link twice", ["--capture", "bgs0-bgs2,bgs0-bgs2"], ["--capture (capture)", "given twice"]),
    ("capture of five links", ["--capture", "bgh0,bgh1,bgh2,bgh3,bgh4"], ["--capture (capture)", "at most 4"]),
    ("capture with an empty name", ["--capture", "bgh0,"], ["--capture (capture)", "empty link name"]),
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
    # numbers as Python reads them but people do not mean them, and repeated or missing parts
    ("topology full-width digit", ["-t", "bigraph:m=\uff12,n=4"], ["-t/--topology (topology)", "m", "ASCII"]),
    ("topology underscore in a number", ["-t", "bigraph:m=1_0,n=4"], ["topology", "m", "'1_0'"]),
    ("topology parameter given twice", ["-t", "bigraph:m=2,n=4,m=3"], ["topology", "m is given twice"]),
    ("topology unknown parameter", ["-t", "bigraph:x=1"], ["topology", "'x=1'", "m=<int>, n=<int>"]),
    ("topology astronomically large", ["-t", "bigraph:m=99999999999999999999,n=4"], ["topology", "131072"]),
    ("topology kind in capitals", ["-t", "BIGRAPH:m=2"], ["topology", "'BIGRAPH'"]),
    ("topology semicolon separator", ["-t", "bigraph:m=2;n=4"], ["topology", "'2;n=4'"]),
    ("leafspine with one host", ["-t", "leafspine:leaves=1,spines=1,hosts=1"], ["topology", "leaves", "hosts"]),
    ("leafspine without spines", ["-t", "leafspine:leaves=2,spines=0"], ["topology", "spines"]),
    ("leafspine without uplinks", ["-t", "leafspine:uplinks=0"], ["topology", "uplinks"]),
    ("fattree k=0", ["-t", "fattree:k=0"], ["topology", "k=0"]),
    ("topology fraction", ["-t", "fattree:k=4.0"], ["topology", "k", "'4.0'"]),
    ("topology huge input echoed", ["-t", "bigraph:m=" + "9" * 100_000], ["topology", "characters cut"]),
    ("size underscore", ["-b", "1_0K"], ["-b (sizes)", "'1_0K'"]),
    ("size full-width digit", ["-b", "\uff11M"], ["sizes", "whole byte count"]),
    ("size fraction of a byte", ["-b", "1.5"], ["sizes", "'1.5'"]),
    ("size sweep of billions", ["-b", "1", "-e", "4G", "-f", "1.00000001"], ["-b/-e/-f (sizes)", "64 sizes", "2.2"]),
    ("size factor 0", ["-b", "1M", "-e", "2M", "-f", "0"], ["sizes", "factor must be > 1"]),
    ("size factor nan", ["-b", "1M", "-e", "2M", "-f", "nan"], ["sizes", "finite"]),
    ("size factor text", ["-b", "1M", "-e", "2M", "-f", "x"], ["sizes", "'x'"]),
    ("size sweep in a sweep", ["-b", "1M", "-e", "1M:2M"], ["sizes", "begin:end:factor"]),
    ("repetitions full-width", ["-n", "\uff11\uff10"], ["-n/--repetitions (repetitions)", "expected int"]),
    ("repetitions underscore", ["-n", "1_0"], ["repetitions", "'1_0'"]),
    ("repetitions empty", ["-n", ""], ["repetitions", "''"]),
    ("repetitions exponent", ["-n", "1e3"], ["repetitions", "'1e3'"]),
    ("repetitions a fraction", ["-n", "2.0"], ["repetitions", "'2.0'"]),
    ("seed text", ["--seed", "x"], ["--seed (seed)", "'x'"]),
    ("ranks negative", ["--ranks=-1"], ["--ranks (ranks)", "0 or more"]),
    ("ranks one", ["--ranks", "1"], ["ranks", "2 to 8"]),
    ("mtu underscore", ["--mtu", "1_500"], ["--mtu (mtu)", "'1_500'"]),
    ("connections 17", ["--connections", "17"], ["connections", "between 1 and 16"]),
    ("host rate nan", ["--host-rate", "nan"], ["--host-rate (host_rate_mbps)", "nan"]),
    ("both rates 0", ["--bw", "0"], ["--bw (host_rate_mbps)", "between 1 and 100000"]),
    ("queue a fraction names the flag typed", ["--queue", "1.5"], ["--queue (host_queue_packets)", "'1.5'"]),
    ("switch queue a fraction", ["--switch-queue", "2.5"], ["--switch-queue (switch_queue_packets)"]),
    ("alpha negative", ["--alpha-us=-1"], ["--alpha-us (model_alpha_us)"]),
    ("monitor interval huge", ["--monitor-interval", "1e9"], ["monitor_interval_ms", "1000"]),
    ("delay nan", ["--delay", "nan"], ["--delay (link_delay_ms)", "between 0 and 1000"]),
    ("collective in capitals", ["-c", "Allreduce"], ["collective", "'Allreduce'"]),
    ("two algorithms at once", ["-a", "ring,halving-doubling"], ["algorithm", "ring, halving-doubling"]),
    ("mapping empty", ["-m", ""], ["mapping", "''"]),
    ("policy empty", ["-p", ""], ["policy", "''"]),
    ("stride with an algorithm", ["-c", "stride", "-a", "halving-doubling"], ["algorithm", "stride", "means nothing"]),
    ("broadcast with an algorithm", ["-c", "broadcast", "-a", "halving-doubling"], ["algorithm", "broadcast"]),
    ("all-to-all with an algorithm", ["-c", "all-to-all", "-a", "halving-doubling"], ["algorithm", "all-to-all"]),
    ("parameter server with an algorithm", ["-c", "parameter-server", "-a", "halving-doubling"], ["algorithm"]),
    ("link down twice", ["--link-event", "1:bgs0-bgs2:down", "--link-event", "2:bgs0-bgs2:down"],
     ["--link-event (link_events)", "already down"]),
    ("link event time text", ["--link-event", "x:bgs0-bgs2:down"], ["link_events", "TIME:SWITCH-SWITCH"]),
    ("link event one switch", ["--link-event", "1:bgs0:down"], ["link_events", "'1:bgs0:down'"]),
    ("link event extra part", ["--link-event", "1:bgs0-bgs2:down:extra"], ["link_events", "extra"]),
    ("link event full-width time", ["--link-event", "\uff11:bgs0-bgs2:down"], ["link_events", "TIME"]),
    ("link override without a rate", ["--link", "bgs0-bgs2"], ["--link-rate/--link (link_overrides)", "A-B:MBPS"]),
    ("link override rate 0", ["--link", "bgs0-bgs2:0"], ["link_overrides", "rate", "from 1 to 100000"]),
    ("link override on no link", ["--link", "bgs0-bgs9:5"], ["link_overrides", "no such link"]),
    ("link override setting twice", ["--link", "bgs0-bgs2:rate=5,rate=6"], ["link_overrides", "given twice"]),
    ("link override unknown setting", ["--link", "bgs0-bgs2:speed=5"], ["link_overrides", "'speed'", "rate, delay, loss"]),
    ("link override loss 101", ["--link", "bgs0-bgs2:loss=101"], ["link_overrides", "loss", "0 to 100"]),
    ("link override full-width rate", ["--link", "bgs0-bgs2:rate=\uff11"], ["link_overrides", "rate"]),
    ("output folder empty name", ["--out", ""], ["--out", "empty"]),
    ("output folder blank name", ["--out", "   "], ["--out", "empty"]),
    ("workload file missing", ["--workload", "{dir}/nowhere.toml"], ["--workload (workload)", "nowhere.toml", "cannot read"]),
    ("imported workload missing", ["--workload", "simai:{dir}/nowhere.txt"], ["workload", "nowhere.txt"]),
    ("imported trace folder missing", ["--workload", "chakra:{dir}/nowhere"], ["workload", "nowhere", "cannot read"]),
    ("a run of two weeks without --yes", ["-n", "1000", "-b", "4G"], ["the model predicts", "--yes", "336 h"]),
    # given but empty: a mistake, never "not given"
    ("-b empty", ["-b", ""], ["-b/--minbytes", "empty"]),
    ("-e empty", ["-e", ""], ["-e/--maxbytes", "empty"]),
    ("-f empty", ["-b", "1M", "-f", ""], ["-f/--stepfactor", "empty"]),
    ("experiment file empty name", ["--experiment", ""], ["--experiment", "empty"]),
    ("workload file empty name", ["--workload", ""], ["--workload", "empty"]),
    ("link event empty", ["--link-event", ""], ["--link-event", "empty"]),
    # input files that are no regular files: refused before they are opened (a pipe would wait for ever)
    ("experiment file a named pipe", ["--experiment", "{pipe}"], ["experiment file", "pipe", "a named pipe"]),
    ("workload file a named pipe", ["--workload", "{pipe}"], ["--workload (workload)", "pipe", "a named pipe"]),
    ("imported workload a named pipe", ["--workload", "simai:{pipe}"], ["workload", "simai:", "a named pipe"]),
    ("workload file a device", ["--workload", "/dev/zero"], ["workload", "/dev/zero", "a character device"]),
    ("experiment file a folder", ["--experiment", "{dir}"], ["experiment file", "a folder"]),
    # output folders the file system cannot make
    ("output folder below a file", ["--out", "{dir}/unknown.toml/out"], ["--out", "unknown.toml is a file"]),
    ("output folder name of 300 characters", ["--out", "{dir}/" + "a" * 300], ["--out", "too long", "255"]),
    ("output folder path too long", ["--out", "{dir}/" + "/".join(["d" * 200] * 30)], ["--out", "too long a path"]),
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

HANG_S = 120   # no case takes this long; one that does is a hang (a named pipe opened, a template expanded)


class Hang(Exception):
    pass


@pytest.fixture(autouse=True)
def no_hang():
    """Every test fails, instead of hanging, after HANG_S: the alarm's
    exception also breaks a blocking open() of a named pipe."""
    def hang(*_):
        raise Hang(f"still running after {HANG_S} s")
    old = signal.signal(signal.SIGALRM, hang)
    signal.alarm(HANG_S)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


@pytest.fixture(autouse=True)
def guarded(monkeypatch):
    """Nothing can be built even if a case were accepted; netem is missing;
    pytest gets its SIGTERM handler back."""
    def refuse(*_a, **_k):
        raise AssertionError("bad input reached the network")
    for name in ("emulate", "interactive", "web_view"):   # web_view: report --web would serve until Ctrl-C
        monkeypatch.setattr(pipeline, name, refuse)
    monkeypatch.setattr(cli, "cmd_clean", refuse)
    from emulator import calibration, execute
    monkeypatch.setattr(calibration, "calibrate", refuse)
    monkeypatch.setattr(execute, "execute", refuse)
    monkeypatch.setattr(capabilities, "netem_available", lambda: False)
    from emulator.net import dataplane   # the datapath check: no modprobe, no ovs-vsctl
    monkeypatch.setattr(dataplane, "_module_loaded", lambda name: False)
    monkeypatch.setattr(dataplane, "_try_modprobe", lambda name: False)
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
    os.mkfifo(tmp_path / "pipe")   # no writer ever opens it: a reader that opened it would wait for ever
    return {"dir": str(tmp_path), "old": str(old), "out": str(tmp_path / "out"), "pipe": str(tmp_path / "pipe")}


def expand(argv: list[str], folders: dict) -> list[str]:
    return [a.format(**folders) for a in argv]


OUT_COMMANDS = ("run", "compare", "cli", "demo", "model")   # the commands that take --out


def assert_refused(capsys, argv: list[str], words: list[str], folders: dict) -> None:
    """exit 2, the field named, nothing created."""
    before = machine_state()
    old_listing = sorted(os.listdir(folders["old"]))
    if "--out" not in argv and argv[0] in OUT_COMMANDS:
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


def test_the_corpus_holds_at_least_350_bad_inputs():
    everything = (CASES + TOML_CASES + WORKLOAD_CASES + SIMAI_CASES + CALIBRATION_CASES + REPORT_CASES
                  + PROGRAM_REPORT_CASES + OTHER_COMMAND_CASES)
    assert len(everything) >= 350, len(everything)
    assert len({case[0] for case in everything}) == len(everything), "two cases of one name"


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
    monkeypatch.setattr(pipeline, "emulate", lambda experiment, plans, out, **_: reached.append(plans[0].spec) or 0)
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


# --- files, the other commands, results folders ------------------------------------------
# Each table: (case, what the file holds, words stderr must hold). The file goes into a fresh folder.

LATIN1 = '[defaults]\nlabel = "caf\u00e9"\n'.encode("latin-1")
DEEP = "x = " + "[" * 50_000 + "]" * 50_000 + "\n"

TOML_CASES = [
    ("experiment not UTF-8", LATIN1, ["case.toml", "line 2", "not UTF-8"]),
    ("experiment random bytes", bytes(range(256)) * 4, ["case.toml", "UTF-8"]),
    ("experiment with a byte-order mark", "\ufeff[defaults]\n", ["case.toml", "not valid TOML"]),
    ("experiment nested too deep", DEEP, ["case.toml", "nested too deep"]),
    ("experiment empty", "", ["case.toml", "empty"]),
    ("experiment only a comment", "# nothing\n", ["case.toml", "empty"]),
    ("experiment runs = []", "runs = []\n", ["case.toml", "runs = []"]),
    ("experiment runs a number", "runs = 3\n", ["case.toml", "[[runs]] tables"]),
    ("experiment runs a list of numbers", "runs = [1, 2]\n", ["case.toml", "[[runs]] tables"]),
    ("experiment defaults a number", "defaults = 3\n", ["case.toml", "[defaults] must be a table"]),
    ("experiment label a list", "[defaults]\nlabel = [1, 2]\n", ["run 1", "label", "expected text"]),
    ("experiment topology a list", '[defaults]\ntopology = ["bigraph:m=2,n=4"]\n', ["run 1", "topology", "text"]),
    ("experiment topology a table", "[defaults.topology]\nm = 2\n", ["topology", "expected text"]),
    ("experiment sizes a float", "[defaults]\nsizes = 1.5e6\n", ["sizes", "whole byte count"]),
    ("experiment repetitions a float", "[defaults]\nrepetitions = 2.0\n", ["repetitions", "2.0"]),
    ("experiment repetitions inf", "[defaults]\nrepetitions = inf\n", ["repetitions", "inf"]),
    ("experiment rate nan", "[defaults]\nhost_rate_mbps = nan\n", ["host_rate_mbps", "between 1 and 100000"]),
    ("experiment rate true", "[defaults]\nhost_rate_mbps = true\n", ["host_rate_mbps", "True"]),
    ("experiment no sizes", "[defaults]\nsizes = []\n", ["sizes", "1 to 64 sizes"]),
    ("experiment a size twice", '[defaults]\nsizes = ["1M", "1M"]\n', ["sizes", "given twice"]),
    ("experiment a sweep of billions", '[defaults]\nsizes = "1:4G:1.00000001"\n', ["sizes", "64 sizes"]),
    ("experiment a size true", "[defaults]\nsizes = [true]\n", ["sizes", "True"]),
    ("experiment mtu a fraction", "[defaults]\nmtu = 1500.5\n", ["mtu", "1500.5"]),
    ("experiment link events text", '[defaults]\nlink_events = "x"\n', ["link_events", "'x'"]),
    ("experiment link events a number", "[defaults]\nlink_events = [1]\n", ["link_events", "1"]),
    ("experiment workload a number", "[defaults]\nworkload = 5\n", ["workload", "expected text"]),
    ("experiment name climbs out", 'name = "../../x"\n[defaults]\n', ["case.toml", "name", "'../../x'"]),
    ("experiment name absolute", 'name = "/tmp/x"\n[defaults]\n', ["name", "no /"]),
    ("experiment name hidden", 'name = ".x"\n[defaults]\n', ["name", "leading dot"]),
    ("experiment name a number", "name = 5\n[defaults]\n", ["name", "5"]),
    ("experiment yes as text", 'yes = "sure"\n[defaults]\n', ["yes must be true or false"]),
    ("experiment yes in defaults", "[defaults]\nyes = true\n", ["unknown key", "yes"]),
    ("experiment stride with an algorithm", '[defaults]\ncollective = "stride"\nalgorithm = "halving-doubling"\n',
     ["run 1", "algorithm", "stride"]),
    ("experiment second run bad", "[[runs]]\nmtu = 1500\n[[runs]]\nmtu = \"1_500\"\n", ["run 2", "mtu", "1_500"]),
    # numbers at the limits
    ("experiment integer of 5000 digits", "[defaults]\nrepetitions = " + "9" * 5000 + "\n", ["case.toml", "4300 digits"]),
    ("experiment repetitions of 30 digits", "[defaults]\nrepetitions = " + "9" * 30 + "\n", ["repetitions", "1000"]),
    ("experiment rate 1e308", "[defaults]\nhost_rate_mbps = 1e308\n", ["host_rate_mbps", "100000"]),
    ("experiment rate 1e-308", "[defaults]\nhost_rate_mbps = 1e-308\n", ["host_rate_mbps", "between 1"]),
    ("experiment size of 41 digits", '[defaults]\nsizes = ["' + "1" * 41 + '"]\n', ["sizes", "40 digits"]),
    ("experiment size Arabic-Indic", '[defaults]\nsizes = ["\u0661M"]\n', ["sizes", "whole byte count"]),
    ("experiment mtu superscript", '[defaults]\nmtu = "\u00b9\u00b2"\n', ["mtu", "expected int"]),
    ("experiment link event record with an unknown key",
     '[defaults]\nlink_events = [{time_s = 1, a = "bgs0", b = "bgs2", action = "down", colour = "red"}]\n',
     ["link_events", "colour", "not an event record"]),
    ("experiment link event record time as Arabic-Indic text",
     '[defaults]\nlink_events = [{time_s = "\u0661", a = "bgs0", b = "bgs2", action = "down"}]\n',
     ["link_events", "not an event record"]),
]

WORKLOAD_CASES = [
    ("workload not UTF-8", '[[job]]\nname = "caf\u00e9"\n'.encode("latin-1"), ["workload", "line 2", "not UTF-8"]),
    ("workload empty", "", ["workload", "[[job]]"]),
    ("workload nested too deep", DEEP, ["workload", "nested too deep"]),
    ("workload job name a list", '[[job]]\nname = ["a"]\nops = [{op = "compute", ms = 1}]\n', ["job 1", "name"]),
    ("workload no ops", '[[job]]\nname = "a"\nops = []\n', ["job 'a'", "ops is empty"]),
    ("workload unknown op", '[[job]]\nops = [{op = "jump"}]\n', ["op 1", "'jump'"]),
    ("workload bytes a float", '[[job]]\nops = [{op = "allreduce", bytes = 1.5e6}]\n', ["bytes", "whole byte count"]),
    ("workload a million gigabytes", '[[job]]\nname = "a"\nops = [{op = "allreduce", bytes = "1000000G"}]\n',
     ["job 'a'", "op 1", "bytes", "above the limit", "4G"]),
    ("workload send to a group index it lacks", '[[job]]\nname = "a"\nranks = 4\nops = [{op = "send", bytes = "1M", group = "world", to = 9}]\n',
     ["job 'a'", "send to group index 9", "group world has ranks 0 to 3 only"]),
    ("workload placement an empty list", '[[job]]\nname = "a"\nplacement = []\nops = [{op = "compute", ms = 1}]\n',
     ["job 'a'", "placement is an empty list"]),
    ("workload iterations a float", '[[job]]\niterations = 2.0\nops = [{op = "compute", ms = 1}]\n',
     ["iterations", "2.0"]),
    ("workload tp not dividing", '[[job]]\nranks = 6\ntp = 4\nops = [{op = "compute", ms = 1}]\n', ["tp x pp"]),
    ("workload unknown placement", '[[job]]\nplacement = "spiral"\nops = [{op = "compute", ms = 1}]\n',
     ["placement", "'spiral'"]),
    ("workload speed 0", '[hosts]\nbgh0 = 0\n[[job]]\nops = [{op = "compute", ms = 1}]\n', ["[hosts]", "speed"]),
    ("workload share_hosts text", 'share_hosts = "yes"\n[[job]]\nops = [{op = "compute", ms = 1}]\n',
     ["share_hosts", "true or false"]),
    ("workload wait for nothing", '[[job]]\nops = [{op = "wait", tag = "g"}]\n', ["wait", "'g'"]),
    ("workload matrix not square", '[[job]]\nops = [{op = "all-to-all", matrix = [[1, 2]]}]\n', ["matrix", "square"]),
    ("workload template unknown", '[[job]]\ntemplate = "nosuch"\n', ["template", "nosuch"]),
    ("workload two jobs one name", '[[job]]\nname = "a"\nops = [{op = "compute", ms = 1}]\n' * 2, ["'a'", "twice"]),
    ("workload unknown top key", 'jobs = 1\n[[job]]\nops = [{op = "compute", ms = 1}]\n', ["unknown key", "jobs"]),
    # numbers at the limits, and templates that would expand past what fits in memory and time
    ("workload integer of 5000 digits", '[[job]]\nranks = ' + "9" * 5000 + '\nops = [{op = "compute", ms = 1}]\n',
     ["workload", "4300 digits"]),
    ("workload collective of 10^400 bytes", '[[job]]\nops = [{op = "allreduce", bytes = "1' + "0" * 400 + '"}]\n',
     ["op 1", "bytes", "40 digits", "64 PiB"]),
    ("workload collective of 10^400 bytes as a TOML integer",
     '[[job]]\nops = [{op = "allreduce", bytes = 1' + "0" * 400 + '}]\n', ["op 1", "bytes", "64 PiB"]),
    ("workload collective above 64 PiB", '[[job]]\nops = [{op = "allreduce", bytes = %d}]\n' % ((1 << 56) + 1),
     ["bytes", str((1 << 56) + 1), "above 72057594037927936 bytes (64 PiB)"]),
    ("workload compute of 1e308 ms", '[[job]]\nops = [{op = "compute", ms = 1e308}]\n', ["compute ms", "1e+07"]),
    ("workload send to peer 10^1000", '[[job]]\nranks = 4\npp = 4\nops = [{op = "send", bytes = "1M", to = 1'
     + "0" * 1000 + '}]\n', ["send peer", "group index"]),
    ("workload speed of a host the fabric lacks", '[hosts]\nbgh99 = 0.5\n[[job]]\nops = [{op = "compute", ms = 1}]\n',
     ["[hosts] bgh99", "no such host", "bgh0 to bgh7"]),
    ("workload duration of 10^11 iterations", '[[job]]\nduration_ms = 1e8\nops = [{op = "compute", ms = 0.001}]\n',
     ["job 'job1'", "duration_ms", "at most 10000"]),
    ("data-parallel bucket_mb = 0", '[[job]]\ntemplate = "data-parallel"\nparams = {bucket_mb = 0}\n',
     ["template data-parallel", "bucket_mb", "from 0.001"]),
    ("data-parallel params_m = 1e308", '[[job]]\ntemplate = "data-parallel"\nparams = {params_m = 1e308}\n',
     ["template data-parallel", "params_m", "1e+07"]),
    ("data-parallel buckets past the op limit", '[[job]]\ntemplate = "data-parallel"\nparams = {bucket_mb = 0.01}\n',
     ["template data-parallel", "bucket_mb = 0.01", "ops per rank and iteration", "at most 10,000"]),
    ("moe skew 1e308", '[[job]]\ntemplate = "moe"\nparams = {skew = 1e308}\n', ["template moe", "skew", "100"]),
    ("moe 10^8 layers", '[[job]]\ntemplate = "moe"\nparams = {layers = 100000000}\n',
     ["template moe", "layers", "10000"]),
    ("moe layers times iterations past the limit", '[[job]]\niterations = 1000\ntemplate = "moe"\n'
     'params = {layers = 2000}\n', ["template moe", "8,000,000 ops per rank", "at most 1,000,000"]),
    ("pipeline 10^7 microbatches", '[[job]]\nranks = 4\npp = 2\ntemplate = "pipeline"\n'
     'params = {microbatches = 10000000}\n', ["template pipeline", "microbatches", "10000"]),
    ("pipeline microbatches past the op limit", '[[job]]\nranks = 4\npp = 2\ntemplate = "pipeline"\n'
     'params = {microbatches = 2000}\n', ["template pipeline", "16,002 ops", "at most 10,000"]),
    ("hybrid tp_mb infinite", '[[job]]\nranks = 4\npp = 2\ntemplate = "hybrid"\nparams = {tp_mb = inf}\n',
     ["template hybrid", "tp_mb", "inf"]),
]

SIMAI_HEADER = "HYBRID_TRANSFORMER_FWD_IN_BCKWD model_parallel_NPU_group: 2 ep: 1 pp: 1 vpp: 8 ga: 1 all_gpus: 8\n"
SIMAI_LAYER = "l0 -1 100 ALLREDUCE 1048576 100 ALLREDUCE 1048576 100 ALLREDUCE 1048576 100\n"

# SimAI files (--workload simai:FILE), each a change of a good one
SIMAI_CASES = [
    ("simai byte count of 400 digits", SIMAI_HEADER + "1\n" + SIMAI_LAYER.replace("1048576", "1" + "0" * 399, 1),
     ["simai:", "line 3", "forward bytes", "40 digits"]),
    ("simai byte count above 64 PiB", SIMAI_HEADER + "1\n" + SIMAI_LAYER.replace("1048576", "9" * 20, 1),
     ["line 3", "forward bytes", "from 0 to 72057594037927936"]),
    ("simai bytes in superscript digits", SIMAI_HEADER + "1\n" + SIMAI_LAYER.replace("1048576", "\u00b9\u00b2", 1),
     ["line 3", "forward bytes", "ASCII digits"]),
    ("simai layer count in superscript digits", SIMAI_HEADER + "\u00b9\n" + SIMAI_LAYER,
     ["line 2", "layer count", "ASCII digits"]),
    ("simai bytes in Arabic-Indic digits", SIMAI_HEADER + "1\n" + SIMAI_LAYER.replace("1048576", "\u0661\u0662", 1),
     ["line 3", "forward bytes", "ASCII digits"]),
    ("simai bytes in full-width digits", SIMAI_HEADER + "1\n" + SIMAI_LAYER.replace("1048576", "\uff11\uff12", 1),
     ["line 3", "forward bytes", "ASCII digits"]),
    ("simai all_gpus in full-width digits", SIMAI_HEADER.replace("all_gpus: 8", "all_gpus: \uff18") + "1\n" + SIMAI_LAYER,
     ["line 1", "all_gpus:", "ASCII digits"]),
    ("simai group of 10^30", SIMAI_HEADER.replace("group: 2", "group: 1" + "0" * 30) + "1\n" + SIMAI_LAYER,
     ["line 1", "model_parallel_NPU_group:", "1048576"]),
    ("simai compute time past three hours", SIMAI_HEADER + "1\n" + SIMAI_LAYER.replace(" 100 ", " 99999999999999 ", 1),
     ["simai:", "compute time", "at most 1e+07 ms"]),
    ("simai not UTF-8", (SIMAI_HEADER + "1\n").encode() + b"l\xff -1\n", ["simai:", "line 3", "not UTF-8"]),
]

CAL_POINT = {"datapath": "user", "mtu": 9000, "offload": "off", "raw_mbps": 5000.0, "faithful_mbps": 4000.0,
             "link_rate_mbps": 300.0}


def calibration_doc(**point) -> str:
    return json.dumps({"machine": "m", "measured": "d", "points": [{**CAL_POINT, **point}]})


CALIBRATION_CASES = [
    ("calibration not JSON", "{points: 1", ["case.json", "unreadable", "bigraph-emu calibrate"]),
    ("calibration not UTF-8", b'{"machine": "caf\xe9"}', ["case.json", "unreadable"]),
    ("calibration nested too deep", "[" * 50_000 + "]" * 50_000, ["case.json", "unreadable"]),
    ("calibration a list", "[]", ["case.json", "unreadable"]),
    ("calibration without points", '{"machine": "m", "measured": "d"}', ["case.json", "points"]),
    ("calibration points text", '{"machine": "m", "measured": "d", "points": "x"}', ["case.json", "unreadable"]),
    ("calibration faithful negative", calibration_doc(faithful_mbps=-1), ["faithful_mbps", ">= 0"]),
    ("calibration faithful text", calibration_doc(faithful_mbps="4000"), ["faithful_mbps", "'4000'"]),
    ("calibration raw 0", calibration_doc(raw_mbps=0), ["raw_mbps", "> 0"]),
    ("calibration link rate missing", calibration_doc(link_rate_mbps=None), ["link_rate_mbps"]),
    ("calibration mtu text", calibration_doc(mtu="9000"), ["mtu", "whole number"]),
    ("calibration unknown field", calibration_doc(colour="red"), ["case.json", "colour"]),
    ("calibration faithful infinite", calibration_doc(faithful_mbps=1e999), ["faithful_mbps", "finite"]),
    ("calibration negative mtu", calibration_doc(mtu=-1500), ["case.json", "mtu", "576 and 9000"]),
    ("calibration datapath unknown", calibration_doc(datapath="fast"), ["case.json", "datapath", "'fast'"]),
    ("calibration offload unknown", calibration_doc(offload="gso"), ["case.json", "offload", "'gso'"]),
    ("calibration a named pipe", FIFO, ["case.json", "a named pipe", "unreadable"]),
    ("calibration a folder", FOLDER, ["case.json", "a folder", "unreadable"]),
    ("calibration a device", DEVICE, ["case.json", "a character device", "unreadable"]),
    ("calibration integer of 5000 digits", calibration_doc(mtu=0).replace('"mtu": 0', '"mtu": ' + "9" * 5000),
     ["case.json", "unreadable"]),
]

OTHER_COMMAND_CASES = [
    ("model jitter above 10", ["model", "--jitter", "11"], ["--jitter", "between 0 and 10"]),
    ("model jitter nan", ["model", "--jitter", "nan"], ["--jitter", "nan"]),
    ("model topology twice a parameter", ["model", "-t", "fattree:k=4,k=6"], ["topology", "k is given twice"]),
    ("model queue names the flag", ["model", "--queue", "1.5"], ["--queue (host_queue_packets)"]),
    ("topo path to no host", ["topo", "--path", "bgh0", "bgh99"], ["--path", "bgh99"]),
    ("topo path to itself", ["topo", "--path", "bgh0", "bgh0"], ["--path", "both bgh0"]),
    ("topo full-width topology", ["topo", "-t", "fattree:k=\uff14"], ["topology", "ASCII"]),
    ("calibrate mtu underscore", ["calibrate", "--mtu", "1_500"], ["--mtu", "integers"]),
    ("calibrate mtu full-width", ["calibrate", "--mtu", "\uff19\uff10\uff10\uff10"], ["--mtu", "integers"]),
    ("compare a long run without --yes", ["compare", "-n", "1000", "-b", "4G", "--vary", "policy=shortest,ecmp"],
     ["--yes"]),
    ("compare stride with an algorithm", ["compare", "-c", "stride", "--vary", "algorithm=ring,halving-doubling"],
     ["--vary algorithm=halving-doubling", "stride"]),
    ("cli empty output folder", ["cli", "--out", ""], ["--out", "empty"]),
    ("model output folder empty", ["model", "--out", ""], ["--out", "empty"]),
    ("model output folder is a file", ["model", "--out", "{dir}/unknown.toml"], ["--out", "is a file"]),
    ("model output folder below a file", ["model", "--out", "{dir}/unknown.toml/x"], ["--out", "unknown.toml is a file"]),
    ("model output folder name of 300 characters", ["model", "--out", "{dir}/" + "b" * 300], ["--out", "too long"]),
    ("model jitter Arabic-Indic", ["model", "--jitter", "\u0660.\u0661"], ["--jitter", "not a number"]),
    ("model jitter full-width", ["model", "--jitter", "\uff11"], ["--jitter", "not a number"]),
    ("model jitter underscore", ["model", "--jitter", "0_1"], ["--jitter", "not a number"]),
    ("model experiment a named pipe", ["model", "--experiment", "{pipe}"], ["pipe", "a named pipe"]),
    ("calibrate steps Arabic-Indic", ["calibrate", "--steps", "\u0663"], ["--steps", "ASCII digits"]),
    ("calibrate file a folder", ["calibrate", "--file", "{dir}"], ["--file", "a folder"]),
    ("calibrate file below a file", ["calibrate", "--file", "{dir}/unknown.toml/c.json"], ["--file", "unknown.toml"]),
    ("calibrate file unreadable", ["calibrate", "--file", "{dir}/broken.toml"], ["broken.toml", "unreadable"]),
    ("sweep workers Arabic-Indic", ["sweep", "{dir}/unknown.toml", "--workers", "\u0662"], ["--workers", "ASCII"]),
    ("sweep workers 0", ["sweep", "{dir}/unknown.toml", "--workers", "0"], ["--workers", "from 1 to 4096"]),
    ("sweep confirm full-width", ["sweep", "{dir}/unknown.toml", "--confirm", "\uff13"], ["--confirm", "ASCII"]),
    ("sweep file a named pipe", ["sweep", "{pipe}"], ["sweep file", "a named pipe"]),
    ("plan servers Arabic-Indic", ["plan", "--servers", "\u0663"], ["servers", "'\u0663'"]),
    ("report plot empty name", ["report", "{old}", "{old}", "--plot", ""], ["--plot", "empty"]),
]


def write_case(folder, name: str, content) -> str:
    path = os.path.join(folder, name)
    with open(path, "wb") as f:
        f.write(content if isinstance(content, bytes) else content.encode())
    return path


@pytest.mark.parametrize("case, content, words", TOML_CASES, ids=[c[0] for c in TOML_CASES])
def test_bad_experiment_files(capsys, folders, case, content, words):
    path = write_case(folders["dir"], "case.toml", content)
    assert_refused(capsys, ["run", "--experiment", path], words, folders)


@pytest.mark.parametrize("case, content, words", WORKLOAD_CASES, ids=[c[0] for c in WORKLOAD_CASES])
def test_bad_workload_files(capsys, folders, case, content, words):
    path = write_case(folders["dir"], "case.toml", content)
    assert_refused(capsys, ["run", "--workload", path], words, folders)


@pytest.mark.parametrize("case, content, words", SIMAI_CASES, ids=[c[0] for c in SIMAI_CASES])
def test_bad_simai_files(capsys, folders, case, content, words):
    path = write_case(folders["dir"], "case.txt", content)
    assert_refused(capsys, ["run", "--workload", "simai:" + path], words, folders)


def test_the_good_simai_file_of_those_cases_is_accepted(folders):
    from emulator.spec.experiment import make_run
    path = write_case(folders["dir"], "case.txt", SIMAI_HEADER + "1\n" + SIMAI_LAYER)
    assert make_run({"workload": "simai:" + path}).workload.endswith("case.txt")


@pytest.mark.parametrize("case, content, words", CALIBRATION_CASES, ids=[c[0] for c in CALIBRATION_CASES])
def test_bad_calibration_files(capsys, monkeypatch, folders, case, content, words):
    from emulator.plan import capacity
    if content in (FIFO, FOLDER, DEVICE):
        path = os.path.join(folders["dir"], "case.json")
        make(pathlib.Path(path), content)
    else:
        path = write_case(folders["dir"], "case.json", content)
    monkeypatch.setenv(capacity.ENV_FILE, path)
    assert_refused(capsys, ["run", "-t", "bigraph:m=1,n=2"], words, folders)


@pytest.mark.parametrize("case, argv, words", OTHER_COMMAND_CASES, ids=[c[0] for c in OTHER_COMMAND_CASES])
def test_other_commands_refuse_bad_input(capsys, monkeypatch, folders, case, argv, words):
    monkeypatch.setattr(cli.os, "geteuid", lambda: 1000)   # calibrate: the input is checked before root
    assert_refused(capsys, expand(argv, folders), words, folders)
    assert "needs root" not in capsys.readouterr().err


# --- results folders given to `report` -------------------------------------------------------------

def good_folder(folder: str) -> None:
    """A results folder as `run` leaves it (two runs on one fabric), written by the
    emulator's own writers from made-up agent records."""
    import dataclasses
    from emulator.plan.run_plan import plan_run
    from emulator.results.calls import CallRecord, write_call
    from emulator.spec.experiment import make_run
    plans = [dataclasses.replace(plan_run(make_run({"topology": "bigraph:m=1,n=4", "algorithm": a, "sizes": "8K:16K:2",
                                                    "repetitions": 1, "warmup": 1})), run=i)
             for i, a in enumerate(("ring", "halving-doubling"))]
    os.makedirs(folder)
    with open(os.path.join(folder, "spec.json"), "w") as f:
        json.dump({"name": "t", "runs": [dataclasses.asdict(p.spec) for p in plans]}, f)
    plans[-1].fabric.save(os.path.join(folder, "fabric.json"))
    for plan in plans:
        for call in plan.calls:
            steps = [[{"start": 0.1 * k, "end": 0.1 * (k + 1), "sent": sum(t.nbytes for t in s.sends),
                       "received": sum(t.nbytes for t in s.recvs)} for k, s in enumerate(rank)]
                     for rank in plan.schedules[call.size_bytes].steps]
            links = [{"call": call.index, "t_s": t, "link": f"bgs0:{port}>x", "node": "bgs0", "port": port,
                      "peer": "x", "kind": "switch", "rate_mbps": 50,
                      "tx_bytes": 1000, "tx_packets": 1, "util": 0.5, "backlog_bytes": 0, "drops": 0}
                     for t in (0.1, 0.2) for port in (1, 2)]
            write_call(folder, plan, call, CallRecord(steps, {}, links, []), "user")


def _rows(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode())))


def _csv(rows) -> bytes:
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerows(rows)
    return out.getvalue().encode()


def edit_cell(name: str, column: str, value: str, row: int = 0):
    """(file, change): the cell of `column` in data row `row` set to `value`."""
    def change(data: bytes) -> bytes:
        rows = _rows(data)
        rows[row + 1][rows[0].index(column)] = value
        return _csv(rows)
    return name, change


def drop_column(name: str, column: str):
    def change(data: bytes) -> bytes:
        rows = _rows(data)
        i = rows[0].index(column)
        return _csv([r[:i] + r[i + 1:] for r in rows])
    return name, change


def header_only(name: str):
    return name, lambda data: data.split(b"\n", 1)[0] + b"\n"


def cut_in_half(name: str):
    return name, lambda data: data[:len(data) // 2]


def line_changed(name: str, line: int, how):
    def change(data: bytes) -> bytes:
        end = b"\r\n" if b"\r\n" in data else b"\n"   # the csv module ends lines with \r\n
        lines = data.split(end)
        lines[line - 1] = how(lines[line - 1])
        return end.join(lines)
    return name, change


def jobs_only(**cells):
    """A workload folder: no collectives.csv, and a jobs.csv of one row with `cells`
    changed (None: no row; "short": a row of four fields)."""
    from emulator.results.jobs import JOB_COLUMNS
    row = {**{c: "0" for c in JOB_COLUMNS}, "topology": "t", "policy": "p", "algorithm": "ring", "job": "a",
           "ranks": "2", "placement": "naive", "fidelity": "ok", "label": "", **cells}
    rows = [JOB_COLUMNS] + ([] if "none" in cells else [["t", "p", "ring", "a"]] if "short" in cells
                            else [[row[c] for c in JOB_COLUMNS]])
    return [("collectives.csv", None), ("jobs.csv", _csv(rows))]


# a pcap whose one record's header claims 100 bytes and 10 follow (a capture cut short)
PCAP_CUT = (struct.pack("<IHHiIII", 0xa1b2c3d4, 2, 4, 0, 0, 65535, 1) + struct.pack("<IIII", 0, 0, 100, 100)
            + b"x" * 10)
CAPTURES_OF_X = b"call,link,file,start_unix_s\n0,bgs0>bgh0,x.pcap,0\n"
RANDOM = bytes((i * 7919 + 13) % 256 for i in range(3000))   # the same 'random' bytes every time


def spec_changed(**top):
    """spec.json with top-level keys set (None: each run's keys set by `runs`)."""
    runs = top.pop("runs", {})

    def change(data: bytes) -> bytes:
        doc = json.loads(data)
        doc.update(top)
        for key, values in runs.items():
            doc["runs"] = [{**run, key: value} for run, value in zip(doc["runs"], values)] if key != "*" else \
                doc["runs"][:values]
        return json.dumps(doc).encode()
    return "spec.json", change


def fabric_changed(link: dict):
    def change(data: bytes) -> bytes:
        doc = json.loads(data)
        doc["links"][0].update(link)
        return json.dumps(doc).encode()   # NaN and Infinity as JSON's extension writes them
    return FABRIC, change
FABRIC = "fabric.json"
TWO_SWITCHES = {"topology": "t", "switches": [{"name": "s", "dpid": 1, "tier": "leaf", "index": 0}],
                "hosts": [{"name": "h", "index": 0, "ip": "1", "mac": "m", "switch": "s", "port": 1}]}

# (case, changes [(file, content, a function of the old content, or None: deleted)], words, extra argv)
REPORT_CASES = [
    ("collectives cut in half", [cut_in_half("collectives.csv")], ["collectives.csv", "line"]),
    ("collectives wrong header", [line_changed("collectives.csv", 1, lambda _: b"a,b,c")],
     ["collectives.csv", "no column", "topology"]),
    ("collectives empty", [("collectives.csv", b"")], ["collectives.csv", "empty"]),
    ("collectives header only", [header_only("collectives.csv")], ["collectives.csv", "no rows"]),
    ("collectives extra field", [line_changed("collectives.csv", 3, lambda l: l + b",x")],
     ["collectives.csv", "line 3", "more than the header"]),
    ("collectives a field short", [line_changed("collectives.csv", 2, lambda l: l.rsplit(b",", 1)[0])],
     ["collectives.csv", "line 2", "fewer than the header"]),
    ("collectives text for a time", [edit_cell("collectives.csv", "time_s", "abc")],
     ["collectives.csv", "line 2", "time_s", "'abc'"]),
    ("collectives random bytes", [("collectives.csv", RANDOM)], ["collectives.csv"]),
    ("collectives not UTF-8", [line_changed("collectives.csv", 3, lambda l: l.replace(b"naive", b"na\xefve"))],
     ["collectives.csv", "line 3", "not UTF-8"]),
    ("collectives size a fraction", [edit_cell("collectives.csv", "size_bytes", "1.5", 1)],
     ["collectives.csv", "line 3", "size_bytes", "whole number"]),
    ("collectives ranks 0", [edit_cell("collectives.csv", "ranks", "0")], ["collectives.csv", "ranks", ">= 1"]),
    ("collectives time 0", [edit_cell("collectives.csv", "time_s", "0")], ["time_s", "> 0"]),
    ("collectives time inf", [edit_cell("collectives.csv", "time_s", "inf")], ["time_s", "'inf'"]),
    ("collectives model blank", [edit_cell("collectives.csv", "model_time_s", "")], ["model_time_s"]),
    ("collectives unknown collective", [edit_cell("collectives.csv", "collective", "gossip")],
     ["collective", "'gossip'", "one of"]),
    ("collectives bytes_ok maybe", [edit_cell("collectives.csv", "bytes_ok", "maybe")], ["bytes_ok", "True or False"]),
    ("collectives mtu text", [edit_cell("collectives.csv", "mtu", "jumbo")], ["mtu", "'jumbo'"]),
    ("collectives rate negative", [edit_cell("collectives.csv", "host_rate_mbps", "-5")], ["host_rate_mbps"]),
    ("collectives counter text", [edit_cell("collectives.csv", "queue_drops", "many")], ["queue_drops", "blank"]),
    ("collectives header without label", [drop_column("collectives.csv", "label")], ["no column label"]),
    ("collectives blank column name", [line_changed("collectives.csv", 1, lambda l: l + b",")],
     ["collectives.csv"]),
    ("collectives missing", [("collectives.csv", None)], ["no collectives.csv, jobs.csv or ranks.csv"]),
    ("links cut in half", [cut_in_half("links.csv")], ["links.csv", "line"]),
    ("links without util", [drop_column("links.csv", "util")], ["links.csv", "no column util"]),
    ("links text for a time", [edit_cell("links.csv", "t_s", "soon", 2)], ["links.csv", "line 4", "t_s"]),
    ("links extra field", [line_changed("links.csv", 2, lambda l: l + b",1,2")], ["links.csv", "line 2"]),
    ("links random bytes", [("links.csv", RANDOM)], ["links.csv"]),
    ("links call a fraction", [edit_cell("links.csv", "call", "0.5")], ["links.csv", "call", "whole number"]),
    ("links util text", [edit_cell("links.csv", "util", "high")], ["links.csv", "util", "'high'"]),
    ("steps without rank", [drop_column("steps.csv", "rank")], ["steps.csv", "no column rank"]),
    ("steps text for a start", [edit_cell("steps.csv", "start_s", "later")], ["steps.csv", "line 2", "start_s"]),
    ("steps random bytes", [("steps.csv", RANDOM)], ["steps.csv"]),
    ("steps cut in half", [cut_in_half("steps.csv")], ["steps.csv", "line"]),
    ("steps repetition text", [edit_cell("steps.csv", "repetition", "x")], ["steps.csv", "repetition"]),
    ("steps empty header", [("steps.csv", b"\n\n")], ["steps.csv", "empty"]),
    ("jobs header only", jobs_only(none=True), ["jobs.csv", "no rows"]),
    ("jobs text for a time", jobs_only(time_s="x"), ["jobs.csv", "line 2", "time_s", "'x'"]),
    ("jobs ranks 0", jobs_only(ranks="0"), ["jobs.csv", "line 2", "ranks", ">= 1"]),
    ("jobs a field short", jobs_only(short=True), ["jobs.csv", "line 2", "fewer than the header"]),
    ("ops damaged", [("ops.csv", b"job,repetition,rank,kind,start_s,end_s\na,0,0,compute,soon,1\n")],
     ["ops.csv", "line 2", "start_s"]),
    ("link_jobs damaged", [("link_jobs.csv", b"link,job,bytes\nl,a,lots\n")], ["link_jobs.csv", "bytes"]),
    ("spec a list", [("spec.json", b"[]")], ["spec.json", "runs"]),
    ("spec runs empty", [("spec.json", b'{"runs": []}')], ["spec.json", "runs"]),
    ("spec runs of numbers", [("spec.json", b'{"runs": [1]}')], ["spec.json", "run tables"]),
    ("spec runs text", [("spec.json", b'{"runs": "x"}')], ["spec.json", "runs"]),
    ("spec unknown key", [("spec.json", b'{"runs": [{"bogus": 1}]}')], ["spec.json: run 1", "bogus"]),
    ("spec wrong type", [("spec.json", b'{"runs": [{"repetitions": "many"}]}')], ["spec.json: run 1", "repetitions"]),
    ("spec not JSON", [("spec.json", b"{runs")], ["spec.json", "not JSON"]),
    ("spec not UTF-8", [("spec.json", b'{"name": "\xff"}')], ["spec.json", "not JSON"]),
    ("spec nested too deep", [("spec.json", b"[" * 50_000 + b"]" * 50_000)], ["spec.json", "not JSON"]),
    ("spec missing", [("spec.json", None)], ["spec.json", "cannot read"]),
    ("spec workload copies a list", [("spec.json", b'{"runs": [{}], "workload_copies": [1]}')],
     ["spec.json", "workload_copies"]),
    ("spec workload and its copy gone", [("spec.json", b'{"runs": [{"workload": "/nowhere/w.toml"}], '
                                                      b'"workload_copies": {"/nowhere/w.toml": "workloads/0/w.toml"}}')],
     ["spec.json: run 1", "workload", "workloads/0/w.toml"]),
    ("fabric a list", [(FABRIC, b"[]")], ["fabric.json", "not a fabric"]),
    ("fabric empty table", [(FABRIC, b"{}")], ["fabric.json", "not a fabric"]),
    ("fabric not JSON", [(FABRIC, b"{")], ["fabric.json", "not JSON"]),
    ("fabric dpid text", [(FABRIC, json.dumps({**TWO_SWITCHES, "links": [], "switches": [
        {"name": "s", "dpid": "x", "tier": "leaf", "index": 0}]}).encode())], ["fabric.json", "dpid"]),
    ("fabric cable to no node", [(FABRIC, json.dumps({**TWO_SWITCHES, "links": [
        {"a": "h", "a_port": 0, "b": "nowhere", "b_port": 1, "rate_mbps": 1, "queue_packets": 1,
         "kind": "host"}]}).encode())], ["fabric.json", "'nowhere'", "no switch or node"]),
    ("fabric port cabled twice", [(FABRIC, json.dumps({**TWO_SWITCHES, "links": [
        {"a": "h", "a_port": 0, "b": "s", "b_port": 1, "rate_mbps": 1, "queue_packets": 1, "kind": "host"}] * 2
    }).encode())], ["fabric.json", "cabled twice"]),
    ("fabric unknown field", [(FABRIC, json.dumps({**TWO_SWITCHES, "links": [], "hosts": [
        {"name": "h", "colour": 1}]}).encode())], ["fabric.json", "colour"]),
    ("plot with one folder", [], ["--plot", "several folders"], ["{folder}", "--plot", "{dir}/x.png"]),
    ("plot of a format matplotlib lacks", [], ["--plot", ".png, .pdf, .svg"],
     ["{folder}", "{other}", "--plot", "{dir}/x.txt"]),
    ("plot into a missing folder", [], ["--plot", "no folder"], ["{folder}", "{other}", "--plot", "{dir}/no/x.png"]),
    ("second folder damaged", [], ["other", "collectives.csv", "no rows"], ["{folder}", "{other}"]),
    ("folder missing", [], ["nowhere", "no such results folder"], ["{dir}/nowhere"]),
    ("folder is a file", [], ["case.toml", "no such results folder"], ["{dir}/case.toml"]),
    # files that are no regular files: refused before they are opened
    ("collectives a named pipe", [("collectives.csv", FIFO)], ["collectives.csv", "a named pipe"]),
    ("collectives a folder", [("collectives.csv", FOLDER)], ["collectives.csv", "a folder, not a file"]),
    ("links a named pipe", [("links.csv", FIFO)], ["links.csv", "a named pipe"]),
    ("links a folder", [("links.csv", FOLDER)], ["links.csv", "a folder"]),
    ("steps a device", [("steps.csv", DEVICE)], ["steps.csv", "a character device"]),
    ("spec a named pipe", [("spec.json", FIFO)], ["spec.json", "a named pipe"]),
    ("fabric a named pipe", [(FABRIC, FIFO)], ["fabric.json", "a named pipe"]),
    ("fabric a device", [(FABRIC, DEVICE)], ["fabric.json", "a character device"]),
    # what the report would write is in the way
    ("a plot's name taken by a folder", [("heatmap.png", FOLDER)], ["heatmap.png", "no file"]),
    ("the summary's name taken by a named pipe", [("summary.txt", FIFO)], ["summary.txt", "no file"]),
    ("plot onto a folder", [("cmp.png", FOLDER)], ["--plot", "cmp.png", "a folder"],
     ["{folder}", "{other}", "--plot", "{folder}/cmp.png"]),
    # tables that contradict spec.json
    ("tables of another fabric", [spec_changed(runs={"topology": ["bigraph:m=2,n=4"] * 2})],
     ["collectives.csv", "topology 'bigraph:m=1,n=4'", "run 0 of spec.json has 'bigraph:m=2,n=4'"]),
    ("tables of more runs than spec.json", [spec_changed(runs={"*": 1})],
     ["collectives.csv", "run 1", "spec.json has 1 run(s)"]),
    ("tables of other sizes", [spec_changed(runs={"sizes": [["1M"], ["1M"]]})],
     ["collectives.csv", "size_bytes 8192", "sizes 1048576"]),
    ("tables of another algorithm", [spec_changed(runs={"algorithm": ["ring", "ring"]})],
     ["collectives.csv", "algorithm 'halving-doubling'", "run 1"]),
    ("links of a run spec.json lacks", [edit_cell("links.csv", "run", "7")], ["links.csv", "run 7"]),
    ("steps of another mapping", [edit_cell("steps.csv", "mapping", "hdrm")], ["steps.csv", "mapping 'hdrm'"]),
    ("spec link event record with an unknown key",
     [spec_changed(runs={"link_events": [[{"time_s": 1, "a": "bgs0", "b": "bgs1", "action": "down", "x": 1}]] * 2})],
     ["spec.json: run 1", "link_events", "not an event record"]),
    ("fabric rate NaN", [fabric_changed({"rate_mbps": float("nan")})], ["fabric.json", "rate_mbps = nan", "finite"]),
    ("fabric rate Infinity", [fabric_changed({"rate_mbps": float("inf")})], ["fabric.json", "rate_mbps = inf"]),
    ("fabric port negative", [fabric_changed({"a_port": -1})], ["fabric.json", "a_port = -1"]),
    ("fabric dpid of 5000 digits", [(FABRIC, lambda data: data.replace(b'"dpid": 1', b'"dpid": ' + b"9" * 5000, 1))],
     ["fabric.json", "not JSON"]),
    # damage the tables' types cannot show (emulator/results/damage.py)
    ("collectives with a byte-order mark", [("collectives.csv", lambda data: b"\xef\xbb\xbf" + data)],
     ["collectives.csv", "line 1", "byte-order mark"]),
    ("links with a byte-order mark", [("links.csv", lambda data: b"\xef\xbb\xbf" + data)],
     ["links.csv", "byte-order mark"]),
    ("steps that end before they start", [edit_cell("steps.csv", "end_s", "-1", 2)],
     ["steps.csv", "row 3", "ends at -1 s, before it starts"]),
    ("steps of a rank the run lacks", [edit_cell("steps.csv", "rank", "99", 1)],
     ["steps.csv", "row 2", "rank 99", "its run has 4"]),
    ("links of a call the run lacks", [edit_cell("links.csv", "call", "999")],
     ["links.csv", "row 1", "call 999"]),
    ("links of negative use", [edit_cell("links.csv", "util", "-0.5", 1)], ["links.csv", "row 2", "util -0.5", "negative"]),
    ("collectives of negative use", [edit_cell("collectives.csv", "max_link_util", "-1")],
     ["collectives.csv", "row 1", "max_link_util -1", "negative"]),
    ("link_jobs of negative bytes", [("link_jobs.csv", b"link,job,bytes\nl,a,-5\n")],
     ["link_jobs.csv", "row 1", "bytes -5", "negative"]),
    ("a pcap that claims more than it holds", [("x.pcap", PCAP_CUT), ("captures.csv", CAPTURES_OF_X)],
     ["x.pcap", "record 1 at byte 24", "claims 100 bytes", "holds 10 more"]),
    ("web: links of negative use", [edit_cell("links.csv", "util", "-0.5", 1)], ["links.csv", "row 2", "negative"],
     ["--web", "{folder}"]),
    ("web: steps of a rank the run lacks", [edit_cell("steps.csv", "rank", "99", 1)], ["steps.csv", "rank 99"],
     ["--web", "{folder}"]),
    # report --web of the demo's folder reads link_loads.csv (the web page is never served here)
    ("second folder of another fabric than its spec.json", [], ["other", "collectives.csv", "spec.json has"],
     ["{folder}", "{other}"]),
    ("web: demo link loads without their columns", [spec_changed(name="demo"), ("link_loads.csv", b"a,b\n1,2\n")],
     ["link_loads.csv", "no column mapping, max_flows_per_link"], ["--web", "{folder}"]),
    ("web: demo link loads of text", [spec_changed(name="demo"),
                                      ("link_loads.csv", b"mapping,max_flows_per_link\nnaive,many\n")],
     ["link_loads.csv", "line 2", "max_flows_per_link"], ["--web", "{folder}"]),
    ("web: link loads a named pipe", [spec_changed(name="demo"), ("link_loads.csv", FIFO)],
     ["link_loads.csv", "a named pipe"], ["--web", "{folder}"]),
]
REPORT_CASES = [case if len(case) == 4 else (*case, ["{folder}"]) for case in REPORT_CASES]

# what `exec` leaves: the program's ranks, links, fabric and summary, no collectives
AS_PROGRAM = [("collectives.csv", None), ("steps.csv", None), ("machine.csv", None),
              ("ranks.csv", b"run,rank,host,exit_code\n0,0,bgh0,0\n")]
# (case, changes of such a folder, words)
PROGRAM_REPORT_CASES = [
    ("program summary missing", [("summary.txt", None)], ["summary.txt", "No such file"]),
    ("program summary not UTF-8", [("summary.txt", b"\xff\xfe")], ["summary.txt", "not UTF-8"]),
    ("program summary a named pipe", [("summary.txt", FIFO)], ["summary.txt", "a named pipe"]),
    ("program links damaged", [edit_cell("links.csv", "util", "high")], ["links.csv", "util", "'high'"]),
    ("program fabric a folder", [(FABRIC, FOLDER)], ["fabric.json", "a folder"]),
    ("program plot's name taken by a folder", [("fabric.png", FOLDER)], ["fabric.png", "no file"]),
]


@pytest.fixture(scope="module")
def results_folder(tmp_path_factory):
    folder = str(tmp_path_factory.mktemp("good") / "res")
    good_folder(folder)
    return folder


def snapshot(folder: str) -> dict:
    """Every file under `folder` with its bytes (what is not a regular file,
    as what it is, never opened): what `report` must leave as it was."""
    files = {}
    for root, dirs, names in os.walk(folder):
        for name in dirs + names:
            path = os.path.join(root, name)
            if os.path.isfile(path):
                with open(path, "rb") as f:
                    files[os.path.relpath(path, folder)] = f.read()
            else:
                files[os.path.relpath(path, folder)] = os.stat(path).st_mode
    return files



def make(path, kind: str) -> None:
    if os.path.lexists(path):
        path.unlink()
    if kind == FIFO:
        os.mkfifo(path)
    elif kind == FOLDER:
        path.mkdir()
    else:
        path.symlink_to("/dev/zero")


def apply_changes(folder, changes) -> None:
    """Each change: deleted (None), replaced by bytes or by a function of the
    old bytes, or made a named pipe, a folder or a device."""
    for name, change in changes:
        path = folder / name
        if change is None:
            path.unlink()
        elif isinstance(change, str):
            make(path, change)
        else:
            path.write_bytes(change(path.read_bytes() if path.exists() else b"") if callable(change) else change)


def test_the_good_results_folder_reports(capsys, tmp_path, results_folder):
    """The control: the folder the bad cases damage is reported without complaint."""
    shutil.copytree(results_folder, tmp_path / "res")
    assert cli.main(["report", str(tmp_path / "res")]) == 0, capsys.readouterr().err
    assert (tmp_path / "res" / "summary.txt").read_text().count("bigraph:m=1,n=4") == 4


def test_a_workload_folder_as_run_writes_it_reports(capsys, tmp_path):
    """The checks take what the emulator's writers write for jobs too (jobs.csv, ops.csv, link_jobs.csv)."""
    folder = workload_folder(tmp_path)
    assert cli.main(["report", str(folder)]) == 0, capsys.readouterr().err
    assert {"jobs.png", "job_links.png", "summary.txt", "link_jobs.csv"} <= set(os.listdir(folder))


@pytest.mark.parametrize("name", ["jobs.csv", "ops.csv"])
def test_a_job_the_workload_lacks_is_refused(capsys, tmp_path, name):
    folder = workload_folder(tmp_path)
    file, change = edit_cell(name, "job", "ghost", 1)
    (folder / file).write_bytes(change((folder / file).read_bytes()))
    before = snapshot(str(folder))
    assert cli.main(["report", str(folder)]) == 2
    err = capsys.readouterr().err
    assert f"{name}: row 2: job 'ghost': the workload has no such job (it has stream, train)" in err
    assert snapshot(str(folder)) == before


def workload_folder(tmp_path):
    """A folder of the two-tenants workload as `run` writes it, from the model's step ends."""
    import dataclasses
    from emulator.plan.run_plan import plan_run
    from emulator.results.calls import CallRecord, write_call
    from emulator.spec.experiment import make_run
    workload = os.path.join(os.path.dirname(__file__), "..", "..", "experiments", "workloads", "two-tenants.toml")
    plan = plan_run(make_run({"workload": workload, "repetitions": 1, "warmup": 1}))
    folder = tmp_path / "jobs"
    folder.mkdir()
    (folder / "spec.json").write_text(json.dumps({"name": "t", "runs": [dataclasses.asdict(plan.spec)]}))
    ends = plan.predictions[0].step_end_s
    steps = [[{"start": min(ends[r][k - 1], ends[r][k]) if k else 0.0, "end": ends[r][k], "sent": sum(t.nbytes for t in s.sends),
               "received": sum(t.nbytes for t in s.recvs)} for k, s in enumerate(plan.schedules[0].steps[r])]
             for r in range(plan.ranks)]
    for call in plan.calls:
        write_call(str(folder), plan, call, CallRecord(steps, {}), "user")
    return folder


@pytest.mark.parametrize("case, changes, words, argv", REPORT_CASES, ids=[c[0] for c in REPORT_CASES])
def test_report_refuses_a_damaged_folder_and_changes_nothing(capsys, tmp_path, results_folder, case, changes,
                                                             words, argv):
    folder, other = tmp_path / "res", tmp_path / "other"
    shutil.copytree(results_folder, folder)
    shutil.copytree(results_folder, other)
    write_case(str(tmp_path), "case.toml", "")
    (folder / "summary.txt").write_text("an earlier summary\n")   # report must not overwrite it
    apply_changes(folder, changes)
    if case == "second folder damaged":
        (other / "collectives.csv").write_bytes(header_only("")[1]((other / "collectives.csv").read_bytes()))
    if case == "second folder of another fabric than its spec.json":
        name, change = spec_changed(runs={"topology": ["bigraph:m=2,n=4"] * 2})
        (other / name).write_bytes(change((other / name).read_bytes()))
    before, before_other = snapshot(str(folder)), snapshot(str(other))
    rc = cli.main(["report", *(a.format(folder=folder, dir=tmp_path, other=other) for a in argv)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith("bigraph-emu: error: ") and "Traceback" not in err
    for word in words:
        assert word in err, f"{word!r} not in {err!r}"
    assert snapshot(str(folder)) == before and snapshot(str(other)) == before_other, "report changed a file"
    assert sorted(os.listdir(tmp_path)) == ["case.toml", "other", "res"], "report created a file"


def test_a_program_folder_reports(capsys, tmp_path, results_folder):
    """The control of the cases below: `exec`'s folder, its summary printed as it is."""
    folder = tmp_path / "res"
    shutil.copytree(results_folder, folder)
    (folder / "summary.txt").write_text("the program's summary\n")
    apply_changes(folder, AS_PROGRAM)
    assert cli.main(["report", str(folder)]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out == "the program's summary\n"
    assert {"heatmap.png", "fabric.png"} <= set(os.listdir(folder))


@pytest.mark.parametrize("case, changes, words", PROGRAM_REPORT_CASES, ids=[c[0] for c in PROGRAM_REPORT_CASES])
def test_report_refuses_a_damaged_program_folder_before_writing(capsys, tmp_path, results_folder, case, changes,
                                                                words):
    folder = tmp_path / "res"
    shutil.copytree(results_folder, folder)
    (folder / "summary.txt").write_text("the program's summary\n")
    apply_changes(folder, AS_PROGRAM + changes)
    before = snapshot(str(folder))
    rc = cli.main(["report", str(folder)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert err.startswith("bigraph-emu: error: ") and "Traceback" not in err
    for word in words:
        assert word in err, f"{word!r} not in {err!r}"
    assert snapshot(str(folder)) == before, "report wrote before it failed"


# --- a second run while one holds the machine -------------------------------------------------

def test_a_second_run_is_refused_with_its_own_code_naming_the_run_that_holds_the_machine(capsys, monkeypatch,
                                                                                        tmp_path, folders):
    """The real `run` path up to the lock, which another run holds (a lock in
    this test's own folder: a real run elsewhere on this machine is never
    touched); bring-up is refused too, so nothing can be built even if the
    lock were taken. Exit code 4, the holder's process and results folder
    named, and no results folder left."""
    from emulator import emulation
    from emulator.net import processes
    monkeypatch.setattr(processes, "STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(processes, "LOCK_FILE", str(tmp_path / "state" / "lock"))
    monkeypatch.delenv(processes.LENT_LOCK_ENV, raising=False)
    monkeypatch.setattr(pipeline, "emulate", EMULATE)   # the guard's refusals undone: the real sequence runs
    monkeypatch.setattr(pipeline, "web_view", WEB_VIEW)   # without --web: no page
    monkeypatch.setattr(emulation.Emulation, "_bring_up", lambda self: pytest.fail("bring-up reached"))
    monkeypatch.setattr(cli.os, "geteuid", lambda: 0)
    first = str(tmp_path / "first-run.partial")
    with processes.RunLock(first):
        rc = cli.main(["run", "-t", "bigraph:m=1,n=2", "-b", "1K", "-n", "1", "--out", folders["out"]])
    err = capsys.readouterr().err
    assert rc == exit_codes.BUSY == 4 and rc in exit_codes.MEANINGS and rc not in (1, 2), err
    assert f"holds this machine: process {os.getpid()} (" in err and f"results in {first}" in err, err
    assert not os.path.exists(folders["out"]) and not os.path.exists(folders["out"] + preflight.PARTIAL)
