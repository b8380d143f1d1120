"""A reactive os-ken controller: the baseline bringup.py compares our
proactive controller against. Not part of the emulator.

Switches start with one rule, "send everything to the controller". The
first IPv4 packet towards a host that reaches a switch comes to the
controller as a packet-in; the controller then installs the destination's
rule on every switch from there to the host (next hops along a shortest
path, lowest port first, so paths towards one destination never disagree)
and sends the packet on. Hosts have static ARP (BiGraph has loops: nothing
is flooded), so the packets that teach it routes are the hosts' own.

It knows the wiring from the fabric file, as a Ryu app with topology
discovery (LLDP) would after discovery; it learns *which routes are
needed* from packet-ins. The ready file is written once every switch has
connected and confirmed its table-miss rule; routes are ready when every
host pair has exchanged a packet (bringup.py pings them all).

    python benchmarks/reactive_controller.py --fabric F --port P --ready-file R [--stats-file S]
"""
from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
from collections import deque

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
    sys.path.insert(0, REPO)

from os_ken.base import app_manager  # noqa: E402
from os_ken.controller import ofp_event  # noqa: E402
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls  # noqa: E402
from os_ken.lib.packet import ipv4, packet  # noqa: E402
from os_ken.ofproto import ofproto_v1_3  # noqa: E402

from emulator.fabric.graph import Fabric  # noqa: E402

ETH_TYPE_IPV4 = 0x0800
ROUTE_PRIORITY = 100
CONFIG = {"fabric": "", "ready_file": "", "stats_file": ""}   # set by main() before the app starts
LOG = logging.getLogger("bigraph.reactive")


class ReactiveRoutes(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.fabric = Fabric.load(CONFIG["fabric"])
        self.by_dpid = {s.dpid: s.name for s in self.fabric.switches}
        self.host_by_ip = {h.ip: h for h in self.fabric.hosts}
        self.datapaths = {}
        self.confirmed: set[str] = set()
        self.installed: dict[str, set[str]] = {s.name: set() for s in self.fabric.switches}
        self.next_hops: dict[str, dict[str, int]] = {}   # destination switch -> switch -> port
        self.stats = {"packet_ins": 0, "flow_mods": 0, "packet_outs": 0, "ignored": 0}
        _STATS.append(self.stats)

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def switch_connected(self, ev):
        dp = ev.msg.datapath
        name = self.by_dpid.get(dp.id)
        if name is None:
            return
        parser, ofp = dp.ofproto_parser, dp.ofproto
        self.datapaths[name] = dp
        miss = [parser.OFPActionOutput(ofp.OFPP_CONTROLLER, ofp.OFPCML_NO_BUFFER)]
        dp.send_msg(parser.OFPFlowMod(dp, priority=0, match=parser.OFPMatch(),
                                      instructions=[parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, miss)]))
        dp.send_msg(parser.OFPBarrierRequest(dp))

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def barrier_reply(self, ev):
        name = self.by_dpid.get(ev.msg.datapath.id)
        if name is None or name in self.confirmed:
            return
        self.confirmed.add(name)
        if len(self.confirmed) == len(self.by_dpid):
            with open(CONFIG["ready_file"] + ".tmp", "w") as f:
                json.dump({"switches": len(self.confirmed)}, f)
            os.replace(CONFIG["ready_file"] + ".tmp", CONFIG["ready_file"])
            LOG.info("all %d switches connected", len(self.confirmed))

    def _next_hops(self, target: str) -> dict[str, int]:
        """Port towards `target` from every switch: BFS hop counts, then the
        lowest port among the neighbours one hop closer."""
        if target not in self.next_hops:
            dist = {target: 0}
            queue = deque([target])
            while queue:
                s = queue.popleft()
                for _, nb in self.fabric.switch_neighbours(s):
                    if nb not in dist:
                        dist[nb] = dist[s] + 1
                        queue.append(nb)
            self.next_hops[target] = {
                s: min(port for port, nb in self.fabric.switch_neighbours(s) if dist.get(nb) == dist[s] - 1)
                for s in dist if s != target}
        return self.next_hops[target]

    @set_ev_cls(ofp_event.EventOFPPacketIn, MAIN_DISPATCHER)
    def packet_in(self, ev):
        msg = ev.msg
        dp = msg.datapath
        name = self.by_dpid.get(dp.id)
        self.stats["packet_ins"] += 1
        ip = packet.Packet(msg.data).get_protocol(ipv4.ipv4)
        dst = self.host_by_ip.get(ip.dst) if ip is not None else None
        if name is None or dst is None:
            self.stats["ignored"] += 1
            return
        hops = self._next_hops(dst.switch)
        # the switches from here to the destination's switch, and their ports
        path, s = [], name
        while s != dst.switch:
            port = hops[s]
            path.append((s, port))
            s = self.fabric.peer(s, port)[0]
        path.append((dst.switch, dst.port))
        # install from the far end back, so the packet sent on meets rules
        for switch, port in reversed(path):
            if dst.ip in self.installed[switch]:
                continue
            self.installed[switch].add(dst.ip)
            sdp = self.datapaths[switch]
            parser, ofp = sdp.ofproto_parser, sdp.ofproto
            match = parser.OFPMatch(eth_type=ETH_TYPE_IPV4, ipv4_dst=dst.ip)
            inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, [parser.OFPActionOutput(port)])]
            sdp.send_msg(parser.OFPFlowMod(sdp, priority=ROUTE_PRIORITY, match=match, instructions=inst))
            self.stats["flow_mods"] += 1
        parser, ofp = dp.ofproto_parser, dp.ofproto
        dp.send_msg(parser.OFPPacketOut(dp, buffer_id=ofp.OFP_NO_BUFFER, in_port=msg.match["in_port"],
                                        actions=[parser.OFPActionOutput(path[0][1])], data=msg.data))
        self.stats["packet_outs"] += 1


_STATS: list[dict] = []


def _exit(*_):
    if CONFIG["stats_file"] and _STATS:
        with open(CONFIG["stats_file"], "w") as f:
            json.dump(_STATS[0], f)
    sys.stdout.flush()
    os._exit(0)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--fabric", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--ready-file", required=True)
    p.add_argument("--stats-file", default="")
    args = p.parse_args()
    CONFIG.update(fabric=args.fabric, ready_file=args.ready_file, stats_file=args.stats_file)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(asctime)s %(name)s %(message)s")
    from os_ken import cfg
    from os_ken.lib import hub
    cfg.CONF(["--ofp-listen-host", "127.0.0.1", "--ofp-tcp-listen-port", str(args.port)], project="os_ken")
    signal.signal(signal.SIGTERM, _exit)
    manager = app_manager.AppManager.get_instance()
    manager.load_apps([__name__])   # this module (as __main__): ReactiveRoutes
    services = manager.instantiate_apps(**manager.create_contexts())
    hub.joinall(services)


if __name__ == "__main__":
    main()
