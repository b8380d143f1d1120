# In the VM (vm/stage.py --command): where the kernel datapath loses and reorders TSO segments. The probe's
# uncongested ring (no two flows share a link), MTU 1500, 10 Mbit/s, with TSO and with frames, each once as
# the stage runs it and once with the whole run (hosts, agents) on one vCPU; the per-CPU backlogs'
# counters (/proc/net/softnet_stat), the datapath's port counters and the qdiscs' sampled each second.
V=/opt/bigraph-emu/venv/bin
one() {
  name=$1; shift; prefix=$1; shift
  cat /proc/net/softnet_stat > softnet-before-$name.txt
  ovs-dpctl show -s > dp-before-$name.txt 2>&1
  (while sleep 1; do { date +%T; tc -s qdisc show; ip -s link show; } > sample-$name.tmp 2>&1; mv sample-$name.tmp sample-$name.txt; done) &
  w=$!
  $prefix $V/bigraph-emu run -t bigraph:m=2,n=4 -a ring -m naive -b 1M -e 1M -n 3 -w 1 --bw 10 "$@" \
      --capture bgs0-bgs2,bgh0 --out run-$name > run-$name.log 2>&1
  kill $w
  cat /proc/net/softnet_stat > softnet-after-$name.txt
  ovs-dpctl show -s > dp-after-$name.txt 2>&1
}
sysctl net.core.netdev_max_backlog net.core.rps_sock_flow_entries > sysctl.txt 2>&1
one tso "" --mtu 1500 --offload tso
one tso-one-cpu "taskset -c 0" --mtu 1500 --offload tso
one frames "" --mtu 1500 --offload off
one frames-one-cpu "taskset -c 0" --mtu 1500 --offload off
