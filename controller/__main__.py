"""Start the controller: python -m controller --fabric F --ready-file R [--port P].

os-ken 4 has no osken-manager command, so this is the project's own entry
point. It listens on loopback only, unless a fabric spread over several
servers names the head's address toward them (--listen).
"""
from __future__ import annotations

import argparse
import logging
import os
import signal
import sys

from emulator.routes.routing import POLICIES
from emulator.routes.user_policy import file_of


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python -m controller", description=__doc__)
    p.add_argument("--fabric", required=True, help="fabric JSON written by the emulator")
    p.add_argument("--policy", default="shortest", help=f"one of {', '.join(POLICIES)}, or file:PATH.py with --routes")
    p.add_argument("--routes", default="", help="JSON [[src, dst, [switch, ...]], ...]: a file policy's routes, "
                                               "as the emulator computed them")
    p.add_argument("--ready-file", required=True)
    p.add_argument("--demands", default="", help="JSON [[src, dst, bytes], ...] (traffic-aware)")
    p.add_argument("--seed", type=int, default=1, help="seed of the valiant policy")
    p.add_argument("--port", type=int, default=6653, help="OpenFlow TCP port")
    p.add_argument("--listen", default="127.0.0.1", help="the address it listens on (default 127.0.0.1)")
    args = p.parse_args(argv)
    if file_of(args.policy) is None and args.policy not in POLICIES:
        p.error(f"--policy: {args.policy!r} is not one of {', '.join(POLICIES)}, nor file:PATH.py")
    if (file_of(args.policy) is None) == bool(args.routes):
        p.error("--routes goes with a file:PATH.py policy, and only with one")
    return args


def _exit_now(*_):
    sys.stdout.flush()
    os._exit(0)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(asctime)s %(name)s %(message)s")
    from os_ken import cfg
    from os_ken.base import app_manager
    from os_ken.lib import hub
    import controller.app  # noqa: F401 (importing registers the --bigraph-* options)

    cfg.CONF(["--ofp-listen-host", args.listen, "--ofp-tcp-listen-port", str(args.port),
              "--bigraph-fabric", args.fabric, "--bigraph-policy", args.policy,
              "--bigraph-ready-file", args.ready_file, "--bigraph-demands", args.demands, "--bigraph-routes", args.routes,
              "--bigraph-seed", str(args.seed)], project="os_ken")
    # os-ken 4's run_apps fails on shutdown (HubThread has no kill()):
    # start the apps ourselves and leave on SIGTERM without its cleanup.
    signal.signal(signal.SIGTERM, _exit_now)
    manager = app_manager.AppManager.get_instance()
    manager.load_apps(["controller.app"])
    services = manager.instantiate_apps(**manager.create_contexts())
    hub.joinall(services)


if __name__ == "__main__":
    main()
