"""The os-ken application: a thin adapter between switches and RouteState.

When a switch connects, the app reads the rules it already holds (a switch
that kept forwarding while the controller was down keeps them) and sends
only the differences, then a barrier; the barrier reply proves the switch
has applied them. When every switch has answered, it writes the ready file
the emulator waits for. Afterwards it polls port counters (the SDN view,
saved to controller-ports.csv, from which the emulator takes each call's
ports.csv), reroutes when a switch-switch port goes down or up,
and with the "adaptive" policy moves host pairs off overloaded links. Every
change is logged to events.jsonl.

Like FAUCET's app, it decides nothing itself: counters go to
emulator.routes.readings with the time they arrived, which returns the
controller-ports.csv rows and the adaptive policy's moves; RouteState
returns the rules. The app sends those and writes the files.
"""
from __future__ import annotations

import json
import logging
import os
import time

from os_ken import cfg
from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import DEAD_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.lib import hub
from os_ken.ofproto import ofproto_v1_3

from emulator.routes.routing import fixed_policy, pair_paths, policy_record
from emulator.routes.rules import ETH_TYPE_IPV4, FlowRule
from emulator.routes.readings import Readings, adapt
from emulator.routes.state import RouteState, rule_changes
from emulator.fabric.graph import Fabric
from emulator.records.links import CONTROLLER_PORTS, PORT_READING_COLUMNS

cfg.CONF.register_cli_opts([
    cfg.StrOpt("fabric", help="fabric JSON written by the emulator"),
    cfg.StrOpt("policy", default="shortest", help="routing policy"),
    cfg.StrOpt("demands", default="", help="JSON [[src, dst, bytes], ...] for traffic-aware"),
    cfg.IntOpt("seed", default=1, help="seed of the valiant policy"),
    cfg.StrOpt("routes", default="", help="JSON [[src, dst, [switch, ...]], ...]: a file policy's routes"),
    cfg.StrOpt("ready-file", help="written once every switch has its routes; events.jsonl, controller-ports.csv and "
                                  "routes.json go beside it"),
], group="bigraph")

LOG = logging.getLogger("bigraph.controller")
POLL_S = 1.0            # port counter period
ADAPTIVE_POLL_S = 0.5   # the adaptive policy reads counters more often
READ_BACK_S = 5.0          # a switch answers a flow stats request well within this


class FabricRoutes(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        conf = cfg.CONF.bigraph
        self.fabric = Fabric.load(conf.fabric)
        demands = None
        if conf.demands:
            with open(conf.demands) as f:
                demands = {(a, b): n for a, b, n in json.load(f)}
        policy = _given_policy(conf.policy, conf.routes) if conf.routes else policy_record(conf.policy)
        self.state = RouteState(self.fabric, policy, demands, conf.seed)
        self.ready_file = conf.ready_file
        self.out_dir = os.path.dirname(conf.ready_file)
        self.adapts = policy.adapts
        self.poll_s = ADAPTIVE_POLL_S if self.adapts else POLL_S
        self.by_dpid = {s.dpid: s.name for s in self.fabric.switches}
        self.readings = Readings(self.fabric)         # port and per-pair counters: the adaptive policy's input
        self.datapaths = {}                           # switch -> datapath
        self.installed: dict[str, set[FlowRule]] = {}  # what each switch holds, as far as we know
        self.confirmed: dict[str, int] = {}           # switch -> rules, confirmed by barrier
        self.held: dict[int, list] = {}               # dpid -> flow stats parts of a connect read-back
        self.asked: dict[str, float] = {}             # switch -> when its read-back was asked
        self.ready = False
        LOG.info("fabric %s, %d switches, policy %s", self.fabric.topology, len(self.by_dpid), conf.policy)
        hub.spawn(self._poll_loop)

    # --- switches connect: read what they hold, send the differences ---------
    # os-ken runs each app in a thread of its own and hands it the features
    # reply before os-ken's own handler, in the switch's receive thread, has
    # set the switch's dpid and asked for its ports. An app acting on the
    # features reply may so see no dpid, or send a request whose reply comes
    # back before the port list has moved the switch to MAIN; os-ken passes a
    # reply only to handlers of the state it arrives in, so a MAIN handler
    # never sees it. Both left switches without routes on the kernel datapath
    # in a slow VM. The read-back starts on MAIN instead: the dpid is set and
    # every later reply is dispatched in MAIN.
    @set_ev_cls(ofp_event.EventOFPStateChange, [MAIN_DISPATCHER, DEAD_DISPATCHER])
    def connection_changed(self, ev):
        dp = ev.datapath
        name = self.by_dpid.get(dp.id)
        if ev.state == DEAD_DISPATCHER:
            LOG.info("switch %s: connection from %s closed", name or f"dpid {dp.id}", dp.address)
            if self.datapaths.get(name) is dp:
                del self.datapaths[name]
            return
        if name is None:
            LOG.warning("switch with unknown dpid %s connected; ignored", dp.id)
            return
        LOG.info("switch %s connected from %s: reading back its rules", name, dp.address)
        self.datapaths[name] = dp
        self.held[dp.id] = []
        self._ask_rules(name, dp)

    def _ask_rules(self, name: str, dp) -> None:
        self.asked[name] = time.monotonic()
        dp.send_msg(dp.ofproto_parser.OFPFlowStatsRequest(dp))

    def _unanswered_read_backs(self) -> None:
        """A read-back with no answer after READ_BACK_S is asked again, and
        said: a switch must not wait silently for routes that never come.
        (From the poll thread: it only reads `held`, which the reply's
        handler owns.)"""
        now = time.monotonic()
        for name, asked in list(self.asked.items()):
            dp = self.datapaths.get(name)
            if dp is not None and dp.id in self.held and now - asked > READ_BACK_S:
                LOG.warning("switch %s: no answer to the read-back of its rules in %.0f s; asking again",
                            name, now - asked)
                self._ask_rules(name, dp)

    @set_ev_cls(ofp_event.EventOFPFlowStatsReply, MAIN_DISPATCHER)
    def flow_stats(self, ev):
        dp = ev.msg.datapath
        name = self.by_dpid.get(dp.id)
        if name is None:
            return
        if dp.id in self.held:   # reading back a connecting switch's rules
            self.held[dp.id] += ev.msg.body
            if not ev.msg.flags & dp.ofproto.OFPMPF_REPLY_MORE:
                have = {_rule(stat) for stat in self.held.pop(dp.id)}
                self.asked.pop(name, None)
                self.installed[name] = have
                self.confirmed.pop(name, None)   # confirmed again by the barrier after the sync
                self._sync(name, reason="connected", keep=len(have))
            return
        counts = [(stat.match.get("ipv4_src"), stat.match.get("ipv4_dst"), stat.byte_count) for stat in ev.msg.body]
        self.readings.read_pairs(name, time.monotonic(), counts)

    def _sync(self, name: str, reason: str, keep: int | None = None) -> int:
        """Make switch `name` hold exactly the state's rules; returns how many changed."""
        dp = self.datapaths[name]
        want = self.state.rules(name)
        delete, add = rule_changes(want, self.installed.get(name, set()))
        for rule in delete:
            dp.send_msg(_flow_mod(dp, rule, dp.ofproto.OFPFC_DELETE_STRICT))
        for rule in add:
            dp.send_msg(_flow_mod(dp, rule, dp.ofproto.OFPFC_ADD))
        self.installed[name] = want
        dp.send_msg(dp.ofproto_parser.OFPBarrierRequest(dp))
        LOG.info("switch %s (%s): %d rules deleted, %d added%s", name, reason, len(delete), len(add),
                 "" if keep is None else f", {keep} found")
        return len(delete) + len(add)

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def barrier_reply(self, ev):
        name = self.by_dpid.get(ev.msg.datapath.id)
        if name is None or name in self.confirmed:
            return
        self.confirmed[name] = len(self.installed[name])
        if len(self.confirmed) == len(self.by_dpid) and not self.ready:
            self.ready = True
            self._write_routes()
            _write_json(self.ready_file, {"policy": self.state.policy, "rules": self.confirmed})
            LOG.info("all %d switches have their routes", len(self.confirmed))

    # --- links fail and come back ---------------------------------------------
    @set_ev_cls(ofp_event.EventOFPPortStatus, MAIN_DISPATCHER)
    def port_status(self, ev):
        msg, dp = ev.msg, ev.msg.datapath
        name = self.by_dpid.get(dp.id)
        port = msg.desc.port_no
        if name is None or port not in self.fabric.ports(name):
            return
        ofp = dp.ofproto
        up = not (msg.desc.state & ofp.OFPPS_LINK_DOWN or msg.desc.config & ofp.OFPPC_PORT_DOWN)
        if self.state.port_changed(name, port, up):
            changed = sum(self._sync(s, reason="reroute") for s in self.datapaths)
            self._event("link " + ("up" if up else "down"), switch=name, port=port, rules_changed=changed,
                        fallback=self.state.fallback)
            self._write_routes()

    # --- counters: the SDN view, and the adaptive policy's input ---------------
    def _poll_loop(self):
        while True:
            hub.sleep(self.poll_s)
            self._unanswered_read_backs()
            for dp in list(self.datapaths.values()):
                parser = dp.ofproto_parser
                dp.send_msg(parser.OFPPortStatsRequest(dp, 0, dp.ofproto.OFPP_ANY))
                if self.adapts and self.ready:
                    dp.send_msg(parser.OFPFlowStatsRequest(dp))
            if self.adapts and self.ready:
                hub.sleep(0.1)   # let the replies arrive, then decide
                self._adapt()

    @set_ev_cls(ofp_event.EventOFPPortStatsReply, MAIN_DISPATCHER)
    def port_stats(self, ev):
        name = self.by_dpid.get(ev.msg.datapath.id)
        if name is None:
            return
        counts = [(stat.port_no, stat.tx_bytes, stat.rx_bytes, stat.tx_dropped) for stat in ev.msg.body]
        rows = self.readings.read_ports(name, time.monotonic(), counts)
        path = os.path.join(self.out_dir, CONTROLLER_PORTS)
        new = not os.path.exists(path)
        with open(path, "a") as f:
            if new:
                f.write(",".join(PORT_READING_COLUMNS) + "\n")
            f.writelines(row.csv_line() for row in rows)

    def _adapt(self):
        moves, switches = adapt(self.state, self.readings)
        for s in switches:
            self._sync(s, reason="adaptive")
        for m in moves:
            self._event("move", **m.event())
        if moves:
            self._write_routes()

    # --- what the controller tells the emulator --------------------------------
    def _event(self, what: str, **details):
        LOG.info("%s %s", what, details)
        with open(os.path.join(self.out_dir, "events.jsonl"), "a") as f:
            f.write(json.dumps({"t": time.monotonic(), "event": what, **details}) + "\n")

    def _write_routes(self):
        routes = {f"{a}>{b}": p for (a, b), p in pair_paths(self.state.fabric, self.state.table).items()}
        _write_json(os.path.join(self.out_dir, "routes.json"), routes)


def _rule(stat) -> FlowRule:
    """A flow stats entry as the FlowRule it implements."""
    out = None
    for inst in stat.instructions:
        for action in getattr(inst, "actions", []):
            if hasattr(action, "port"):
                out = action.port
    return FlowRule(stat.priority, stat.match.get("ipv4_dst"), out, stat.match.get("ipv4_src"))


def _flow_mod(dp, rule: FlowRule, command: int):
    parser, ofp = dp.ofproto_parser, dp.ofproto
    if rule.ipv4_dst is None:
        match, actions = parser.OFPMatch(), []
    else:
        fields = {"eth_type": ETH_TYPE_IPV4, "ipv4_dst": rule.ipv4_dst}
        if rule.ipv4_src is not None:
            fields["ipv4_src"] = rule.ipv4_src
        match, actions = parser.OFPMatch(**fields), [parser.OFPActionOutput(rule.out_port)]
    inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
    return parser.OFPFlowMod(dp, command=command, priority=rule.priority, match=match, instructions=inst,
                             out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY)


def _write_json(path: str, data) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(data, f)
    os.replace(tmp, path)


def _given_policy(name: str, routes_json: str):
    """A file policy as the routes the emulator computed and checked from
    it: the user's code does not run again here."""
    with open(routes_json) as f:
        return fixed_policy(name, {(a, b): switches for a, b, switches in json.load(f)})
