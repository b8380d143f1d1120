"""This machine seen as a second server: an sshd of the test's own on
127.0.0.2 (its own port, keys and config in a temporary folder, nothing of
the machine's ssh setup touched), and an ssh config that reaches it as
root with a key, for the emulator's BIGRAPH_SSH_CONFIG. Stopped and
removed on exit, also when the test fails."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

SSHD = "/usr/sbin/sshd"
ADDRESS = "127.0.0.2"
PRIVSEP = "/run/sshd"   # sshd refuses to start without it


def available() -> bool:
    return os.path.exists(SSHD) and shutil.which("ssh-keygen") is not None and os.geteuid() == 0


class LoopbackServer:
    def __init__(self):
        self.folder = tempfile.mkdtemp(prefix="bigraph-sshd-")
        self.config = os.path.join(self.folder, "ssh_config")
        self.proc: subprocess.Popen | None = None
        self.made_privsep = False

    def __enter__(self) -> "LoopbackServer":
        try:
            self._start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _start(self) -> None:
        f = self.folder
        for key in ("host", "id"):
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{f}/{key}"], check=True)
        shutil.copy(f"{f}/id.pub", f"{f}/authorized_keys")
        with socket.socket() as s:
            s.bind((ADDRESS, 0))
            port = s.getsockname()[1]
        with open(f"{f}/sshd_config", "w") as out:
            out.write(f"Port {port}\nListenAddress {ADDRESS}\nHostKey {f}/host\nAuthorizedKeysFile {f}/authorized_keys\n"
                      f"PermitRootLogin prohibit-password\nPasswordAuthentication no\nUsePAM no\nStrictModes no\n"
                      f"PidFile {f}/sshd.pid\nAcceptEnv LANG\n")
        with open(self.config, "w") as out:
            out.write(f"Host {ADDRESS}\n  Port {port}\n  User root\n  IdentityFile {f}/id\n  IdentitiesOnly yes\n"
                      f"  UserKnownHostsFile {f}/known_hosts\n  StrictHostKeyChecking accept-new\n")
        if not os.path.isdir(PRIVSEP):
            os.makedirs(PRIVSEP, mode=0o755)
            self.made_privsep = True
        self.proc = subprocess.Popen([SSHD, "-D", "-f", f"{f}/sshd_config", "-E", f"{f}/sshd.log"])
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex((ADDRESS, port)) == 0:
                    return
            time.sleep(0.05)
        raise RuntimeError(f"sshd on {ADDRESS}:{port} did not listen: {open(f + '/sshd.log').read()[-500:]}")

    def kill_sessions(self) -> None:
        """SIGKILL every ssh session this sshd serves (its child processes and
        theirs): to the emulator, its server is gone."""
        for pid in _descendants(self.proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def env(self) -> dict:
        from emulator.net.cluster import SSH_CONFIG_ENV
        return {**os.environ, SSH_CONFIG_ENV: self.config}

    def __exit__(self, *exc) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill_sessions()
            self.proc.terminate()
            self.proc.wait(timeout=10)
        if self.made_privsep:
            shutil.rmtree(PRIVSEP, ignore_errors=True)
        shutil.rmtree(self.folder, ignore_errors=True)


def _descendants(pid: int) -> list[int]:
    """Every process below `pid`, children first (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parent = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            children.setdefault(parent, []).append(int(entry))
    out, todo = [], list(children.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out
