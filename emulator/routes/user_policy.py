"""A routing policy of the user's own (pure, but for running the user's code).

A file policy is a Python file defining `routes(fabric, demands)`, which
returns `{(source host, destination host): [switch, ...]}`: the switches a
packet crosses, in order, for every ordered pair of distinct hosts of
`fabric`. This module loads the file and checks its answer; routing.py
makes the record (`policy_record("file:PATH.py")`) that turns the checked
paths into a forwarding table. Every message names the file and the first
bad route, so the spec refuses it before anything is built.

The file runs in the emulator's own process, with its rights (root for an
emulation), once per run before the network is built.
"""
from __future__ import annotations

import os
import sys
import traceback
import types
import zlib
from typing import Callable

from emulator.fabric.graph import Fabric
from emulator.inputs import InputError, read_text

FILE_POLICY = "file:"   # a policy named "file:PATH.py" is the routes of that file
ANSWER_FORM = "a dict {(source host, destination host): [switch, ...]}"

Paths = dict[tuple[str, str], list[str]]

_loaded: dict[tuple, Callable] = {}   # (real path, mtime, size) -> its routes function: a file runs once


def file_of(policy: str) -> str | None:
    """The file of a policy name "file:PATH.py"; None for a policy of ours."""
    return policy[len(FILE_POLICY):] if policy.startswith(FILE_POLICY) else None


def label(policy: str) -> str:
    """A policy's name short enough for a file name: a file policy's
    without its folders."""
    path = file_of(policy)
    return policy if path is None else FILE_POLICY + os.path.basename(path)


def load(path: str) -> Callable:
    """The `routes` function of a policy file; ValueError names the file
    (and the line of a syntax error or of what its import raised)."""
    if not path:
        raise ValueError(f"{FILE_POLICY} names no file; give {FILE_POLICY}PATH.py")
    try:
        text = read_text(path)   # a regular file only: a named pipe would wait for ever
        info = os.stat(path)
    except InputError as e:   # it names the file and why
        raise ValueError(f"policy file {e}") from None
    except OSError as e:   # gone since it was read
        raise ValueError(f"policy file {path}: cannot read it: {e.strerror}") from None
    key = (os.path.realpath(path), info.st_mtime_ns, info.st_size)
    if key not in _loaded:
        module = _run(path, key[0], text)
        routes = getattr(module, "routes", None)
        if not callable(routes):
            raise ValueError(f"{path}: defines no routes(fabric, demands) function")
        _loaded[key] = routes
    return _loaded[key]


def _run(path: str, real: str, text: str) -> types.ModuleType:
    """The file's text run as a module of its own, as importing it would."""
    name = f"bigraph_policy_{zlib.crc32(real.encode()):08x}"
    module = types.ModuleType(name)
    module.__file__ = real
    sys.modules[name] = module   # dataclasses and pickling in the file look themselves up there
    try:
        exec(compile(text, real, "exec", dont_inherit=True), module.__dict__)
    except SyntaxError as e:
        raise ValueError(f"{path}, line {e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:
        raise ValueError(f"{path}: importing it raised {_raised(e, real)}") from None
    return module


def _raised(error: Exception, real: str) -> str:
    """'KeyError: 'x' (line 12)': the exception and the last line of the
    policy file it passed through."""
    lines = [frame.lineno for frame in traceback.extract_tb(error.__traceback__)
             if os.path.realpath(frame.filename) == real]
    where = f" (line {lines[-1]})" if lines else ""
    return f"{type(error).__name__}: {error}{where}"


def answer(path: str, fabric: Fabric, demands: dict | None) -> Paths:
    """The routes the file gives `fabric`, checked (`check`)."""
    routes = load(path)
    try:
        given = routes(fabric, None if demands is None else dict(demands))
    except Exception as e:
        raise ValueError(f"{path}: routes(fabric, demands) raised {_raised(e, os.path.realpath(path))}") from None
    return check(fabric, given, path)


def check(fabric: Fabric, given, where: str) -> Paths:
    """`given` as paths of lists, if it routes every ordered pair of
    distinct hosts of `fabric` along linked switches, from the source's
    switch to the destination's, no switch twice; ValueError names the
    first bad route (`where`: the file, or the routes file)."""
    if not isinstance(given, dict):
        raise ValueError(f"{where}: routes returned {type(given).__name__}, not {ANSWER_FORM}")
    paths: Paths = {}
    for key, switches in given.items():
        pair = _pair(fabric, key, where)
        paths[pair] = _path(fabric, pair, switches, f"{where}: route {pair[0]} -> {pair[1]}")
    hosts = [h.name for h in fabric.hosts]
    missing = next(((a, b) for a in hosts for b in hosts if a != b and (a, b) not in paths), None)
    if missing:
        raise ValueError(f"{where}: no route from {missing[0]} to {missing[1]}: every ordered pair of distinct "
                         f"hosts of {fabric.topology} needs one ({len(hosts) * (len(hosts) - 1)} pairs, "
                         f"{len(paths)} given)")
    return paths


def _pair(fabric: Fabric, key, where: str) -> tuple[str, str]:
    if not (isinstance(key, tuple) and len(key) == 2 and all(isinstance(h, str) for h in key)):
        raise ValueError(f"{where}: key {key!r} is not a (source host, destination host) pair of names")
    for host in key:
        if not _is_host(fabric, host):
            raise ValueError(f"{where}: route {key[0]} -> {key[1]}: {fabric.topology} has no host {host!r} "
                             f"(its hosts: {fabric.hosts[0].name} to {fabric.hosts[-1].name})")
    if key[0] == key[1]:
        raise ValueError(f"{where}: route {key[0]} -> {key[1]}: a host to itself (give pairs of distinct hosts)")
    return key


def _is_host(fabric: Fabric, name: str) -> bool:
    try:
        fabric.host(name)
    except KeyError:
        return False
    return True


def _path(fabric: Fabric, pair: tuple[str, str], switches, route: str) -> list[str]:
    """The switches of one route, checked."""
    if not isinstance(switches, (list, tuple)) or not all(isinstance(s, str) for s in switches):
        raise ValueError(f"{route}: {switches!r} is not a list of switch names")
    if not switches:
        raise ValueError(f"{route}: the path is empty (it must list at least the switch of both hosts)")
    unknown = next((s for s in switches if not fabric.is_switch(s)), None)
    if unknown is not None:
        raise ValueError(f"{route}: {fabric.topology} has no switch {unknown!r}")
    for end, host, switch in (("start", pair[0], switches[0]), ("end", pair[1], switches[-1])):
        if switch != fabric.host(host).switch:
            raise ValueError(f"{route}: must {end} at {fabric.host(host).switch}, the switch of {host}, "
                             f"not at {switch}")
    for here, there in zip(switches, switches[1:]):
        if not any(nb == there for _, nb in fabric.switch_neighbours(here)):
            raise ValueError(f"{route}: {here} and {there} are not linked")
    twice = next((s for i, s in enumerate(switches) if s in switches[:i]), None)
    if twice is not None:
        raise ValueError(f"{route}: visits {twice} twice (a loop): {' > '.join(switches)}")
    return list(switches)
