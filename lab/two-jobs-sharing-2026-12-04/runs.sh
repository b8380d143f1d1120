#!/bin/sh
# Two 4-rank ring allreduces of 4 MiB at once on bigraph:m=2,n=4 at 20 Mbit/s, five runs per setting.
# usage: runs.sh OUT_DIR   (from the project's folder, as root)
out=$1; here=$(dirname "$0")
for setting in "default:" "queue20-:--switch-queue 20 --host-queue 20" "bbr:--tcp bbr" "mtu1500-:--mtu 1500"; do
  name=${setting%%:*}; flags=${setting#*:}
  for i in 1 2 3 4 5; do
    # shellcheck disable=SC2086
    .venv/bin/bigraph-emu run -t bigraph:m=2,n=4 --workload "$here/two.toml" -n 1 -w 0 --bw 20 $flags \
      --out "/tmp/two-jobs-$name$i" > "$out/$name$i.log" 2>&1
    echo "$name$i rc=$?"; cp "/tmp/two-jobs-$name$i/jobs.csv" "$out/$name$i.csv"; rm -rf "/tmp/two-jobs-$name$i"
  done
done
