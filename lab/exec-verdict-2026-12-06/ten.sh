#!/bin/sh
# exec of a trivial program ten times in a row: each run's exit code and its machine verdict
cd "$(dirname "$0")/../.."
for i in 1 2 3 4 5 6 7 8 9 10; do
    out=/tmp/exec-ten-$i; rm -rf $out
    .venv/bin/bigraph-emu exec -t bigraph:m=2,n=4 --out $out -- sh -c 'echo $RANK > rank.txt' > $out.log 2>&1
    echo "run $i exit $? $(grep -h 'fidelity' $out/summary.txt | head -1)"
done
