"""Link time series (pure): which kernel counters describe each directed
link, and how counter samples become rows of links.csv and machine.csv.

Every directed link is read from the switch side, in the root namespace,
so one `tc` call and a few /sys reads per sample cover the whole fabric:
- a switch's egress (towards a switch or a host) is its port's qdisc: bytes
  and packets sent, backlog, drops;
- a host's egress (its NIC towards its switch) is the switch port's receive
  counter; its queue lives in the host's namespace and is not sampled.
"""
from __future__ import annotations

from emulator.fabric.graph import Fabric
from emulator.records.links import DirectedLink, Sample


def _reading(link: DirectedLink, s: Sample) -> tuple[int, int, int, int, int] | None:
    """(bytes, packets, backlog, drops, marks) of a link in a sample; None if
    absent. A host's egress has no sampled queue: backlog, drops and marks read 0."""
    if link.egress:
        return s.sent.get(link.dev)
    got = s.received.get(link.dev)
    return None if got is None else (got[0], got[1], 0, 0, 0)


def link_rows(call: int, links: list[DirectedLink], samples: list[Sample], t0: float) -> list[dict]:
    """One row per directed link per sample interval; t_s is the interval's
    end, in seconds since `t0` (the call's start)."""
    rows = []
    for a, b in zip(samples, samples[1:]):
        dt = b.t - a.t
        if dt <= 0:
            continue
        for link in links:
            ra, rb = _reading(link, a), _reading(link, b)
            if ra is None or rb is None:
                continue
            sent = rb[0] - ra[0]
            rows.append({"call": call, "t_s": round(b.t - t0, 6), "link": link.label, "node": link.node,
                         "port": link.port, "peer": link.peer, "kind": link.kind,
                         "scope": link.scope, "rate_mbps": link.rate_mbps, "tx_bytes": sent, "tx_packets": rb[1] - ra[1],
                         "util": round(sent * 8 / (dt * link.rate_mbps * 1e6), 4), "backlog_bytes": rb[2],
                         "drops": rb[3] - ra[3], "marks": rb[4] - ra[4]})
    return rows


def port_rows(call: int, readings: list[dict], t0: float, t1: float, fabric: Fabric) -> list[dict]:
    """ports.csv rows of one call: the controller's readings (rows of
    PORT_READING_COLUMNS, as text or numbers) taken from `t0`, the call's
    start, to `t1`, its end; `t_s` is seconds since `t0`."""
    rows = []
    for r in readings:
        t = float(r["t"])
        if t0 <= t <= t1:
            switch, port = r["switch"], int(r["port"])
            rows.append({"call": call, "t_s": round(t - t0, 6), "switch": switch, "port": port,
                         "peer": fabric.peer(switch, port)[0], "tx_bytes": int(r["tx_bytes"]),
                         "rx_bytes": int(r["rx_bytes"]), "tx_dropped": int(r["tx_dropped"])})
    return rows


def machine_rows(call: int, samples: list[Sample], t0: float, ticks_per_s: float) -> list[dict]:
    """CPU use of the machine and of ovs-vswitchd per sample interval."""
    rows = []
    for a, b in zip(samples, samples[1:]):
        dt = b.t - a.t
        if dt <= 0:
            continue
        shares = _cpu_between(a, b, ticks_per_s)
        rows.append({"call": call, "t_s": round(b.t - t0, 6), **{k: round(v, 4) for k, v in shares.items()}})
    return rows


def _cpu_between(a: Sample, b: Sample, ticks_per_s: float) -> dict[str, float]:
    """Between two samples: all cores' busy share and the share a hypervisor
    stole of them, ovs-vswitchd's share of one core, and the share of the
    time its forwarding thread waited for a core."""
    dt, jiffies = max(1e-9, b.t - a.t), max(1, b.cpu_total - a.cpu_total)
    return {"cpu_busy": (b.cpu_busy - a.cpu_busy) / jiffies, "cpu_stolen": (b.cpu_stolen - a.cpu_stolen) / jiffies,
            "ovs_cpu": (b.ovs_ticks - a.ovs_ticks) / ticks_per_s / dt, "ovs_wait": (b.ovs_wait_s - a.ovs_wait_s) / dt}


def machine_totals(first: Sample, last: Sample, ticks_per_s: float) -> dict:
    """What the machine and the switch queues did over a whole call."""
    before = {dev: first.sent.get(dev, (0,) * 5) for dev in last.sent}
    drops = {dev: q[3] - before[dev][3] for dev, q in last.sent.items()}
    worst = max(drops, key=drops.get, default="")
    return {**_cpu_between(first, last, ticks_per_s), "queue_drops": sum(drops.values()),
            "queue_marks": sum(q[4] - before[dev][4] for dev, q in last.sent.items()),
            "most_drops_port": worst if drops.get(worst) else ""}


def window_counters(samples: list[Sample], t0: float, ticks_per_s: float, link_rows: list[dict], mtu: int,
                    start_s: float, end_s: float) -> dict:
    """The machine's, the queues' and the links' figures of a call between
    two instants (seconds since `t0`, the call's start), as machine_totals
    and call_figures give them for a whole call, and the hosts' TCP counters
    where the samples hold them: from the last sample at or before
    `start_s` to the first at or after `end_s` (up to a sample interval more
    on either side)."""
    first = max((s for s in samples if s.t - t0 <= start_s), key=lambda s: s.t, default=samples[0])
    last = min((s for s in samples if s.t - t0 >= end_s), key=lambda s: s.t, default=samples[-1])
    figures = machine_totals(first, last, ticks_per_s)
    if first.tcp and last.tcp:
        figures.update({column: last.tcp[column] - first.tcp[column] for column in last.tcp})
    # link rows are stamped with their interval's end, rounded to the microsecond
    rows = [r for r in link_rows if first.t - t0 + 1e-6 < r["t_s"] <= last.t - t0 + 1e-6]
    return {**figures, **call_figures(rows, last.t - first.t, mtu)}


# --- per-call figures from the rows ----------------------------------------

SATURATED_BACKLOG = 2   # frames queued at both ends of an interval: the link had work all along


def utilisation(rows: list[dict], duration_s: float, kind: str = "switch") -> tuple[float, float]:
    """(max, mean) over the links of `kind` of what each carried during a
    call of `duration_s`, as a fraction of its rate."""
    sent, rate = {}, {}
    for r in rows:
        if r["kind"] == kind:
            sent[r["link"]] = sent.get(r["link"], 0) + r["tx_bytes"]
            rate[r["link"]] = r["rate_mbps"]
    if not sent or duration_s <= 0:
        return 0.0, 0.0
    util = [sent[l] * 8 / (duration_s * rate[l] * 1e6) for l in sent]
    return max(util), sum(util) / len(util)


def saturated_rate(rows: list[dict], mtu: int) -> float | None:
    """Median utilisation of links over intervals in which their queue held
    work at both ends (so they should have sent at full rate): Mininet-HiFi's
    check that shaped links really run at their configured rate. None when no
    link was saturated long enough to tell."""
    backlog = SATURATED_BACKLOG * (mtu + 14)
    previous, utils = {}, []
    for r in sorted(rows, key=lambda r: (r["link"], r["t_s"])):
        if previous.get(r["link"], 0) >= backlog and r["backlog_bytes"] >= backlog:
            utils.append(r["util"])
        previous[r["link"]] = r["backlog_bytes"]
    if not utils:
        return None
    utils.sort()
    return utils[len(utils) // 2]


def call_figures(rows: list[dict], duration_s: float, mtu: int) -> dict:
    """The link figures collectives.csv keeps per call."""
    peak, mean = utilisation(rows, duration_s)
    return {"max_link_util": round(peak, 4), "mean_link_util": round(mean, 4),
            "saturated_util": saturated_rate(rows, mtu)}
