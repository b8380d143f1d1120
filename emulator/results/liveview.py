"""The live view (pure): what the terminal shows while a call runs, a bar
per busy link and the ranks' step progress, drawn from the latest sample."""
from __future__ import annotations

BAR = 30          # characters of a full bar (the link's configured rate)
SHOWN_LINKS = 8   # the busiest switch links


def bar(util: float, width: int = BAR) -> str:
    """"#" for the share of the link's rate used, capped at a full bar."""
    filled = min(width, round(util * width))
    return "#" * filled + "." * (width - filled)


def render(label: str, link_rows: list[dict], steps_done: list[int], steps_total: int, elapsed_s: float) -> str:
    """The view as lines of text: a header, the busiest switch links of the
    last interval with their queue, then step progress over the ranks."""
    lines = [f"{label}  t={elapsed_s:5.1f}s"]
    busy = sorted((r for r in link_rows if r["kind"] == "switch"), key=lambda r: (-r["util"], r["link"]))
    for r in busy[:SHOWN_LINKS]:
        queue = f" queue {r['backlog_bytes'] // 1000:4d} kB" if r["backlog_bytes"] else ""
        drops = f" drops {r['drops']}" if r["drops"] else ""
        lines.append(f"  {r['link']:>16} |{bar(r['util'])}| {r['util']:4.0%}{queue}{drops}")
    if steps_total:
        slowest, fastest = min(steps_done, default=0), max(steps_done, default=0)
        done = sum(steps_done) / (len(steps_done) * steps_total) if steps_done else 0.0
        lines.append(f"  steps  |{bar(done)}| {done:4.0%}  slowest rank at {slowest}/{steps_total}, "
                     f"fastest at {fastest}/{steps_total}")
    return "\n".join(lines)
