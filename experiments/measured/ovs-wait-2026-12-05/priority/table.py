import sys, csv, glob, os, statistics, collections
for d in sorted(glob.glob(sys.argv[1] + '/*-collectives.csv')):
    rows = list(csv.DictReader(open(d)))
    by = collections.defaultdict(list)
    for r in rows: by[int(r['size_bytes'])].append(r)
    for size, rs in sorted(by.items()):
        f = lambda k: statistics.median(float(r[k]) for r in rs)
        ok = sum(r['fidelity'] == 'ok' or r['fidelity'].startswith('network') for r in rs)
        print(f"{os.path.basename(d)[:-16]:22} {size>>10:6}K  x{f('time_over_model'):.2f} (max {max(float(r['time_over_model']) for r in rs):.2f})  "
              f"ovs {f('ovs_cpu'):.2f} wait {f('ovs_wait'):.2f} cpu {f('cpu_busy'):.2f} probes {f('tcp_loss_probes'):.0f}  ok {ok}/{len(rs)}")
