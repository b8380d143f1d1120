"""While a command runs: Open vSwitch's main thread's CPU time (its schedstat) about every millisecond,
written as "wall-clock-s run-ns" lines to OUT (first argument); the command follows."""
import subprocess
import sys
import threading
import time

pid = open("/var/run/openvswitch/ovs-vswitchd.pid").read().strip()
stat = f"/proc/{pid}/task/{pid}/schedstat"   # the main thread: its id is the process's
out, argv = sys.argv[1], sys.argv[2:]
samples, done = [], threading.Event()


def sample():
    with open(stat) as f:
        while not done.is_set():
            f.seek(0)
            samples.append((time.time(), int(f.read().split()[0])))
            time.sleep(0.0005)


threading.Thread(target=sample, daemon=True).start()
rc = subprocess.call(argv, stdout=subprocess.DEVNULL)
done.set()
with open(out, "w") as f:
    f.writelines(f"{t:.6f} {ns}\n" for t, ns in samples)
sys.exit(rc)
