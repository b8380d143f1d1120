"""`bigraph-emu cli` as a student uses it: Mininet's prompt on a terminal,
commands that print, 'exit' that tears everything down."""
import sys

import pytest

from emulator.fabric.topology import build
from terminal import Terminal

pytestmark = pytest.mark.emulation


def test_the_cli_prints_and_exit_leaves_nothing(tmp_path, clean_machine):
    fabric = build("bigraph:m=2,n=4")
    last = fabric.hosts[-1]
    term = Terminal([sys.executable, "-m", "emulator.cli", "cli", "-t", "bigraph:m=2,n=4",
                     "--out", str(tmp_path / "cli")])
    try:
        at = term.expect("mininet>")
        term.type("nodes\n")
        at = term.expect("bgs3", since=at)   # Mininet lists hosts, then switches
        listing = term.text()[:at]
        assert all(h.name in listing for h in fabric.hosts), listing
        at = term.expect("mininet>", since=at)
        term.type(f"bgh0 ping -c2 {last.ip}\n")
        at = term.expect(f"bytes from {last.ip}", since=at)
        at = term.expect("2 received", since=at)
        # the prompt first: what is typed while a host's command runs goes to that host's shell
        # (Mininet's CLI forwards it), so an early 'exit' would end bgh0's shell, not the CLI
        term.expect("mininet>", since=at)
        term.type("exit\n")
        # a guard against a hang, not a timing: teardown under software emulation (the VM stage) took over 60 s
        assert term.wait(timeout_s=180) == 0, term.text()
        for chatter in ("*** Creating network", "*** Adding", "*** Configuring", "*** Stopping"):
            assert chatter not in term.text(), f"Mininet's bring-up or teardown chatter came back: {chatter}"
    finally:
        term.close()
    # clean_machine checks that no bridge, link or recorded process is left


def test_closing_the_terminal_of_the_cli_tears_everything_down(tmp_path, clean_machine):
    term = Terminal([sys.executable, "-m", "emulator.cli", "cli", "-t", "bigraph:m=2,n=4",
                     "--out", str(tmp_path / "cli")])
    try:
        term.expect("mininet>")
        term.hang_up()   # the window closed, or the ssh connection dropped
        assert term.wait(timeout_s=60) == 130
    finally:
        term.close()
    # clean_machine checks that no bridge, link or recorded process is left
