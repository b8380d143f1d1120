"""A lost server (its ssh connection ended) stops the run at once, though
its sessions' pipes may stay open (a session waiting on a silent peer):
the agents' waits notice it, and the teardown does not wait on its link
sampler or its run lock. Real processes stand in for the sessions and
never answer."""
import subprocess
import sys
import time

import pytest

from emulator.replay.agents import LOST_CHECK_S, AgentError, AgentFleet
from emulator.net.cluster import Servers
from emulator.measure.monitor import RemoteSampler

QUIET_UNTIL_EXIT = "import sys\nfor line in sys.stdin:\n if line == 'EXIT\\n': break"
HANGS_ON = "import time; print('{\"sent\": {}, \"received\": {}}', flush=True); time.sleep(60)"   # one reading


class SilentHost:
    """A host whose agent starts and says nothing until told to exit."""

    def popen(self, argv, **kw):
        return subprocess.Popen([sys.executable, "-c", QUIET_UNTIL_EXIT], **kw)


class LostServer:
    """A server whose connection has ended; its sessions hang on."""
    name = "198.19.255.2"
    alive = False

    @staticmethod
    def popen(argv, **kw):
        return subprocess.Popen([sys.executable, "-c", HANGS_ON], **kw)

    def close(self):
        pass


def _fleet(tmp_path, lost):
    return AgentFleet([SilentHost(), SilentHost()], ["10.0.0.1", "10.0.0.2"], [], str(tmp_path),
                      remote=[False, True], lost=lost)


def test_a_lost_server_ends_the_agents_wait_naming_it(tmp_path):
    gone = []
    fleet = _fleet(tmp_path, lambda: gone)
    try:
        started = time.monotonic()
        gone.append("198.19.255.2")
        with pytest.raises(AgentError, match=r"ssh connection to 198\.19\.255\.2 ended .* LISTENING"):
            fleet.start(timeout_s=30)
        assert time.monotonic() - started < 3 * LOST_CHECK_S   # not the 30 s the agents had
    finally:
        fleet.stop()


def test_without_a_lost_server_the_wait_runs_to_its_timeout(tmp_path):
    fleet = _fleet(tmp_path, lambda: [])
    try:
        with pytest.raises(AgentError, match=r"no LISTENING from ranks \[0, 1\] within 2s"):
            fleet.start(timeout_s=2)
    finally:
        fleet.stop()


def test_the_teardown_does_not_wait_on_a_lost_servers_sessions():
    server = LostServer()
    sampler = RemoteSampler(server, ["lo"], interval_s=30)
    servers = Servers("head", {server.name: server}, {}, "10.0.0.1")
    servers.locks[server.name] = server.popen([], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    lock = servers.locks[server.name]
    started = time.monotonic()
    sampler.stop()
    servers.close()
    assert time.monotonic() - started < 2   # each would wait 10 s on a server still reached
    assert sampler.proc.wait(timeout=1) and lock.wait(timeout=1)   # killed (a signal's code), not left running
