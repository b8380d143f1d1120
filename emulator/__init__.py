"""bigraph-emu: a packet-level emulator of distributed deep-learning traffic
(docs/architecture.md maps its packages)."""


def version() -> str:
    """The project's installed version (results, sweeps and the servers of
    one fabric record and compare it)."""
    from importlib import metadata
    try:
        return metadata.version("bigraph-emu")
    except metadata.PackageNotFoundError:   # run from a checkout that was never installed
        return "(not installed; pip install -e . gives it its version)"
