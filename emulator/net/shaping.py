"""Link shaping with Linux tc: an HTB class at the link rate and a packet
FIFO of the configured depth under it (the queue a switch port would have).

HTB is used rather than TCLink's defaults because TCLink caps rates at
1000 Mbit/s, fixes a 15 KB burst and needs netem for queue depth.
"""
from __future__ import annotations

from emulator.fabric.queues import BURST_MS, FIFO, Discipline, default_threshold

# With TSO, hosts send segments of at most a burst, and no more than GSO allows.
GSO_MAX_BYTES = 65536
# ...and at most this share of the smallest queue: a queue of 100 frames at
# MTU 1500 holds two 64 KB segments, and each drop cost TCP 43 frames at once
# (calibrated links ran 1.2-1.3x the model with losses from 107 Mbit/s on).
QUEUE_SEGMENTS = 8


def burst_bytes(rate_mbps: float, mtu: int) -> int:
    return max(2 * (mtu + 14), int(rate_mbps * 1e6 / 8 * BURST_MS / 1000))


def segment_bytes(rate_mbps: float, mtu: int, queue_packets: int) -> int:
    """Largest TSO segment a host may send on links of `rate_mbps` with
    queues of `queue_packets` frames (at least one frame)."""
    return max(mtu, min(GSO_MAX_BYTES, burst_bytes(rate_mbps, mtu), queue_packets * mtu // QUEUE_SEGMENTS))


def tc_batch(commands: list[list[str]]) -> list[str]:
    """`tc -batch` lines for tc argument lists: one process for many commands."""
    return [" ".join(argv[1:]) for argv in commands]


def tc_commands(dev: str, rate_mbps: float, queue_packets: int, mtu: int,
                delay_ms: float = 0.0, loss_pct: float = 0.0, tso: bool = False,
                discipline: Discipline = FIFO, threshold: int = 0) -> list[list[str]]:
    """tc argument lists that shape egress of `dev` (root handle 1:): HTB
    at the rate, the discipline's queue under it. With delay or loss,
    netem takes the queue's place under HTB: its own queue of the same
    depth holds the packets, each `delay_ms` late, `loss_pct` lost (the
    spec allows it with fifo only). tso: packets are TSO segments of up to
    a burst."""
    rate = f"{rate_mbps}mbit"
    burst = str(burst_bytes(rate_mbps, mtu))
    return [
        ["tc", "qdisc", "replace", "dev", dev, "root", "handle", "1:", "htb", "default", "1"],
        ["tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", "htb",
         "rate", rate, "ceil", rate, "burst", burst, "cburst", burst],
        ["tc", "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:",
         *_queue(queue_packets, mtu, delay_ms, loss_pct, tso, discipline, threshold, rate_mbps)],
    ]


def loss_commands(dev: str, queue_packets: int, mtu: int, delay_ms: float, loss_pct: float,
                  tso: bool = False) -> list[list[str]]:
    """The queue of tc_commands again, now with its netem loss: set once the
    fabric is verified, since the verification's pings and probes must all
    arrive."""
    return [["tc", "qdisc", "replace", "dev", dev, "parent", "1:1", "handle", "10:",
             *_queue(queue_packets, mtu, delay_ms, loss_pct, tso)]]


def _queue(queue_packets: int, mtu: int, delay_ms: float, loss_pct: float, tso: bool,
           discipline: Discipline = FIFO, threshold: int = 0, rate_mbps: float = 0.0) -> list[str]:
    if not delay_ms and not loss_pct:
        return discipline.qdisc(queue_packets, mtu + 14, rate_mbps, threshold or default_threshold(queue_packets), tso)
    return ["netem", "limit", str(queue_packets), "delay", f"{delay_ms}ms", "loss", f"{loss_pct}%"]
