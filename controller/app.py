"""The os-ken application: a thin adapter that installs precomputed rules.

When a switch connects it gets its rules (controller.rules), then a barrier;
the barrier reply proves the switch has applied them. When every switch of
the fabric has answered, the app writes the ready file the emulator waits for.
"""
from __future__ import annotations

import json
import logging
import os

from os_ken import cfg
from os_ken.base import app_manager
from os_ken.controller import ofp_event
from os_ken.controller.handler import CONFIG_DISPATCHER, MAIN_DISPATCHER, set_ev_cls
from os_ken.ofproto import ofproto_v1_3

from controller.routing import forwarding_table
from controller.rules import ETH_TYPE_IPV4, switch_rules
from emulator.fabric import Fabric

cfg.CONF.register_cli_opts([
    cfg.StrOpt("fabric", help="fabric JSON written by the emulator"),
    cfg.StrOpt("policy", default="shortest", help="routing policy"),
    cfg.StrOpt("ready-file", help="written once every switch has its routes"),
], group="bigraph")

LOG = logging.getLogger("bigraph.controller")


class FabricRoutes(app_manager.OSKenApp):
    OFP_VERSIONS = [ofproto_v1_3.OFP_VERSION]

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        conf = cfg.CONF.bigraph
        self.fabric = Fabric.load(conf.fabric)
        self.policy = conf.policy
        self.ready_file = conf.ready_file
        self.table = forwarding_table(self.fabric, self.policy)
        self.by_dpid = {s.dpid: s.name for s in self.fabric.switches}
        self.installed: dict[str, int] = {}   # switch -> rules confirmed by barrier
        self.pending: dict[int, int] = {}     # dpid -> rules awaiting the barrier reply
        LOG.info("fabric %s, %d switches, policy %s", self.fabric.topology, len(self.by_dpid), self.policy)

    @set_ev_cls(ofp_event.EventOFPSwitchFeatures, CONFIG_DISPATCHER)
    def switch_connected(self, ev):
        dp = ev.msg.datapath
        name = self.by_dpid.get(dp.id)
        if name is None:
            LOG.warning("switch with unknown dpid %016x connected; ignored", dp.id)
            return
        parser, ofp = dp.ofproto_parser, dp.ofproto
        rules = switch_rules(self.fabric, self.table, name)
        # Start from an empty table: a reconnecting switch may hold old rules.
        dp.send_msg(parser.OFPFlowMod(dp, command=ofp.OFPFC_DELETE, table_id=ofp.OFPTT_ALL,
                                      out_port=ofp.OFPP_ANY, out_group=ofp.OFPG_ANY))
        for rule in rules:
            if rule.ipv4_dst is None:
                match, actions = parser.OFPMatch(), []
            else:
                fields = {"eth_type": ETH_TYPE_IPV4, "ipv4_dst": rule.ipv4_dst}
                if rule.ipv4_src is not None:
                    fields["ipv4_src"] = rule.ipv4_src
                match, actions = parser.OFPMatch(**fields), [parser.OFPActionOutput(rule.out_port)]
            inst = [parser.OFPInstructionActions(ofp.OFPIT_APPLY_ACTIONS, actions)]
            dp.send_msg(parser.OFPFlowMod(dp, priority=rule.priority, match=match, instructions=inst))
        self.installed.pop(name, None)
        self.pending[dp.id] = len(rules)
        dp.send_msg(parser.OFPBarrierRequest(dp))
        LOG.info("switch %s (dpid %d): sent %d rules", name, dp.id, len(rules))

    @set_ev_cls(ofp_event.EventOFPBarrierReply, MAIN_DISPATCHER)
    def barrier_reply(self, ev):
        dp = ev.msg.datapath
        name = self.by_dpid.get(dp.id)
        if name is None or dp.id not in self.pending:
            return
        self.installed[name] = self.pending.pop(dp.id)
        LOG.info("switch %s: rules confirmed (%d/%d switches)", name, len(self.installed), len(self.by_dpid))
        if len(self.installed) == len(self.by_dpid):
            self._write_ready()

    def _write_ready(self):
        tmp = self.ready_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"policy": self.policy, "rules": self.installed}, f)
        os.replace(tmp, self.ready_file)
        LOG.info("all %d switches have their routes", len(self.installed))
