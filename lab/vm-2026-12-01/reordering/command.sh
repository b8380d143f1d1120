# In the VM (vm/stage.py --command): is the kernel datapath's reordering upcalls? One run as the stage runs it,
# one with ovs-vswitchd's revalidation target raised (it shrinks its flow limit when a dump is slower than it).
V=/opt/bigraph-emu/venv/bin
one() {
  ovs-dpctl show > dp-before-$1.txt
  (while sleep 1; do date +%T; ovs-appctl upcall/show; done) > upcall-during-$1.txt 2>&1 &
  w=$!
  $V/bigraph-emu run -t bigraph:m=2,n=4 -a halving-doubling -m naive -b 4M -e 4M -n 2 -w 1 --capture bgs0-bgs2 --out run-$1 > run-$1.log 2>&1
  kill $w
  ovs-dpctl show > dp-after-$1.txt
}
one default
ovs-vsctl set Open_vSwitch . other_config:max-revalidator=10000 other_config:max-idle=30000
one revalidator10s
ovs-vsctl get Open_vSwitch . other_config > other_config.txt
