"""bigraph-emu from Python (docs/python.md): build an experiment, predict it
with the flow model, emulate it (root), read any results folder; results
come back as pandas DataFrames.

    import bigraph_emu as be
    got = be.model(be.spec({"topology": "bigraph:m=2,n=4", "algorithm": "halving-doubling", "mapping": "hdrm"}))
    got.collectives[["size_bytes", "time_s", "busbw_mbps"]]

Only the names below are the interface; `emulator`'s insides may change.
"""
from __future__ import annotations

from bigraph_emu.api import BadInput, NeedsRoot, Results, emulate, model, read, spec

__all__ = ["BadInput", "NeedsRoot", "Results", "emulate", "model", "read", "spec"]
