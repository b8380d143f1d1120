"""Per run of the VM experiment: the calls' time over the model and verdict, queue drops, the hosts'
retransmissions (spurious), and in the captures' packets: retransmitted and out of order; the backlogs'
packets per CPU and drops. Usage: summarize.py OUT RUN..."""
import csv
import sys

out = sys.argv[1]
print("| run | calls: time over the model | queue drops | hosts' retransmissions (spurious) | captured packets | "
      "retransmitted | out of order | backlog packets per CPU | backlog drops |")
print("|---|---|---|---|---|---|---|---|---|")
for name in sys.argv[2:]:
    rows = list(csv.DictReader(open(f"{out}/run-{name}/collectives.csv")))
    flows = list(csv.DictReader(open(f"{out}/run-{name}/capture_flows.csv")))
    total = {k: sum(int(float(f[k] or 0)) for f in flows) for k in ("packets", "retransmissions", "out_of_order")}
    before, after = ([[int(x, 16) for x in line.split()] for line in open(f"{out}/softnet-{w}-{name}.txt")]
                     for w in ("before", "after"))
    per_cpu = [a[0] - b[0] for a, b in zip(after, before)]
    drops = sum(a[1] - b[1] for a, b in zip(after, before))
    ratios = ", ".join(f"{float(r['time_over_model']):.2f}" for r in rows)
    print(f"| {name} | {ratios} | "
          f"{sum(int(r['queue_drops'] or 0) for r in rows)} | {sum(int(r['tcp_retrans'] or 0) for r in rows)} "
          f"({sum(int(r['tcp_spurious'] or 0) for r in rows)}) | {total['packets']} | {total['retransmissions']} | "
          f"{total['out_of_order']} | {' / '.join(map(str, per_cpu))} | {drops} |")
