"""Connected components by rounds of hash-range steps: large-star / small-star (numpy, no I/O).

The algorithm is Kiveris et al. 2014, "Connected Components in MapReduce and Beyond": the
graph is a set of undirected edges, each held by both of its endpoints, and every node belongs
to one hash range. A step is a map over each node's neighbour list, so a task that holds the
edges of one range of nodes does its share of a step without seeing any other range:

* large-star: every node ``u`` links each neighbour larger than itself to ``m(u)``, the
  smallest of ``u`` and its neighbours;
* small-star: every node ``u`` links itself and each neighbour smaller than itself to ``m(u)``.

Both keep the components and never add edges; alternated, they end in a forest of stars, each
centred on its component's smallest node. A node is *settled* when it has no smaller neighbour
(a centre) or exactly one and no larger (a leaf): a step whose input has every node settled
changes nothing, so the rounds stop there.

Nodes are ordered by a bijective mix of their ids (:func:`mix`), not by the ids themselves: the
paper's round bound assumes a random order, and a chain of documents in input order (a-b-c-d,
the worst case) would otherwise shrink by one node per round. The survivor is not the centre
but the smallest original id of a component (:func:`star_labels`), the global rule.
"""

from __future__ import annotations

import numpy as np

# splitmix64's multipliers; every shift is 32 so that each xorshift is its own inverse.
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_M1_INV = np.uint64(pow(0xBF58476D1CE4E5B9, -1, 1 << 64))
_M2_INV = np.uint64(pow(0x94D049BB133111EB, -1, 1 << 64))
_S32 = np.uint64(32)

# Records of the work files between steps (packed, little-endian). The first u32 names the
# destination bucket (``bucketed_by_first_u32``); it is ignored when read back.
EDGE = np.dtype([("part", "<u4"), ("src", "<u8"), ("dst", "<u8")])
# A clustered document on its way to its survivor's file group: survivor, node, cluster size.
LABEL = np.dtype([("group", "<u4"), ("survivor", "<u8"), ("node", "<u8"), ("size", "<u4")])
# A clustered document on its way to its own file group: its survivor's group and the cluster's
# rank among that group's clusters (the cluster number is that group's offset plus the rank).
NUMBERED = np.dtype([("group", "<u4"), ("node", "<u8"), ("survivor_group", "<u4"), ("rank", "<u4"), ("size", "<u4"), ("survivor", "<u4")])


def mix(nodes: np.ndarray) -> np.ndarray:
    """A bijection of u64 node ids that orders them as at random (the same on every machine)."""
    x = nodes.astype(np.uint64, copy=True)
    x ^= x >> _S32
    x *= _M1
    x ^= x >> _S32
    x *= _M2
    x ^= x >> _S32
    return x


def unmix(keys: np.ndarray) -> np.ndarray:
    """The inverse of :func:`mix`."""
    x = keys.astype(np.uint64, copy=True)
    x ^= x >> _S32
    x *= _M2_INV
    x ^= x >> _S32
    x *= _M1_INV
    x ^= x >> _S32
    return x


def part_of(keys: np.ndarray, parts: int) -> np.ndarray:
    """The hash range (0..parts-1) of each mixed key: ranges of equal width of the key space."""
    return (((keys >> _S32) * np.uint64(parts)) >> _S32).astype(np.uint32)


def both_ways(a: np.ndarray, b: np.ndarray, parts: int) -> np.ndarray:
    """EDGE records of undirected edges ``{a[i], b[i]}``, one held by each endpoint's range."""
    out = np.empty(2 * len(a), dtype=EDGE)
    out["src"][: len(a)], out["dst"][: len(a)] = a, b
    out["src"][len(a) :], out["dst"][len(a) :] = b, a
    out["part"] = part_of(out["src"], parts)
    return out


def neighbour_lists(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The edges sorted by (src, dst), repeats and self-loops dropped."""
    order = np.lexsort((dst, src))
    src, dst = src[order], dst[order]
    keep = src != dst
    keep[1:] &= (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])
    return src[keep], dst[keep]


def star_step(src: np.ndarray, dst: np.ndarray, large: bool) -> tuple[np.ndarray, np.ndarray, int]:
    """One step over the neighbour lists of some nodes (every edge of each ``src`` node, sorted
    by :func:`neighbour_lists`): the undirected edges it emits ``(a, b)``, and how many of the
    input's nodes were unsettled (0: the input is already a forest of stars, and the output is
    the same edges)."""
    if len(src) == 0:
        empty = np.zeros(0, dtype=np.uint64)
        return empty, empty, 0
    first = np.flatnonzero(np.concatenate(([True], src[1:] != src[:-1])))
    group = np.cumsum(np.concatenate(([True], src[1:] != src[:-1]))) - 1
    nodes = src[first]
    # Sorted by dst within a node: its first neighbour is its smallest.
    m_node = np.minimum(nodes, dst[first])
    m = m_node[group]
    smaller = dst < src
    n_smaller = np.add.reduceat(smaller.astype(np.int64), first)
    n_larger = np.diff(np.append(first, len(src))) - n_smaller
    unsettled = int(np.count_nonzero(((n_smaller >= 1) & (n_larger >= 1)) | (n_smaller >= 2)))
    if large:
        # Each larger neighbour v of u is linked to m(u) (< v: never a self-loop).
        pick = ~smaller
        return dst[pick], m[pick], unsettled
    # Each smaller neighbour v of u but m(u) itself, and u, are linked to m(u).
    pick = smaller & (dst != m)
    moved = m_node != nodes
    return np.concatenate((dst[pick], nodes[moved])), np.concatenate((m[pick], m_node[moved])), unsettled


def star_labels(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Of converged stars' neighbour lists (:func:`neighbour_lists`, every node settled): each
    centre's component as (survivor, node, size) in original ids, survivor the smallest id. A
    leaf's row comes from its centre (whose range may be another task's); a centre is a node
    with no smaller neighbour."""
    if len(src) == 0:
        empty = np.zeros(0, dtype=np.uint64)
        return empty, empty, np.zeros(0, dtype=np.uint32)
    is_first = np.concatenate(([True], src[1:] != src[:-1]))
    first = np.flatnonzero(is_first)
    centre = dst[first] > src[first]  # its smallest neighbour is larger: no smaller one
    group = np.cumsum(is_first) - 1
    rows = centre[group]
    c_src, c_dst, c_group = src[rows], unmix(dst[rows]), group[rows]
    if len(c_src) == 0:
        empty = np.zeros(0, dtype=np.uint64)
        return empty, empty, np.zeros(0, dtype=np.uint32)
    c_first = np.flatnonzero(np.concatenate(([True], c_group[1:] != c_group[:-1])))
    centres = c_src[c_first]
    centre_ids = unmix(centres)
    survivors = np.minimum(centre_ids, np.minimum.reduceat(c_dst, c_first))
    sizes = (np.diff(np.append(c_first, len(c_src))) + 1).astype(np.uint32)
    counts = np.diff(np.append(c_first, len(c_src)))
    survivor = np.concatenate((survivors, np.repeat(survivors, counts)))
    node = np.concatenate((centre_ids, c_dst))
    size = np.concatenate((sizes, np.repeat(sizes, counts)))
    return survivor, node, size


def components(a: np.ndarray, b: np.ndarray, parts: int = 1, max_steps: int = 1 << 30) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Connected components of the edges ``{a[i], b[i]}`` (original u64 ids) by the steps above,
    each range done separately as the phases do: (survivor, node, size) sorted by (survivor,
    node), and the steps taken. What the tests compare with union-find."""
    edges = both_ways(mix(a), mix(b), parts)
    steps = 0
    while True:
        if steps >= max_steps:
            raise RuntimeError(f"not converged after {max_steps} steps")
        emitted = []
        unsettled = 0
        for p in range(parts):
            mine = edges[edges["part"] == p]
            s, d = neighbour_lists(mine["src"], mine["dst"])
            x, y, u = star_step(s, d, large=steps % 2 == 0)
            unsettled += u
            emitted.append(both_ways(x, y, parts))
        steps += 1
        if unsettled == 0:
            break
        edges = np.concatenate(emitted)
    out = []
    for p in range(parts):
        mine = edges[edges["part"] == p]
        out.append(star_labels(*neighbour_lists(mine["src"], mine["dst"])))
    survivor = np.concatenate([o[0] for o in out])
    node = np.concatenate([o[1] for o in out])
    size = np.concatenate([o[2] for o in out])
    order = np.lexsort((node, survivor))
    return survivor[order], node[order], size[order], steps
