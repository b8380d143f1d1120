#!/bin/sh
# Two namespaces joined by a veth pair, HTB at 50 Mbit/s with a 62,500-byte burst on the sender's side (as the
# emulator shapes a link at 50 Mbit/s, MTU 9000, TSO segments of at most 62,500 bytes); removed on exit.
set -e
HERE=$(cd "$(dirname "$0")" && pwd)
cleanup() { ip netns del bgxa 2>/dev/null || true; ip netns del bgxb 2>/dev/null || true; }
trap cleanup EXIT
cleanup
ip netns add bgxa; ip netns add bgxb
ip link add bgxa0 netns bgxa type veth peer name bgxb0 netns bgxb
for n in a b; do
  ip -n bgx$n link set bgx${n}0 mtu 9000 gso_max_size 62500 up
  ip -n bgx$n link set lo up
  nsenter --net=/var/run/netns/bgx$n sh -c 'echo 0 > /proc/sys/net/ipv4/tcp_slow_start_after_idle'
done
ip -n bgxa addr add 10.99.0.1/24 dev bgxa0; ip -n bgxb addr add 10.99.0.2/24 dev bgxb0
ip netns exec bgxa tc qdisc replace dev bgxa0 root handle 1: htb default 1
ip netns exec bgxa tc class add dev bgxa0 parent 1: classid 1:1 htb rate 50mbit ceil 50mbit burst 62500 cburst 62500
ip netns exec bgxa tc qdisc add dev bgxa0 parent 1:1 handle 10: bfifo limit 900000
timeout 60 ip netns exec bgxb /work/main/.venv/bin/python $HERE/htb_overdraw.py recv &
sleep 0.5
timeout 60 ip netns exec bgxa /work/main/.venv/bin/python $HERE/htb_overdraw.py send ${1:-bbr}
wait
