"""While a command runs: ksoftirqd/0 and /1's scheduler stats every 0.2 s (run ns, wait ns, slices);
prints, for the 0.2 s samples where they ran most, their run share and mean wait a slice."""
import subprocess
import sys
import time
pids = [int(subprocess.run(["pgrep", "-x", f"ksoftirqd/{c}"], capture_output=True, text=True).stdout) for c in (0, 1)]
def read():
    return [tuple(map(int, open(f"/proc/{p}/schedstat").read().split())) for p in pids]
proc = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL)
rows, prev, t_prev = [], read(), time.monotonic()
while proc.poll() is None:
    time.sleep(0.2)
    now, t = read(), time.monotonic()
    run = sum(b[0] - a[0] for a, b in zip(prev, now)) / 1e9
    wait = sum(b[1] - a[1] for a, b in zip(prev, now)) / 1e9
    slices = sum(b[2] - a[2] for a, b in zip(prev, now))
    rows.append((t - t_prev, run, wait, slices))
    prev, t_prev = now, t
busy = sorted(rows, key=lambda r: -r[1])[:40]   # the 8 s where they ran most
dt, run, wait, sl = (sum(r[i] for r in busy) for i in range(4))
print(f"busiest {dt:.1f} s: ksoftirqd ran {run / dt:.2f} of a core, waited {wait / dt:.2f} of a core, "
      f"{sl / dt:.0f} slices/s, mean wait a slice {wait / max(sl, 1) * 1e3:.2f} ms, longest-waiting sample "
      f"{max(r[2] / max(r[3], 1) for r in busy) * 1e3:.2f} ms a slice")
sys.exit(proc.returncode)
