"""Every exit code of every command, and what it says: the one place the
CLI, the pipeline, `exec` and the help text look them up (the README's
table says the same)."""
from __future__ import annotations

OK = 0
FAILED = 1       # the emulation (or a command) failed, or an agent moved a wrong number of bytes
BAD_INPUT = 2    # refused before anything was created
UNTRUSTED = 3    # the run finished, but some calls failed the fidelity verdict
BUSY = 4         # another emulation holds this machine: nothing of this one was built
INTERRUPTED = 130   # as a shell reports a job ended by Ctrl-C; teardown has run

FINISHED = (OK, UNTRUSTED)   # the results folder is complete

MEANINGS = {OK: "done; a run: every call passed the fidelity verdict",
            FAILED: "failed: the emulation (or a command) failed, or an agent moved wrong bytes",
            BAD_INPUT: "bad input: nothing was created",
            UNTRUSTED: "a run finished, but some calls failed the fidelity verdict",
            BUSY: "another emulation holds this machine: try again when it ends",
            INTERRUPTED: "interrupted (Ctrl-C, SIGTERM, a hang-up); teardown has run"}
