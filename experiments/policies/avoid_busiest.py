"""A routing policy of one's own: route around the busiest switch.

    bigraph-emu model -t bigraph:m=2,n=4 -c allreduce -p file:experiments/policies/avoid_busiest.py

Every pair first takes a shortest path (fewest switches; among equals, the
neighbours in port order). The busiest switch is the one the most traffic
crosses on its way: the run's demand in bytes where the workload is known,
else one per pair (a pair's own two switches do not count: no path avoids
them). Every pair crossing it moves to a shortest path around it, if that
path is at most SLACK switches longer. docs/routing.md says what `fabric`
offers and what the answer must be.
"""
from collections import deque

SLACK = 1   # switches a detour may add to the shortest path


def shortest(fabric, start, goal, avoid=None):
    """The switches of a shortest path from `start` to `goal` that does not
    cross `avoid`; None if there is none."""
    before = {start: None}
    queue = deque([start])
    while queue:
        here = queue.popleft()
        if here == goal:
            path = [here]
            while before[path[-1]] is not None:
                path.append(before[path[-1]])
            return path[::-1]
        for _, neighbour in fabric.switch_neighbours(here):
            if neighbour not in before and neighbour != avoid:
                before[neighbour] = here
                queue.append(neighbour)
    return None


def routes(fabric, demands):
    ends = {(a.name, b.name): (a.switch, b.switch) for a in fabric.hosts for b in fabric.hosts if a.name != b.name}
    between = {switches: shortest(fabric, *switches) for switches in set(ends.values())}
    paths = {pair: between[switches] for pair, switches in ends.items()}
    load = {}
    for pair, path in paths.items():
        for switch in path[1:-1]:
            load[switch] = load.get(switch, 0) + (demands.get(pair, 0) if demands is not None else 1)
    busiest = max(load, key=lambda switch: (load[switch], switch), default=None)
    if busiest is None or load[busiest] == 0:
        return paths
    for pair, path in paths.items():
        if busiest in path[1:-1]:
            detour = shortest(fabric, *ends[pair], avoid=busiest)
            if detour and len(detour) <= len(path) + SLACK:
                paths[pair] = detour
    return paths
