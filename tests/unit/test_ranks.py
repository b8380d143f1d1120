"""The ranks of `bigraph-emu exec` (pure): slots, environment, hostfile,
mpiexec's command line and launcher, and what the ranks left; and
emulator.replay.rank, the wrapper every rank runs under (no root)."""
import json
import os
import shlex
import stat
import subprocess
import sys
import time

import pytest

from emulator import execute

from emulator.plan import ranks as R
from emulator.spec.experiment import SpecError, make_run


def eight():
    spec = make_run({"topology": "bigraph:m=2,n=4", "mapping": "hdrm"})
    from emulator.plan.run_plan import plan_run
    plan = plan_run(spec)
    return R.slots(plan.fabric, plan.hosts)


def test_slots_follow_the_mapping_and_name_the_fabric_interface():
    slots = eight()
    assert [s.rank for s in slots] == list(range(8))
    assert len({s.host for s in slots}) == 8 and slots[3].interface == f"{slots[3].host}-eth0"
    assert R.hostfile_text(slots).splitlines() == [s.address for s in slots]


def test_every_rank_gets_what_torch_env_init_needs():
    slots = eight()
    env = R.rank_env(slots, 5, "/r/hostfile", "/r/ranks/5")
    assert env["RANK"] == "5" and env["WORLD_SIZE"] == "8" and env["LOCAL_RANK"] == "0"
    assert env["MASTER_ADDR"] == slots[0].address and env["MASTER_PORT"] == str(R.MASTER_PORT)
    assert env["GLOO_SOCKET_IFNAME"] == env["NCCL_SOCKET_IFNAME"] == slots[5].interface
    assert env["BIGRAPH_HOSTFILE"] == "/r/hostfile" and env["TMPDIR"] == "/r/ranks/5"


def test_one_rank_per_host():
    with pytest.raises(ValueError, match="bgh1"):
        R.check_one_rank_per_host(["bgh0", "bgh1", "bgh1"])
    R.check_one_rank_per_host(["bgh0", "bgh1"])


def test_mpiexec_runs_one_block_per_rank_on_its_host_in_rank_order():
    slots = eight()[:3]
    argv = R.mpiexec_argv("/v/mpiexec", "/r/launcher.sh", slots, "/v/python", "/r", "/r/hostfile", ["prog", "-x"])
    assert argv[:7] == ["/v/mpiexec", "-launcher", "rsh", "-launcher-exec", "/r/launcher.sh", "-f", "/r/hostfile"]
    blocks = " ".join(argv[7:]).split(" : ")
    assert len(blocks) == 3
    for slot, block in zip(slots, blocks):
        assert block.startswith("-n 1 -env ")
        assert f"-env RANK {slot.rank} " in block and f"-env FI_TCP_IFACE {slot.interface} " in block
        assert block.endswith(f"/v/python -m emulator.replay.rank --dir /r/ranks/{slot.rank} -- prog -x")


def test_mpich_ranks_yield_unless_the_user_chose(monkeypatch):
    """Polling ranks share the machine's cores; yielding is the default, a user's own setting wins."""
    slot = eight()[0]
    assert R.mpi_env(slot, environ={})[R.YIELD] == "1"
    assert R.YIELD not in R.mpi_env(slot, environ={R.YIELD: "0"})
    monkeypatch.setenv(R.YIELD, "0")   # inherited by mpiexec and its ranks, not overridden by -env
    argv = R.mpiexec_argv("/v/mpiexec", "/r/launcher.sh", [slot], "/v/python", "/r", "/r/hostfile", ["prog"])
    assert R.YIELD not in argv


def test_the_launcher_enters_the_host_named_like_ssh(tmp_path):
    """hydra calls it as rsh (or ssh, with options): the host, then the command."""
    fake = tmp_path / "mnexec"
    fake.write_text('#!/bin/sh\necho "mnexec $*"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    script = tmp_path / "launcher.sh"
    script.write_text(R.launcher_script({"198.18.0.2": 4242, "198.18.0.3": 4343}))
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    got = subprocess.run(["sh", str(script), "-x", "198.18.0.3", "proxy --port 5"], capture_output=True,
                         text=True, env=env)
    assert got.stdout.strip() == "mnexec -a 4343 /bin/sh -c proxy --port 5"
    got = subprocess.run(["sh", str(script), "10.9.9.9", "x"], capture_output=True, text=True, env=env)
    assert got.returncode == 255 and "no emulated host 10.9.9.9" in got.stderr


def test_the_launcher_reaches_a_host_on_another_server_through_ssh_quoting_the_command(tmp_path):
    """The server's shell reads the command line again: quotes in it survive."""
    fake_ssh = tmp_path / "fakessh"   # runs its last word with sh, as ssh hands it to the server's shell
    fake_ssh.write_text('#!/bin/sh\nfor last; do :; done\nexec sh -c "$last"\n')
    fake = tmp_path / "mnexec"   # mnexec -a PID CMD...: runs CMD
    fake.write_text('#!/bin/sh\nshift 2\nexec "$@"\n')
    nsenter = tmp_path / "nsenter"   # nsenter --net=...: runs the rest
    nsenter.write_text('#!/bin/sh\nshift\nexec "$@"\n')
    for f in (fake_ssh, fake, nsenter):
        f.chmod(f.stat().st_mode | stat.S_IEXEC)
    script = tmp_path / "launcher.sh"
    script.write_text(R.launcher_script({"198.18.0.2": 1, "198.18.0.9": 2},
                                        {"198.18.0.9": [str(fake_ssh), "-o", "ControlPath=/x", "root@lab2"]}))
    env = {**os.environ, "PATH": f"{tmp_path}:{os.environ['PATH']}"}
    got = subprocess.run(["sh", str(script), "198.18.0.9", "printf '%s|' a\\'b \"c d\""], capture_output=True,
                         text=True, env=env)
    assert got.stdout == "a'b|c d|", got.stderr


def test_a_rank_on_another_server_gets_its_environment_and_words_quoted_for_its_shell():
    argv = R.over_ssh({"RANK": "3", "X": "a b"}, ["python3", "-c", "print('hi')"])
    assert shlex.split(" ".join(argv)) == ["env", "RANK=3", "X=a b", "python3", "-c", "print('hi')"]


def test_mpiexec_gives_a_rank_on_another_server_its_folder_and_hostfile_there():
    slots = eight()[:2]
    argv = R.mpiexec_argv("/v/mpiexec", "/r/launcher.sh", slots, "/v/python", "/r", "/r/hostfile", ["prog"],
                          away={1: "/tmp/away"})
    first, second = " ".join(argv[7:]).split(" : ")
    assert "-env BIGRAPH_HOSTFILE /r/hostfile " in first and first.endswith("--dir /r/ranks/0 -- prog")
    assert "-env BIGRAPH_HOSTFILE /tmp/away/hostfile " in second and "-env TMPDIR /tmp/away/ranks/1 " in second
    assert second.endswith("--dir /tmp/away/ranks/1 -- prog")


def test_rank_rows_and_failures_name_the_rank_code_and_stderr(tmp_path):
    slots = eight()[:3]
    for rank, code in ((0, 0), (1, 3)):
        folder = tmp_path / "ranks" / str(rank)
        folder.mkdir(parents=True)
        (folder / "exit.json").write_text(json.dumps({"exit_code": code, "start": 10.0, "end": 12.5}))
    (tmp_path / "ranks" / "1" / "stderr").write_text("".join(f"line {i}\n" for i in range(20)))
    exits = [R.read_exit(str(tmp_path), r) for r in range(3)]
    cpu = {slots[0].host: (1.23456, 0.5), slots[1].host: (0.25, 2.0)}   # the third host's not read (remote)
    rows = R.rank_rows(0, slots, exits, 9.0, "x", cpu)
    assert [(r["exit_code"], r["start_s"], r["end_s"]) for r in rows] == [(0, 1.0, 3.5), (3, 1.0, 3.5), ("", "", "")]
    assert [(r["cpu_s"], r["cpu_wait_s"]) for r in rows] == [(1.235, 0.5), (0.25, 2.0), ("", "")]
    assert list(rows[0]) == R.RANK_COLUMNS
    failed = R.failures(str(tmp_path), exits)
    assert failed[0].startswith("rank 1 exited with code 3") and "line 19" in failed[0] and "line 11" not in failed[0]
    assert failed[1] == "rank 2 did not finish"


def run_wrapper(tmp_path, *command):
    folder = tmp_path / "rank"
    code = subprocess.run([sys.executable, "-m", "emulator.replay.rank", "--dir", str(folder), "--", *command]).returncode
    return code, folder, json.loads((folder / "exit.json").read_text())


def test_the_wrapper_keeps_outputs_and_exit_code(tmp_path):
    code, folder, done = run_wrapper(tmp_path, sys.executable, "-c",
                                     "import os, sys; print(os.getcwd()); sys.stderr.write('err'); sys.exit(7)")
    assert code == 7 and done["exit_code"] == 7 and done["end"] >= done["start"]
    assert (folder / "stdout").read_text().strip() == str(folder) and (folder / "stderr").read_text() == "err"


def test_the_wrapper_reports_a_missing_program_as_127(tmp_path):
    code, folder, done = run_wrapper(tmp_path, str(tmp_path / "nothing-here"))
    assert code == 127 == done["exit_code"] and "cannot start" in (folder / "stderr").read_text()


def test_the_wrapper_passes_sigterm_on(tmp_path):
    folder = tmp_path / "rank"
    proc = subprocess.Popen([sys.executable, "-m", "emulator.replay.rank", "--dir", str(folder), "--", "sleep", "30"])
    for _ in range(100):   # until the wrapper has started its child
        if (folder / "stdout").exists():
            break
        subprocess.run(["sleep", "0.05"])
    subprocess.run(["sleep", "0.3"])
    proc.terminate()
    assert proc.wait(timeout=10) == 143
    assert json.loads((folder / "exit.json").read_text())["exit_code"] == 143


@pytest.mark.parametrize("values, command, message", [
    ({"algorithm": "ring"}, ["true"], "algorithm: exec runs your program"),
    ({"sizes": "1M"}, ["true"], "sizes: exec runs your program"),
    ({"policy": "traffic-aware"}, ["true"], "routes a workload's demands"),
    ({}, [], "give the program after '--'"),
    ({}, ["no-such-program-here"], "'no-such-program-here' is not a program"),
    ({"topology": "bigraph:m=2,n=4", "ranks": "9"}, ["true"], "ranks"),
])
def test_exec_refuses_bad_input_before_anything(tmp_path, values, command, message):
    with pytest.raises(SpecError, match=message):
        execute.prepare(values, command, False, None, str(tmp_path / "out"))


def test_the_wrapper_counts_its_programs_cpu(tmp_path):
    """What the head reads of a rank on another server: the wrapper's rusage of CMD."""
    folder = tmp_path / "ranks" / "0"
    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-m", "emulator.replay.rank", "--dir", str(folder), "--", sys.executable, "-c",
                    burn], check=True)
    assert R.read_exit(str(tmp_path), 0).cpu_s >= 0.3
    assert not (tmp_path / "out").exists()


def test_exec_refuses_a_timeout_of_nothing(tmp_path):
    with pytest.raises(SpecError, match="--timeout"):
        execute.prepare({}, ["true"], False, 0, str(tmp_path / "out"))


def test_a_threads_cpu_and_wait_are_read_from_the_kernel():
    import threading
    from emulator.measure import counters
    stop = threading.Event()
    waiter = threading.Thread(target=lambda: stop.wait(5))
    waiter.start()
    try:
        before = counters.thread_cpu(os.getpid())
        deadline = time.process_time() + 0.2
        while time.process_time() < deadline:   # this thread on a core for 0.2 s, the other asleep
            pass
        after = counters.thread_cpu(os.getpid())
    finally:
        stop.set()
        waiter.join()
    me = threading.get_native_id()
    assert waiter.native_id in after and me in after     # every thread of the process, by its id
    assert after[me][0] - before[me][0] >= 0.19 and all(wait >= 0 for _, wait in after.values())
    assert counters.thread_cpu(2 ** 22 + 1) == {}           # no such process


def test_the_summary_gives_the_ranks_share_of_the_machine():
    line = execute.cpu_line({"bgh0": (1.5, 3.0), "bgh1": (0.5, 1.0)}, 2.0)
    assert "(2 hosts on this machine): 2.00 s on a core (1.00 of one over the program)" in line
    assert "4.00 s runnable but waiting for one (2.00 threads waiting on average)" in line


def test_the_program_s_cpu_is_each_rank_s_larger_count_on_this_machine():
    slots = eight()[:3]
    exits = [R.RankExit(0, 0, 1.0, 1.2, 0.05), R.RankExit(1, 0, 1.0, 1.2, 0.30), R.RankExit(2, 0, 1.0, 1.2, 9.0)]
    cpu = {slots[0].host: (0.12, 0.0), slots[1].host: (0.10, 0.0)}   # the third host's on another server
    assert R.program_cpu_s(slots, exits, cpu) == pytest.approx(0.12 + 0.30)   # polled, rusage; not the remote one
    assert R.program_cpu_s(slots, [R.RankExit(r, None, None, None) for r in range(3)], cpu) == pytest.approx(0.22)


def test_exec_s_verdict_judges_what_ran_beside_the_program():
    from emulator.results.verdict import machine_failed, program_fidelity, trusted
    links = {"saturated_util": 0.98, "cpu_stolen": 0.0}
    # a 2-core machine 94% busy over 2 s (4 core-seconds), the program's ranks 1.6 of them: 54% beside it
    assert program_fidelity({**links, "cpu_busy": 0.94}, 2.0, 1.6, 4.0) == "ok"
    busy = program_fidelity({**links, "cpu_busy": 0.97}, 2.0, 0.2, 4.0)
    assert busy == "FAIL: machine busy beside the program (CPU idle 3%, the ranks' own processes 5% of it)"
    assert machine_failed(busy) and not trusted(busy)
    assert program_fidelity({**links, "cpu_busy": 0.97}, 2.0, 0.0, 4.0).startswith("FAIL: machine busy")
    slow = program_fidelity({"saturated_util": 0.7, "cpu_busy": 0.2}, 2.0, 0.1, 4.0)
    assert slow == "FAIL: saturated links ran at 70% of their rate"


def test_exec_s_verdict_leaves_a_window_under_a_second_unjudged_and_says_so():
    from emulator.results.verdict import program_fidelity, trusted
    # `sh -c 'echo $RANK > FILE'` on 8 ranks: 0.24 s, the machine 94% busy with their start, little counted
    short = program_fidelity({"saturated_util": None, "cpu_busy": 0.94}, 0.24, 0.05, 0.48)
    assert short == "ok (window 0.24 s too short to judge the machine)" and trusted(short)
    assert program_fidelity({"saturated_util": 0.7, "cpu_busy": 0.94}, 0.24, 0.05, 0.48) == (
        "FAIL: saturated links ran at 70% of their rate; window 0.24 s too short to judge the machine")
    assert program_fidelity({"saturated_util": None, "cpu_busy": 0.94}, 1.0, 0.05, 2.0).startswith("FAIL")
