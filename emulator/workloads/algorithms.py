"""Collective algorithms (pure): one record each, the only place an
algorithm is named.

An algorithm says how the ranks run the two halves of the collectives that
have a choice: the reduce-scatter half and the allgather half (allreduce
runs both, emulator.workloads.collectives says which a collective has). Its
record holds the steps of every rank, the rank counts it takes, its
closed-form alpha-beta time and, where it has them, two fast paths the
model reads instead of step objects: the whole schedule as arrays (`flat`)
and the collective as lock-step rounds (`rounds`). Without them the model
flattens the steps (emulator.workloads.schedule does the choosing). An
algorithm may also pick another per call (`picks`, as auto does): the
schedule, the model and the results then use the one it picked.

To add an algorithm, write one record and put it in ALGORITHMS.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Callable

import numpy as np

from emulator.fabric.mapping import Nodes   # (node, local index) of every rank, from the placement
from emulator.workloads.flat import Flat, one_each
from emulator.workloads.steps import Step, Transfer, chunks, exchange

# A round of a lock-step collective, as the fast path gives it: transfers
# src[i] -> dst[i] of nbytes[i], one step of every rank that takes part,
# repeated `repeats` times.
Round = tuple[np.ndarray, np.ndarray, np.ndarray, int]


@dataclass(frozen=True)
class Algorithm:
    name: str
    help: str
    # (ranks, rank, bytes, reduce_scatter, allgather) -> that rank's steps
    rank_steps: Callable[[int, int, int, bool, bool], list[Step]]
    # messages each rank sends in one half on p ranks: the alpha term of the
    # closed form (0: no closed form on p ranks, or `closed_form` has it)
    half_messages: Callable[[int], int] = lambda ranks: 0
    # (ranks, reduce_scatter, allgather) -> "" if it runs on that many ranks, else what it needs
    needs: Callable[[int, bool, bool], str] = lambda ranks, rs, ag: ""
    # (ranks, bytes, reduce_scatter, allgather) -> the schedule as arrays, or None: flatten the steps
    flat: Callable[[int, int, bool, bool], Flat | None] | None = None
    # (ranks, bytes, reduce_scatter, allgather) -> ([Round], what the rounds approximate), or None
    rounds: Callable[[int, int, bool, bool], tuple[list[Round], str] | None] | None = None
    # (halves, ranks, bytes, alpha_s, seconds per byte) -> the closed-form time, for an
    # algorithm whose time is not `half_messages` messages and (p-1)/p * S bytes per half
    closed_form: Callable[[int, int, float, float, float], float] | None = None
    # (ranks, bytes, reduce_scatter, allgather) -> the name of the algorithm that runs the call,
    # for one that picks per call (auto); None: this one runs
    picks: Callable[[int, int, bool, bool], str] | None = None
    # (the node of every rank, from the placement) -> the record that runs on those nodes, for
    # an algorithm that reads them (hierarchical); None: it runs the same on any placement
    placed: Callable[[Nodes], Algorithm] | None = None

    def alpha_beta_s(self, halves: int, ranks: int, size_bytes: float, rate_mbps: float, alpha_s: float) -> float:
        """Closed-form time of a congestion-free call (docs/eflops.md): each
        half is `half_messages` messages and (p-1)/p * S bytes per rank
        link, unless the record has a `closed_form` of its own."""
        beta = 8 / (rate_mbps * 1e6)   # seconds per byte
        if self.closed_form:
            return self.closed_form(halves, ranks, size_bytes, alpha_s, beta)
        messages = self.half_messages(ranks)
        if messages < 1:
            raise ValueError(f"no alpha-beta formula for {self.name} on {ranks} ranks")
        return halves * (messages * alpha_s + (ranks - 1) / ranks * size_bytes * beta)


def _power_of_two(p: int) -> bool:
    return p >= 1 and p & (p - 1) == 0


# --- ring ------------------------------------------------------------------

def _ring_half(p: int, rank: int, sizes: list[int], phase: str, shift: int) -> list[Step]:
    """p-1 steps: send chunk (rank+shift-k) to rank+1, receive chunk
    (rank+shift-k-1) from rank-1."""
    nxt, prev = (rank + 1) % p, (rank - 1) % p
    made: dict[tuple[int, int], Step] = {}   # chunks differ by a byte at most: a few distinct steps, each made once
    steps = []
    for k in range(p - 1):
        key = (sizes[(rank + shift - k) % p], sizes[(rank + shift - k - 1) % p])
        if key not in made:
            made[key] = exchange(nxt, key[0], prev, key[1], phase)
        steps.append(made[key])
    return steps


def _ring_steps(p: int, rank: int, size: int, reduce_scatter: bool, allgather: bool) -> list[Step]:
    # After reduce-scatter, rank r owns chunk r+1; allgather circulates it.
    sizes = chunks(size, p)
    return ((_ring_half(p, rank, sizes, "reduce-scatter", 0) if reduce_scatter else [])
            + (_ring_half(p, rank, sizes, "allgather", 1) if allgather else []))


def _ring_flat(p: int, size: int, reduce_scatter: bool, allgather: bool) -> Flat:
    """_ring_half for every rank and half at once."""
    sizes = np.array(chunks(size, p), dtype=np.int64)
    shifts = [s for s, on in ((0, reduce_scatter), (1, allgather)) if on]
    per_rank = len(shifts) * (p - 1)
    rank = np.repeat(np.arange(p), per_rank)
    k = np.tile(np.arange(p - 1), p * len(shifts))
    shift = np.tile(np.repeat(shifts, p - 1), p)
    chunk = rank + shift - k
    return one_each(p, per_rank, (rank + 1) % p, sizes[chunk % p], (rank - 1) % p, sizes[(chunk - 1) % p])


def _ring_rounds(p: int, size: int, reduce_scatter: bool, allgather: bool):
    """Every step the same pattern: one round, repeated."""
    rank = np.arange(p)
    chunk = -(-size // p)
    note = "" if size % p == 0 else f"ring chunks taken as {chunk} bytes (at most 1 byte more each)"
    return [(rank, (rank + 1) % p, np.full(p, chunk), (reduce_scatter + allgather) * (p - 1))], note


RING = Algorithm(
    "ring", "ring: p-1 steps per half, each rank sending to the next (bandwidth-optimal, p-1 latencies)",
    _ring_steps, half_messages=lambda p: p - 1, flat=_ring_flat, rounds=_ring_rounds)


# --- recursive halving-doubling -------------------------------------------

def _hd_core(p: int, rank: int, size: int, halving: bool, doubling: bool) -> list[Step]:
    """Halving-doubling on p = 2^d ranks (Rabenseifner).

    Reduce-scatter: at step k partner = rank ^ 2^k; the current segment is
    split in two, the lower-bit rank keeps the low half and sends the high
    half. Allgather: the same partners in reverse order, segments doubling.
    """
    d = p.bit_length() - 1
    lo, hi = 0, size
    segments = []
    for k in range(d):
        mid = (lo + hi) // 2
        keep_low = not (rank >> k) & 1
        segments.append((lo, hi, mid, keep_low))
        lo, hi = (lo, mid) if keep_low else (mid, hi)
    steps = []
    if halving:
        for k, (lo_k, hi_k, mid, keep_low) in enumerate(segments):
            give, keep = (hi_k - mid, mid - lo_k) if keep_low else (mid - lo_k, hi_k - mid)
            steps.append(exchange(rank ^ (1 << k), give, rank ^ (1 << k), keep, "reduce-scatter"))
    if doubling:
        for k in reversed(range(d)):
            lo_k, hi_k, mid, keep_low = segments[k]
            mine, theirs = (mid - lo_k, hi_k - mid) if keep_low else (hi_k - mid, mid - lo_k)
            steps.append(exchange(rank ^ (1 << k), mine, rank ^ (1 << k), theirs, "allgather"))
    return steps


def _hd_steps(p: int, rank: int, size: int, halving: bool, doubling: bool) -> list[Step]:
    """Halving-doubling for any p: when p is not a power of two, the first
    2r ranks (r = p - 2^floor(log2 p)) pair up, even ranks hand their data to
    the odd neighbour before the core and get the result back after it
    (the standard pre/post step)."""
    core = 1 << (p.bit_length() - 1)
    extra = p - core
    if rank < 2 * extra and rank % 2 == 0:   # sits out the core
        steps = []
        if halving:
            steps.append(Step((Transfer(rank + 1, size),), (), "pre"))
        if doubling:
            steps.append(Step((), (Transfer(rank + 1, size),), "post"))
        return steps
    virtual = rank // 2 if rank < 2 * extra else rank - extra

    def real(v: int) -> int:
        return 2 * v + 1 if v < extra else v + extra

    steps = []
    if halving and rank < 2 * extra:
        steps.append(Step((), (Transfer(rank - 1, size),), "pre"))
    for s in _hd_core(core, virtual, size, halving, doubling):
        steps.append(Step(tuple(Transfer(real(t.peer), t.nbytes) for t in s.sends),
                          tuple(Transfer(real(t.peer), t.nbytes) for t in s.recvs), s.phase))
    if doubling and rank < 2 * extra:
        steps.append(Step((Transfer(rank - 1, size),), (), "post"))
    return steps


def _hd_columns(p: int, size: int, halving: bool, doubling: bool):
    """_hd_core on p = 2^d ranks for every rank at once: per step, in step
    order, (peer, bytes sent, bytes received) arrays over ranks."""
    d = p.bit_length() - 1
    rank = np.arange(p)
    lo, hi = np.zeros(p, dtype=np.int64), np.full(p, size, dtype=np.int64)
    halves = []
    for k in range(d):
        mid = (lo + hi) // 2
        keep_low = (rank >> k) & 1 == 0
        give, keep = np.where(keep_low, hi - mid, mid - lo), np.where(keep_low, mid - lo, hi - mid)
        halves.append((rank ^ (1 << k), give, keep))
        lo, hi = np.where(keep_low, lo, mid), np.where(keep_low, mid, hi)
    # doubling: the same partners in reverse, each side sending what it kept
    return (halves if halving else []) + ([(peer, keep, give) for peer, give, keep in reversed(halves)]
                                          if doubling else [])


def _hd_flat(p: int, size: int, halving: bool, doubling: bool) -> Flat | None:
    if not _power_of_two(p):
        return None   # the pre/post steps: flattened from the steps
    peer, send, recv = (np.stack(c, axis=1).ravel() for c in zip(*_hd_columns(p, size, halving, doubling)))
    return one_each(p, len(peer) // p, peer, send, peer, recv)


def _hd_rounds(p: int, size: int, halving: bool, doubling: bool):
    """The core's rounds on the ranks that take part; with p not a power of
    two, the first 2*extra ranks pair up (the odd one of each pair in the
    core) and the pre and post steps are a round each."""
    core = 1 << (p.bit_length() - 1)
    extra = p - core
    virtual = np.arange(core)
    real = np.where(virtual < extra, 2 * virtual + 1, virtual + extra)
    rounds = [(real, real[peer], send, 1) for peer, send, _ in _hd_columns(core, size, halving, doubling)]
    if extra:
        evens = 2 * np.arange(extra)
        whole = np.full(extra, size)
        rounds = [(evens, evens + 1, whole, 1)] + rounds + [(evens + 1, evens, whole, 1)]
    return rounds, ""


def _hd_needs(p: int, reduce_scatter: bool, allgather: bool) -> str:
    """Allreduce takes any count (pre/post steps); its halves alone do not."""
    if reduce_scatter and allgather or _power_of_two(p):
        return ""
    return "a power-of-two rank count (allreduce handles any count with pre/post steps; or use algorithm ring)"


HALVING_DOUBLING = Algorithm(
    "halving-doubling", "recursive halving-doubling (Rabenseifner): log2(p) steps per half, partners "
                        "rank ^ 2^k (EFLOPS' choice on BiGraph, with HDRM)",
    _hd_steps, half_messages=lambda p: p.bit_length() - 1 if _power_of_two(p) else 0, needs=_hd_needs,
    flat=_hd_flat, rounds=_hd_rounds)


# --- NCCL's double binary tree ----------------------------------------------

# Chunks per tree: each tree's half of the data goes up and down in this
# many pieces, a piece per step and tree edge. NCCL cuts a fixed chunk size
# (so its chunk count grows with the message); a fixed count keeps every
# rank at TREE_CHUNKS + 2*ceil(log2 p) - 1 steps whatever the size: few step
# objects and one closed form. With 8 the pipeline's fill and drain add
# (H - 1/2)/8 to the bandwidth term (a third at 8 ranks, 80% at 128: see
# _tree_time); more chunks would shrink that at a latency each. 8 is also
# NCCL's pipeline depth (NCCL_STEPS, the slots of a connection's buffer).
TREE_CHUNKS = 8


@dataclass(frozen=True)
class Tree:
    """One binary tree over the ranks: parent (-1 at the root), children,
    height (edges down to its deepest leaf) and depth (edges up to the root)."""
    root: int
    parent: tuple[int, ...]
    children: tuple[tuple[int, ...], ...]
    height: tuple[int, ...]
    depth: tuple[int, ...]


def _btree(p: int, rank: int) -> tuple[int, list[int]]:
    """NCCL's ncclGetBtree (src/graph/trees.cc): (parent, children) of
    `rank` in the tree rooted at 0 built from the bits of the rank. With b
    the lowest set bit of r, r's parent is (r ^ b) | 2b (or r ^ b past the
    last rank) and its children r - b/2 and r + b/2 (or the nearest
    r + b/4, r + b/8, ... below p); odd ranks are leaves, rank 0 has the one
    child 2^(ceil(log2 p) - 1)."""
    bit = 1
    while bit < p and not bit & rank:
        bit <<= 1
    if rank == 0:
        return -1, [bit >> 1] if p > 1 else []
    up = (rank ^ bit) | (bit << 1)
    if up >= p:
        up = rank ^ bit
    low = bit >> 1
    down0 = rank - low if low else -1
    down1 = rank + low if low else -1
    while down1 >= p:   # as NCCL's loop: b/2 (twice), then b/4, ...
        down1 = rank + low if low else -1
        low >>= 1
    return up, [c for c in (down0, down1) if c >= 0]


def _tree(p: int, relabel: Callable[[int], int], back: Callable[[int], int]) -> Tree:
    """The btree with rank r placed where `relabel` (and its inverse `back`) says."""
    links = [_btree(p, back(r)) for r in range(p)]
    parent = tuple(relabel(u) if u >= 0 else -1 for u, _ in links)
    children = tuple(tuple(relabel(c) for c in down) for _, down in links)
    root = parent.index(-1)
    depth, order = [0] * p, [root]
    for r in order:   # breadth first: parents before children
        for c in children[r]:
            depth[c] = depth[r] + 1
            order.append(c)
    height = [0] * p
    for r in reversed(order):
        height[r] = max((height[c] + 1 for c in children[r]), default=0)
    return Tree(root, parent, children, tuple(height), tuple(depth))


@functools.lru_cache(maxsize=64)
def double_tree(p: int) -> tuple[Tree, Tree]:
    """NCCL's ncclGetDtree: tree 0 is the btree; tree 1 is its mirror
    (r -> p-1-r) for an even p and the btree shifted by one rank
    (r -> r+1 mod p) for an odd p. The btree's inner ranks are even, its
    leaves odd; either way tree 1's inner ranks are tree 0's leaves (for an
    odd p but rank 0, tree 0's root with one child, which the shift makes
    inner in tree 1 too), so every rank forwards in at most one tree."""
    if p % 2:
        second = _tree(p, lambda r: (r + 1) % p, lambda r: (r - 1) % p)
    else:
        second = _tree(p, lambda r: p - 1 - r, lambda r: p - 1 - r)
    return _tree(p, lambda r: r, lambda r: r), second


# A move: one transfer as the tree sees it, (peer, bytes, tree, chunk, "reduce" or "broadcast").
Move = tuple[int, int, int, int, str]


def tree_moves(p: int, rank: int, size: int) -> list[tuple[list[Move], list[Move]]]:
    """What `rank` sends and receives in each of its steps, each transfer
    with its tree, chunk and direction (the steps, and what checks them).

    Tree 0 carries the first ceil(S/2) bytes, tree 1 the rest, each in
    TREE_CHUNKS chunks. Up (reduce): a rank of height h sends chunk c to its
    parent at label c + h, by then summed over its subtree (its children,
    of height <= h-1, sent theirs at earlier labels). Down (broadcast): the
    root (height H) has chunk c whole at label c + H, and a rank of depth d
    sends it on to its children at label c + H + d. Sender and receiver of
    a transfer put it in the step of the same label, so no rank waits for a
    later label of another (no deadlock); reduce and broadcast overlap as in
    NCCL, chunk c coming down while later chunks still go up. A rank's
    steps are the labels it has transfers in; within a step, tree 0's come
    before tree 1's on both sides, so a pair's transfers match in order."""
    halves = (size - size // 2, size // 2)
    labels: dict[int, tuple[list[Move], list[Move]]] = {}

    def add(label: int, side: int, move: Move) -> None:
        labels.setdefault(label, ([], []))[side].append(move)

    for t, tree in enumerate(double_tree(p)):
        top = tree.height[tree.root]
        up, depth = tree.parent[rank], tree.depth[rank]
        for c, nbytes in enumerate(chunks(halves[t], TREE_CHUNKS)):
            if up >= 0:
                add(c + tree.height[rank], 0, (up, nbytes, t, c, "reduce"))
                add(c + top + depth - 1, 1, (up, nbytes, t, c, "broadcast"))
            for child in tree.children[rank]:
                add(c + tree.height[child], 1, (child, nbytes, t, c, "reduce"))
                add(c + top + depth, 0, (child, nbytes, t, c, "broadcast"))
    return [labels[k] for k in sorted(labels)]


def _tree_steps(p: int, rank: int, size: int, reduce_scatter: bool, allgather: bool) -> list[Step]:
    steps = []
    for sends, recvs in tree_moves(p, rank, size):
        phases = sorted({m[4] for m in sends + recvs}, reverse=True)   # reduce, then broadcast
        steps.append(Step(_per_peer(sends), _per_peer(recvs), "+".join(phases)))
    return steps


def _per_peer(moves: list[Move]) -> tuple[Transfer, ...]:
    """One transfer per peer: a step's moves to one peer (a chunk up, another
    down, or both trees' on one edge) go as one message on its connection,
    as NCCL's channels would; both ends merge alike, so they still match."""
    nbytes: dict[int, int] = {}
    for peer, n, *_ in moves:
        nbytes[peer] = nbytes.get(peer, 0) + n
    return tuple(Transfer(peer, n) for peer, n in nbytes.items())


def _tree_load(p: int) -> int:
    """Transfers the busiest rank sends (and receives) in a step: one per
    tree neighbour (4 from 4 ranks on: a parent and two children in the
    tree it forwards in, a parent in the other)."""
    return max(sum((t.parent[r] >= 0) + len(t.children[r]) for t in double_tree(p)) for r in range(p))


def _tree_time(halves: int, p: int, size: float, alpha_s: float, beta: float) -> float:
    """The tree's closed form, congestion-free.

    Labels: from 0 (the leaves send chunk 0 up) to C-1 + 2H-1 (the deepest
    leaves receive chunk C-1), H = ceil(log2 p) the height of both trees,
    C = TREE_CHUNKS: C + 2H - 1 steps, a latency each. While the pipeline
    is full, the busiest rank moves LOAD chunks of S/2C bytes per step each
    way, one per tree neighbour (4 from p = 4 on: a parent and two children
    in the tree it forwards in, a parent in the other); in the 2H - 1 steps
    where it fills (chunks only going up) or drains (only coming down), half
    of that. So
        T = (C + 2H - 1) * alpha + LOAD * S/(2C) * beta * (C + (2H - 1)/2)
          = (C + 2H - 1) * alpha + 2S*beta * (1 + (H - 1/2)/C)       (LOAD = 4)
    ~2*log2(p) + C latencies, and about S per rank per direction per half
    (2S in all: NCCL's tree algbw is busbw/2) stretched by the fill and
    drain. The model, where no link is shared, is up to 15% below it (ranks
    off the critical path fill sooner); a lock-step bound would be
    (C + 2H - 1) * (alpha + LOAD * S/(2C) * beta)."""
    if halves != 2:
        raise ValueError("tree has a closed form for allreduce only")
    fill = 2 * (p - 1).bit_length() - 1
    return (TREE_CHUNKS + fill) * alpha_s + _tree_load(p) * size / (2 * TREE_CHUNKS) * beta * (TREE_CHUNKS + fill / 2)


def _tree_needs(p: int, reduce_scatter: bool, allgather: bool) -> str:
    if reduce_scatter and allgather:
        return ""
    return ("to run as allreduce (NCCL runs its trees for allreduce only: the reduce up ends at two roots, "
            "not in every rank's share; use ring, halving-doubling or auto)")


TREE = Algorithm(
    "tree", f"NCCL's double binary tree (allreduce only): each of two trees reduces half the data up and "
            f"broadcasts it down in {TREE_CHUNKS} pipelined chunks: ~2 log2(p) + {TREE_CHUNKS} latencies, "
            f"2S bytes sent by a forwarding rank",
    _tree_steps, needs=_tree_needs, closed_form=_tree_time)


# --- auto: ring or tree per call, as NCCL's tuner ---------------------------------

# NCCL's tuner takes, per algorithm, latency + size / bandwidth from its tables and
# runs the lowest. Our table: the records' closed forms at 500 us per message (the
# model's default --alpha-us) and 50 Mbit/s (the default link rate). Only their
# product matters (3125 bytes). The choice is made where the steps are built, which
# know neither a run's alpha nor its rates: a run at others keeps this choice.
AUTO_ALPHA_S = 500e-6
AUTO_RATE_MBPS = 50.0


def _auto_picks(p: int, size: int, reduce_scatter: bool, allgather: bool) -> str:
    """Ring or tree, whichever closed form is lower (ring on a tie, and
    where tree does not run: reduce-scatter, allgather)."""
    fits = [a for a in (RING, TREE) if not a.needs(p, reduce_scatter, allgather)]
    return min(fits, key=lambda a: a.alpha_beta_s(reduce_scatter + allgather, p, size, AUTO_RATE_MBPS,
                                                   AUTO_ALPHA_S)).name


def _auto_steps(p: int, rank: int, size: int, reduce_scatter: bool, allgather: bool) -> list[Step]:
    chosen = ALGORITHMS[_auto_picks(p, size, reduce_scatter, allgather)]
    return chosen.rank_steps(p, rank, size, reduce_scatter, allgather)


AUTO = Algorithm(
    "auto", f"ring or tree per call, whichever's closed form is lower at {AUTO_ALPHA_S * 1e6:g} us per message "
            f"and {AUTO_RATE_MBPS:g} Mbit/s (as NCCL's tuner): tree for small allreduces on many ranks; "
            "ring for reduce-scatter and allgather",
    _auto_steps, picks=_auto_picks)


# --- hierarchical: rings inside the nodes, then across them -----------------------

def node_positions(nodes: Nodes) -> Nodes:
    """Each rank's (node position, local position): its node among the
    group's nodes by node index, itself among the group's ranks on that
    node by local index (then rank). Equal placements give equal positions,
    so calls on them share one schedule; a plain host keeps node -1."""
    ids = sorted({node for node, _ in nodes if node >= 0})
    where = {node: g for g, node in enumerate(ids)}
    on: dict[int, list[int]] = {}
    for rank, (node, _) in enumerate(nodes):
        on.setdefault(node, []).append(rank)
    local = {}
    for node, ranks in on.items():
        for position, rank in enumerate(sorted(ranks, key=lambda r: (nodes[r][1], r))):
            local[rank] = position if node >= 0 else 0
    return tuple((where.get(node, -1), local[rank]) for rank, (node, _) in enumerate(nodes))


def _hier_shape(places: Nodes) -> str:
    """What the placement lacks for hierarchical ("": nothing)."""
    if any(g < 0 for g, _ in places):
        return ("a fabric with nodes (accelerators in machines, joined inside each by its interconnect), not "
                "plain hosts, where it would be ring (use ring)")
    counts = [0] * (1 + max(g for g, _ in places))
    for g, _ in places:
        counts[g] += 1
    if len(set(counts)) > 1:
        shown = ", ".join(map(str, counts[:8])) + (", ..." if len(counts) > 8 else "")
        return (f"the same number of its ranks on every node it spans, so that each rank has a peer of the same "
                f"local position on every other node (got {shown} ranks on its {len(counts)} nodes)")
    return ""


def _ring_among(members: list[int], me: int, sizes: list[int], phase: str, shift: int) -> list[Step]:
    """_ring_half over `members` (ranks, in ring order), `me` the position of the rank."""
    made: dict[Step, Step] = {}
    out = []
    for step in _ring_half(len(members), me, sizes, phase, shift):
        if step not in made:
            made[step] = Step(tuple(Transfer(members[t.peer], t.nbytes) for t in step.sends),
                              tuple(Transfer(members[t.peer], t.nbytes) for t in step.recvs), step.phase)
        out.append(made[step])
    return out


@dataclass(frozen=True)
class _Grid:
    """The ranks of a hierarchical call: rank[g][l] on node position g,
    local position l (L ranks on each of M nodes), and where each rank is."""
    rank: tuple[tuple[int, ...], ...]
    places: Nodes

    @property
    def shape(self) -> tuple[int, int]:
        return len(self.rank), len(self.rank[0])   # M, L


def _hier_steps(grid: _Grid, rank: int, size: int, reduce_scatter: bool, allgather: bool) -> list[Step]:
    """Reduce-scatter: a ring over the rank's node (chunks of S/L; it ends
    owning chunk l+1, as ring), then a ring over the ranks of its local
    position on the other nodes, reducing that chunk in M shards.
    Allgather: the same rings in reverse order. Allreduce is both: the
    middle two rings make the allreduce of the node's chunk across nodes."""
    g, l = grid.places[rank]
    nodes, local = grid.shape
    in_node, across = list(grid.rank[g]), [grid.rank[i][l] for i in range(nodes)]
    sizes = chunks(size, local)
    shard = chunks(sizes[(l + 1) % local], nodes)
    steps = []
    if reduce_scatter:
        steps += _ring_among(in_node, l, sizes, "reduce-scatter", 0)
        steps += _ring_among(across, g, shard, "inter-node reduce-scatter", 0)
    if allgather:
        steps += _ring_among(across, g, shard, "inter-node allgather", 1)
        steps += _ring_among(in_node, l, sizes, "allgather", 1)
    return steps


def _hier_flat(grid: _Grid, size: int, reduce_scatter: bool, allgather: bool) -> Flat:
    """_hier_steps for every rank at once (each ring as _ring_flat's)."""
    nodes, local = grid.shape
    at = np.array(grid.rank, dtype=np.int64)
    g, l = (np.array(c, dtype=np.int64) for c in zip(*grid.places))
    sizes = np.array(chunks(size, local), dtype=np.int64)
    owned = sizes[(l + 1) % local][:, None]   # the chunk each rank reduces across nodes
    in_node = (at[g, (l + 1) % local], at[g, (l - 1) % local], l, local, lambda c: sizes[c])
    across = (at[(g + 1) % nodes, l], at[(g - 1) % nodes, l], g, nodes,
              lambda c: owned // nodes + (c < owned % nodes))
    columns = []
    for (nxt, prev, me, n, part), shift in ((in_node, 0), (across, 0), (across, 1), (in_node, 1)):
        if n > 1 and (reduce_scatter if shift == 0 else allgather):
            chunk = me[:, None] + shift - np.arange(n - 1)[None, :]
            columns.append((np.repeat(nxt[:, None], n - 1, axis=1), part(chunk % n),
                            np.repeat(prev[:, None], n - 1, axis=1), part((chunk - 1) % n)))
    send_peer, send_bytes, recv_peer, recv_bytes = (np.concatenate(side, axis=1) for side in zip(*columns))
    return one_each(len(grid.places), send_peer.shape[1], send_peer.ravel(), send_bytes.ravel(),
                    recv_peer.ravel(), recv_bytes.ravel())


def _hier_rounds(grid: _Grid, size: int, reduce_scatter: bool, allgather: bool):
    """Three rounds, each repeated: the ring in the nodes (L-1 steps), the
    rings across (M-1 per half), the ring in the nodes again."""
    nodes, local = grid.shape
    at = np.array(grid.rank, dtype=np.int64)
    g, l = (np.array(c, dtype=np.int64) for c in zip(*grid.places))
    rank = at[g, l]
    chunk = -(-size // local)
    shard = -(-chunk // nodes)
    in_node = (rank, at[g, (l + 1) % local], np.full(len(rank), chunk))
    across = (rank, at[(g + 1) % nodes, l], np.full(len(rank), shard))
    rounds = [(*in_node, local - 1)] if reduce_scatter and local > 1 else []
    if nodes > 1:
        rounds.append((*across, (reduce_scatter + allgather) * (nodes - 1)))
    if allgather and local > 1:
        rounds.append((*in_node, local - 1))
    note = "" if size % (nodes * local) == 0 else \
        f"hierarchical chunks taken as {chunk} bytes in the nodes and {shard} across (at most 1 byte more each)"
    return rounds, note


def _hier_unplaced(p: int, rank: int, size: int, reduce_scatter: bool, allgather: bool) -> list[Step]:
    raise ValueError("hierarchical needs the node of every rank: build it with the placement's nodes")


HIERARCHICAL_HELP = ("NCCL's and Horovod's hierarchical allreduce on a fabric with nodes: a ring reduce-scatter "
                     "inside each node over its interconnect, a ring allreduce of each rank's 1/L across the nodes "
                     "among the ranks of the same local position (over their NICs, on their rail), a ring "
                     "allgather inside the node; needs L ranks on each of M nodes (L+M-2 latencies per half)")


def _hierarchical_on(nodes: Nodes) -> Algorithm:
    return _hierarchical(node_positions(nodes))


@functools.lru_cache(maxsize=64)
def _hierarchical(places: Nodes) -> Algorithm:
    """The record of hierarchical on ranks at these (node, local) positions."""
    shape = _hier_shape(places)

    def needs(p: int, reduce_scatter: bool, allgather: bool) -> str:
        if p != len(places):
            return f"the node of each of its ranks (the placement gave {len(places)})"
        return shape
    if shape:
        return dataclasses.replace(HIERARCHICAL, needs=needs, placed=None)
    grid = [[0] * (len(places) // (1 + max(g for g, _ in places))) for _ in range(1 + max(g for g, _ in places))]
    for rank, (g, l) in enumerate(places):
        grid[g][l] = rank
    on = _Grid(tuple(map(tuple, grid)), places)
    nodes, local = on.shape
    return Algorithm(
        HIERARCHICAL.name, HIERARCHICAL.help,
        lambda p, rank, size, rs, ag: _hier_steps(on, rank, size, rs, ag),
        half_messages=lambda p: local - 1 + nodes - 1, needs=needs,
        flat=lambda p, size, rs, ag: _hier_flat(on, size, rs, ag),
        rounds=lambda p, size, rs, ag: _hier_rounds(on, size, rs, ag))


HIERARCHICAL = Algorithm(
    "hierarchical", HIERARCHICAL_HELP, _hier_unplaced,
    needs=lambda p, rs, ag: "the nodes its ranks run on (a placement on a fabric with nodes)",
    placed=_hierarchical_on)


ALGORITHMS: dict[str, Algorithm] = {a.name: a for a in (RING, HALVING_DOUBLING, TREE, AUTO, HIERARCHICAL)}


def algorithm(name: str, nodes: Nodes | None = None) -> Algorithm:
    """The record of `name`; for one that reads the nodes of its ranks
    (`placed`), the record for `nodes` (None: not known here, and it refuses
    through its `needs`)."""
    try:
        record = ALGORITHMS[name]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r}; choose one of: {', '.join(ALGORITHMS)}") from None
    return record.placed(tuple(nodes)) if record.placed and nodes is not None else record

