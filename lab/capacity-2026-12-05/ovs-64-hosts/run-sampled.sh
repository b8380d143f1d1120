#!/bin/sh
# usage: run-sampled.sh OUT NAME bigraph-emu-run-args...   (from the project's folder, as root)
# Runs `bigraph-emu run ARGS --out OUT/NAME`, sampling Open vSwitch's datapath counters every 5 s into
# OUT/NAME-datapath-stats.txt (packets, cache hits, upcalls, datapath flows).
out=$1; name=$2; shift 2
.venv/bin/bigraph-emu run "$@" --out "$out/$name" > "$out/$name.log" 2>&1 &
pid=$!
while kill -0 $pid 2>/dev/null; do
  { date +%s; ovs-appctl dpif-netdev/pmd-stats-show; ovs-appctl upcall/show | head -8; } >> "$out/$name-datapath-stats.txt" 2>/dev/null
  sleep 5
done
wait $pid; echo "$name rc=$?"
