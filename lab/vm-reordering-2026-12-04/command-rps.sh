# In the VM (vm/stage.py --command): does Receive Packet Steering on the fabric's veths in the root namespace
# (every switch port: each flow's packets to one CPU's backlog by their hash) keep the kernel datapath's
# segments in order while the run keeps both vCPUs? The same run as command.sh's, with TSO and with frames.
V=/opt/bigraph-emu/venv/bin
steer() {   # every switch port that appears gets rps_cpus 3 (both vCPUs)
  while sleep 0.5; do
    for q in /sys/class/net/bgs*/queues/rx-0/rps_cpus; do
      [ -e "$q" ] && [ "$(cat "$q" 2>/dev/null)" != "3" ] && echo 3 > "$q" 2>/dev/null
    done
  done
}
one() {
  name=$1; shift
  cat /proc/net/softnet_stat > softnet-before-$name.txt
  steer & s=$!
  $V/bigraph-emu run -t bigraph:m=2,n=4 -a ring -m naive -b 1M -e 1M -n 3 -w 1 --bw 10 "$@" \
      --capture bgs0-bgs2,bgh0 --out run-$name > run-$name.log 2>&1
  kill $s
  cat /proc/net/softnet_stat > softnet-after-$name.txt
}
one tso-rps --mtu 1500 --offload tso
one frames-rps --mtu 1500 --offload off
