"""Monte Carlo graph search (MCGS) for play: one game, transpositions share one node.

Follows KataGo's graph-search formulation: PUCT selection runs on *edge* visit counts
``N(n, a)``, and after every playout each node on the path recomputes

    Q(n) = (U(n) + sum_a N(n, a) * Q_n(child_a)) / N(n),   N(n) = 1 + sum_a N(n, a)

where ``U(n)`` is the evaluator's own value of ``n`` and ``Q_n(child)`` is the child's
value seen from the player to move at ``n``. Values are stored, as in
:mod:`c4fast.mcts`, from the view of the player who moved INTO the node, so
``Q_n(child) = Q(child)`` and ``Q(n)`` uses ``-Q(child)``.

Arrays (capacity ``N`` nodes, ``E = N * width`` edges, hash table of ``T`` slots)::

    key       uint64  [N]  Zobrist hash of the node's position (c4fast.bitboard)
    visits    int32   [N]  N(n)
    util      float64 [N]  U(n), mover's view; util_draw: draw probability
    q, q_draw float64 [N]  Q(n) and its draw part
    first_edge int32  [N]  UNEXPANDED or index of the first out-edge (contiguous)
    num_edges int8    [N]; terminal int8 [N] (as in mcts); inflight int32 [N]
    edge_move int8 [E], edge_prior float32 [E], edge_visits int32 [E],
    edge_child int32 [E] (NO_NODE until first traversed), edge_inflight int32 [E]
    table     int32   [T]  open addressing (linear probing) from key to node, NO_NODE empty
    util_ml, q_ml float64 [N]  the evaluator's estimate of the plies to the game's end from
                           the node's position (wdl column 4; 0 when it gives none) and its
                           mean over the node's playouts, updated as Q is:
                           ``M(n) = (U_M(n) + sum_a N(n, a) * (1 + M(child_a))) / N(n)``;
                           0 at a terminal, the proof's plies at a proven node

Proven results (exact game values under perfect play) propagate through the graph::

    proof     int8    [N]  PROOF_NONE, or PROOF_WIN / PROOF_DRAW / PROOF_LOSS for the
                           side to move at the node; proof_len int16 [N]: plies to the end
                           along the proof (fastest known win, slowest loss)

A terminal node is proven when created (the side to move there has lost, or drawn). An
expanded node is proven from its children alone (so transpositions cannot mislead it):
a win if some child is a proven loss for the child's side to move, a loss if every child
is a proven win for its side to move, a draw if every child is proven and the best is a
draw. With ``sensible`` moves only, the pruned columns lose at once, so this still holds.
Backup recomputes the proof of every node on the path; selection re-derives it at every
node it passes (a parent reached through another path may not have seen a child's proof
yet). A proven node's Q is its exact value (+-1, or 0 with draw share 1), a playout that
reaches one ends there (counting that value, like a terminal), and selection never
chooses a child that is a proven win for its side to move (a proven loss for the mover)
while the node is unproven. The search stops once the root is proven;
:meth:`GraphSearch.best_move` plays the fastest proven win, else, of the moves that are
not proven losses, the highest Q among those with at least ``SearchConfig.select_q`` times
the most visits (0: the most visited), else the slowest proven loss. Without proofs in the
graph, the search is exactly the plain MCGS.

With ``SearchConfig.moves_left_slope`` > 0 and an evaluator that gives the moves-left
estimate, a decisive node's children that are visited or proven add the bounded moves-left
utility to their score (:func:`c4fast.puct.moves_left_utility`; convention in
SearchConfig), a proven child with its exact distance (``proof_len``).

Memory is reclaimed between moves: :meth:`GraphSearch.set_position` and
:meth:`GraphSearch.advance` clear the graph, unless ``set_position(..., keep=True)`` finds
the new position already in it (then the graph is kept, as a graph search can: every
node's statistics belong to its position, whatever the root). The graph is full when a playout needs a
node or edges beyond capacity: the search then stops early and ``pool_full`` is set
(never an out-of-bounds write). Root Dirichlet noise and forced playouts are
self-play features and are not applied here. Two positions whose 64-bit hashes
collide would share a node (probability ~ n^2 / 2^65 for n nodes).
"""

from __future__ import annotations

import math
import time
from typing import NamedTuple

import numpy as np
from numba import njit

from c4fast import bitboard as bb
from c4fast.config import SearchConfig
from c4fast.encode import NUM_PLANES, encode_position
from c4fast.game import IllegalMove, check_setup
from c4fast.mcts import (
    MAX_DEPTH,
    NOT_TERMINAL,
    TERMINAL_DRAW,
    TERMINAL_WIN,
    UNEXPANDED,
    landing_softmax,
)
from c4fast.puct import child_totals, exploration_scale, fpu_value, moves_left_utility, puct_score

NO_NODE = -1
PROOF_NONE = 0
PROOF_WIN = 1  # for the side to move at the node
PROOF_DRAW = 2
PROOF_LOSS = 3
PROOF_NAMES = {PROOF_WIN: "win", PROOF_DRAW: "draw", PROOF_LOSS: "loss"}
_NO_LEN = 1 << 14
_LEAF = 0
_TERMINAL = 1
_COLLISION = 2
_FULL = 3


class Graph(NamedTuple):
    key: np.ndarray
    visits: np.ndarray
    util: np.ndarray
    util_draw: np.ndarray
    q: np.ndarray
    q_draw: np.ndarray
    first_edge: np.ndarray
    num_edges: np.ndarray
    terminal: np.ndarray
    inflight: np.ndarray
    edge_move: np.ndarray
    edge_prior: np.ndarray
    edge_visits: np.ndarray
    edge_child: np.ndarray
    edge_inflight: np.ndarray
    proof: np.ndarray
    proof_len: np.ndarray
    table: np.ndarray
    counters: np.ndarray  # [nodes used, edges used, pool_full, transposition hits]
    util_ml: np.ndarray
    q_ml: np.ndarray


class Paths(NamedTuple):
    nodes: np.ndarray  # int32 [L, MAX_DEPTH]
    edges: np.ndarray  # int32 [L, MAX_DEPTH]: edges[k, i] leads from nodes[k, i] to nodes[k, i+1]
    depth: np.ndarray  # int32 [L]: number of nodes on the path
    positions: np.ndarray  # POSITION_DTYPE [L]: leaf positions


_NODES = 0
_EDGES = 1
_FULLC = 2
_TRANSP = 3


def make_graph(max_nodes: int, width: int) -> Graph:
    n = int(max_nodes)
    e = n * int(width)
    t = 1 << max(4, int(math.ceil(math.log2(2 * n))))
    return Graph(
        np.zeros(n, np.uint64), np.zeros(n, np.int32), np.zeros(n), np.zeros(n),
        np.zeros(n), np.zeros(n), np.full(n, UNEXPANDED, np.int32), np.zeros(n, np.int8),
        np.zeros(n, np.int8), np.zeros(n, np.int32),
        np.zeros(e, np.int8), np.zeros(e, np.float32), np.zeros(e, np.int32),
        np.full(e, NO_NODE, np.int32), np.zeros(e, np.int32),
        np.zeros(n, np.int8), np.zeros(n, np.int16),
        np.full(t, NO_NODE, np.int32), np.zeros(4, np.int64),
        np.zeros(n), np.zeros(n),
    )


@njit(cache=True)
def clear_graph(gr):
    gr.table[:] = NO_NODE
    gr.counters[:] = 0


@njit(cache=True)
def _lookup(gr, key):
    mask = gr.table.shape[0] - 1
    i = np.int64(key & np.uint64(mask))
    while True:
        n = gr.table[i]
        if n == NO_NODE or gr.key[n] == key:
            return i, n
        i = (i + 1) & mask


@njit(cache=True)
def _new_node(gr, slot, key, terminal):
    n = gr.counters[_NODES]
    if n >= gr.key.shape[0]:
        return NO_NODE
    gr.counters[_NODES] = n + 1
    gr.table[slot] = n
    gr.key[n] = key
    gr.visits[n] = 0
    gr.util[n] = 0.0
    gr.util_draw[n] = 0.0
    gr.q[n] = 0.0
    gr.q_draw[n] = 0.0
    gr.first_edge[n] = UNEXPANDED
    gr.num_edges[n] = 0
    gr.terminal[n] = terminal
    gr.inflight[n] = 0
    gr.proof[n] = PROOF_NONE
    gr.proof_len[n] = 0
    gr.util_ml[n] = 0.0
    gr.q_ml[n] = 0.0
    return n


@njit(cache=True)
def _set_proof(gr, n, proof, plies):
    """Mark node n proven; its Q becomes the exact value (mover-into-the-node view), its
    moves left the exact plies."""
    gr.proof[n] = proof
    gr.proof_len[n] = plies
    gr.q_ml[n] = plies
    if proof == PROOF_WIN:
        gr.q[n] = -1.0
        gr.q_draw[n] = 0.0
    elif proof == PROOF_LOSS:
        gr.q[n] = 1.0
        gr.q_draw[n] = 0.0
    else:
        gr.q[n] = 0.0
        gr.q_draw[n] = 1.0


@njit(inline="always")
def _children_proof(gr, n):
    """(proof, plies) of expanded node n from its children's proofs alone."""
    first = gr.first_edge[n]
    ne = gr.num_edges[n]
    all_proven = ne > 0
    win_len = _NO_LEN
    any_draw = False
    draw_len = 0
    loss_len = 0
    for i in range(ne):
        c = gr.edge_child[first + i]
        if c == NO_NODE:
            all_proven = False
            continue
        p = gr.proof[c]
        pl = np.int64(gr.proof_len[c])
        if p == PROOF_LOSS:
            if pl < win_len:
                win_len = pl
        elif p == PROOF_NONE:
            all_proven = False
        elif p == PROOF_DRAW:
            any_draw = True
            if pl > draw_len:
                draw_len = pl
        elif pl > loss_len:
            loss_len = pl
    if win_len < _NO_LEN:
        return PROOF_WIN, win_len + 1
    if all_proven:
        if any_draw:
            return PROOF_DRAW, draw_len + 1
        return PROOF_LOSS, loss_len + 1
    return PROOF_NONE, 0


@njit(cache=True)
def add_root(gr, pos):
    """Create (or find) the node of record `pos`; returns its index."""
    slot, n = _lookup(gr, pos.hash)
    if n == NO_NODE:
        n = _new_node(gr, slot, pos.hash, NOT_TERMINAL)
    return n


@njit(inline="always")
def _select_edge(gr, node, params):
    """The PUCT edge at unproven `node`, never one into a proven win for its side to move;
    -1 if the children prove the node (it is then marked)."""
    if params.proofs:
        proof, plies = _children_proof(gr, node)
        if proof != PROOF_NONE:
            _set_proof(gr, node, proof, plies)
            return -1
    first = gr.first_edge[node]
    ne = gr.num_edges[node]
    total, visited_mass = child_totals(gr.edge_visits, gr.edge_inflight, gr.edge_prior, first, ne)
    sqrt_total = exploration_scale(total)
    parent_q = -gr.q[node] if gr.visits[node] > 0 else 0.0
    fpu = fpu_value(parent_q, visited_mass, params.fpu_reduction)
    # moves-left utility (off at slope 0): at a decisive node, for visited or proven children
    use_ml = params.moves_left_slope > 0.0 and gr.visits[node] > 0 and abs(parent_q) > params.moves_left_threshold
    parent_m = gr.q_ml[node]
    best = first
    best_score = -math.inf
    for i in range(ne):
        e = first + i
        c = gr.edge_child[e]
        if c != NO_NODE and gr.proof[c] == PROOF_WIN:
            continue  # a proven loss for the mover (some other edge is not: node unproven)
        nv = gr.edge_visits[e]
        vl = gr.edge_inflight[e]
        w = nv + vl
        if w > 0:
            qc = gr.q[c] if (c != NO_NODE and gr.visits[c] > 0) else fpu
            q = (qc * nv - vl) / w
        else:
            q = fpu
        score = puct_score(q, gr.edge_prior[e], sqrt_total, w, params.c_puct)
        if use_ml and c != NO_NODE and (gr.visits[c] > 0 or gr.proof[c] != PROOF_NONE):
            score += moves_left_utility(gr.q[c], 1.0 + gr.q_ml[c] - parent_m, params.moves_left_slope,
                                        params.moves_left_cap)
        if score > best_score:
            best_score = score
            best = e
    return best


@njit(cache=True)
def _refresh(gr, n, proofs):
    """Recompute N(n), Q(n) and the proof of an expanded node from its edges (a proven
    node's Q is its exact value)."""
    first = gr.first_edge[n]
    total_n = 1
    s = gr.util[n]
    sd = gr.util_draw[n]
    sm = gr.util_ml[n]
    for i in range(gr.num_edges[n]):
        e = first + i
        nv = gr.edge_visits[e]
        if nv > 0:
            c = gr.edge_child[e]
            total_n += nv
            s -= nv * gr.q[c]
            sd += nv * gr.q_draw[c]
            sm += nv * (1.0 + gr.q_ml[c])
    gr.visits[n] = total_n
    gr.q[n] = s / total_n
    gr.q_draw[n] = sd / total_n
    gr.q_ml[n] = sm / total_n
    if proofs:
        proof, plies = _children_proof(gr, n)
        if proof != PROOF_NONE:
            _set_proof(gr, n, proof, plies)


@njit(cache=True)
def _backup(gr, paths, k, leaf_value, leaf_draw, leaf_ml, is_known, proofs):
    """Back up path k: an evaluated leaf (leaf_value, leaf_draw: mover-into-the-leaf view;
    leaf_ml: plies left from it), or, with `is_known`, a terminal or proven leaf that counts
    its exact value."""
    depth = paths.depth[k]
    leaf = paths.nodes[k, depth - 1]
    if is_known:
        if gr.terminal[leaf] != NOT_TERMINAL:
            gr.visits[leaf] += 1
            gr.q[leaf] = gr.util[leaf]
            gr.q_draw[leaf] = gr.util_draw[leaf]
            gr.q_ml[leaf] = 0.0
    else:
        gr.util[leaf] = leaf_value
        gr.util_draw[leaf] = leaf_draw
        gr.util_ml[leaf] = leaf_ml
        if gr.first_edge[leaf] == UNEXPANDED:
            gr.visits[leaf] = 1
            gr.q[leaf] = leaf_value
            gr.q_draw[leaf] = leaf_draw
            gr.q_ml[leaf] = leaf_ml
        else:
            _refresh(gr, leaf, proofs)
    gr.inflight[leaf] -= 1
    for i in range(depth - 2, -1, -1):
        n = paths.nodes[k, i]
        e = paths.edges[k, i]
        gr.edge_visits[e] += 1
        gr.edge_inflight[e] -= 1
        gr.inflight[n] -= 1
        _refresh(gr, n, proofs)


@njit(cache=True)
def _undo(gr, paths, k):
    depth = paths.depth[k]
    for i in range(depth):
        gr.inflight[paths.nodes[k, i]] -= 1
    for i in range(depth - 1):
        gr.edge_inflight[paths.edges[k, i]] -= 1


@njit(cache=True)
def _descend(gr, root, root_pos, paths, k, params):
    pos = paths.positions[k]
    bb.copy_into(root_pos, pos)
    node = root
    paths.nodes[k, 0] = node
    depth = 1
    gr.inflight[node] += 1
    while gr.first_edge[node] != UNEXPANDED and gr.terminal[node] == NOT_TERMINAL \
            and gr.proof[node] == PROOF_NONE:
        e = _select_edge(gr, node, params)
        if e < 0:
            break  # its children prove it (news from another path to them)
        bb.play(pos, np.int64(gr.edge_move[e]))
        child = gr.edge_child[e]
        if child == NO_NODE:
            slot, child = _lookup(gr, pos.hash)
            if child == NO_NODE:
                if pos.result == bb.RUNNING:
                    term = NOT_TERMINAL
                elif pos.result == bb.DRAW:
                    term = TERMINAL_DRAW
                else:
                    term = TERMINAL_WIN
                child = _new_node(gr, slot, pos.hash, term)
                if child == NO_NODE:
                    paths.depth[k] = depth
                    _undo(gr, paths, k)
                    gr.counters[_FULLC] = 1
                    return _FULL
                if term == TERMINAL_WIN:
                    gr.util[child] = 1.0
                    if params.proofs:
                        _set_proof(gr, child, PROOF_LOSS, 0)
                elif term == TERMINAL_DRAW:
                    gr.util_draw[child] = 1.0
                    if params.proofs:
                        _set_proof(gr, child, PROOF_DRAW, 0)
            else:
                gr.counters[_TRANSP] += 1
            gr.edge_child[e] = child
        gr.edge_inflight[e] += 1
        paths.edges[k, depth - 1] = e
        node = child
        paths.nodes[k, depth] = node
        depth += 1
        gr.inflight[node] += 1
    paths.depth[k] = depth
    if gr.terminal[node] != NOT_TERMINAL or gr.proof[node] != PROOF_NONE:
        _backup(gr, paths, k, 0.0, 0.0, 0.0, True, params.proofs)
        return _TERMINAL
    if gr.inflight[node] > 1:
        _undo(gr, paths, k)
        return _COLLISION
    return _LEAF


@njit(cache=True)
def select_kernel(gr, root, root_pos, paths, params, target, planes):
    """Up to `leaves_per_step` descents; returns (leaves for the evaluator, stop flag)."""
    k = 0
    for _ in range(params.leaves_per_step):
        if gr.visits[root] + gr.inflight[root] >= target or gr.proof[root] != PROOF_NONE:
            break
        status = _descend(gr, root, root_pos, paths, k, params)
        if status == _LEAF:
            encode_position(paths.positions[k], planes[k])
            k += 1
        elif status == _COLLISION:
            break
        elif status == _FULL:
            return k, True
    return k, False


@njit(cache=True)
def expand_and_backup_kernel(gr, paths, n, logits, wdl, params):
    """Expand leaf k < n with logits[k] and back up wdl[k] (side to move at the leaf; a 4th
    column: the plies left)."""
    has_ml = wdl.shape[1] > 3
    for k in range(n):
        leaf = paths.nodes[k, paths.depth[k] - 1]
        pos = paths.positions[k]
        if params.sensible:
            cols = bb.sensible_columns(pos)
        else:
            cols = bb.legal_columns(pos)
        ne = bb.popcount16(cols)
        start = gr.counters[_EDGES]
        if gr.first_edge[leaf] == UNEXPANDED and start + ne <= gr.edge_move.shape[0]:
            i = 0
            for col in range(pos.width):
                if (cols >> col) & 1:
                    gr.edge_move[start + i] = col
                    gr.edge_visits[start + i] = 0
                    gr.edge_inflight[start + i] = 0
                    gr.edge_child[start + i] = NO_NODE
                    i += 1
            landing_softmax(pos, cols, logits[k], gr.edge_prior, start)
            gr.first_edge[leaf] = start
            gr.num_edges[leaf] = ne
            gr.counters[_EDGES] = start + ne
        elif gr.first_edge[leaf] == UNEXPANDED:
            gr.counters[_FULLC] = 1
        value = float(wdl[k, 0]) - float(wdl[k, 2])
        ml = float(wdl[k, 3]) if has_ml else 0.0
        _backup(gr, paths, k, -value, float(wdl[k, 1]), ml, False, params.proofs)


@njit(cache=True)
def root_edge_visits(gr, root, out):
    out[:] = 0.0
    first = gr.first_edge[root]
    if first == UNEXPANDED:
        return
    for i in range(gr.num_edges[root]):
        out[gr.edge_move[first + i]] = gr.edge_visits[first + i]


class GraphSearch:
    """MCGS over one game of a fixed board size; `leaves_per_step` leaves per evaluator call."""

    def __init__(self, config: SearchConfig, height: int, width: int, max_playouts: int = 20000,
                 seed: int = 0):
        self.height, self.width, _, _ = check_setup(height, width, None)
        self.config = config
        self.params = config.kernel_params()
        lps = config.leaves_per_step
        self.max_playouts = int(max_playouts)
        if self.max_playouts < 1:
            raise ValueError(f"max_playouts must be >= 1, got {max_playouts}")
        self.graph = make_graph(self.max_playouts + lps + 2, self.width)
        self.paths = Paths(np.zeros((lps, MAX_DEPTH), np.int32), np.zeros((lps, MAX_DEPTH), np.int32),
                           np.zeros(lps, np.int32), np.zeros(lps, bb.POSITION_DTYPE))
        self.position = np.zeros(1, bb.POSITION_DTYPE)
        self.root = NO_NODE
        self.planes = np.zeros((lps, NUM_PLANES, self.height, self.width), np.float32)
        self.moves_left_known = False  # the evaluator gives moves-left estimates (wdl width 4)

    def set_position(self, state: np.ndarray, keep: bool = False) -> bool:
        """Search from this POSITION_DTYPE record (a Game's .state). Clears the graph, unless
        `keep` and the position already has a node in it (e.g. two plies after the last
        root): that node becomes the root with everything searched below it, its visits
        counting toward the playout target. A graph more than half full, or one that
        overflowed, is cleared all the same. Returns whether the graph was kept."""
        s = np.asarray(state).reshape(-1)[0]
        if (int(s["height"]), int(s["width"])) != (self.height, self.width):
            raise ValueError(f"position is {int(s['height'])}x{int(s['width'])}, this search is "
                             f"{self.height}x{self.width}")
        if int(s["result"]) != bb.RUNNING:
            raise ValueError("cannot search a finished game")
        self.position[0] = s
        if keep and self.root != NO_NODE and not self.pool_full and 2 * self.num_nodes <= len(self.graph.key):
            _, node = _lookup(self.graph, self.position[0]["hash"])
            if node != NO_NODE:
                self.root = int(node)
                return True
        clear_graph(self.graph)
        self.root = int(add_root(self.graph, self.position[0]))
        return False

    def advance(self, col: int) -> None:
        """Play `col` at the root and clear the graph (memory reclaimed between moves)."""
        if not (0 <= col < self.width) or not (int(bb.legal_columns(self.position[0])) >> col) & 1:
            raise IllegalMove(f"column {col} is not legal here")
        bb.play(self.position[0], int(col))
        if int(self.position[0]["result"]) == bb.RUNNING:
            clear_graph(self.graph)
            self.root = int(add_root(self.graph, self.position[0]))
        else:
            self.root = NO_NODE

    @property
    def pool_full(self) -> bool:
        return bool(self.graph.counters[_FULLC])

    @property
    def num_nodes(self) -> int:
        return int(self.graph.counters[_NODES])

    @property
    def transpositions(self) -> int:
        """Edges that were linked to an already existing node."""
        return int(self.graph.counters[_TRANSP])

    def playouts(self) -> int:
        return int(self.graph.visits[self.root])

    def run(self, evaluator, playouts: int | None = None, seconds: float | None = None) -> int:
        """Search until the root has `playouts` visits, `seconds` pass (at least one
        evaluation) or the root is proven; returns the root visits."""
        if self.root == NO_NODE:
            raise ValueError("no position to search (call set_position)")
        target = self.max_playouts if playouts is None else int(playouts)
        if not 1 <= target <= self.max_playouts:
            raise ValueError(f"playouts must be in 1..{self.max_playouts}, got {playouts}")
        deadline = None if seconds is None else time.perf_counter() + seconds
        gr = self.graph
        while gr.proof[self.root] == PROOF_NONE:
            n, full = select_kernel(gr, self.root, self.position[0], self.paths, self.params,
                                    target, self.planes)
            if n:
                logits, wdl = evaluator.evaluate(self.planes[:n], self.paths.positions[:n])
                if wdl.ndim != 2 or wdl.shape[1] not in (3, 4):
                    raise ValueError(f"the evaluator's wdl must be (n, 3) or (n, 4), got {wdl.shape}")
                self.moves_left_known = wdl.shape[1] == 4
                if not self.moves_left_known and self.params.moves_left_slope != 0.0:
                    self.params = self.params._replace(moves_left_slope=0.0)  # no estimate: utility off
                expand_and_backup_kernel(gr, self.paths, n, logits, wdl, self.params)
            if full or gr.visits[self.root] >= target:
                break
            if deadline is not None and time.perf_counter() >= deadline and gr.visits[self.root] > 0:
                break
        return int(gr.visits[self.root])

    def root_visits(self) -> np.ndarray:
        """Edge visit count per column at the root (float64, length width)."""
        out = np.zeros(self.width)
        root_edge_visits(self.graph, self.root, out)
        return out

    def root_wdl(self) -> np.ndarray:
        """(win, draw, loss) for the side to move at the root."""
        v = -self.graph.q[self.root]
        d = self.graph.q_draw[self.root]
        return np.array([(1 - d + v) / 2, d, (1 - d - v) / 2])

    def root_moves_left(self) -> float | None:
        """Search estimate of the plies to the game's end from the root (the exact distance
        once proven), or None when the evaluator gives no moves-left estimate."""
        if not self.moves_left_known or self.root == NO_NODE or self.graph.visits[self.root] == 0:
            return None
        return float(self.graph.q_ml[self.root])

    def _root_edges(self) -> list[tuple[int, int, float, int, int, float]]:
        """(column, edge visits, prior, child proof, child proof plies, child Q) of every root
        edge; Q is the child's value for the side to move at the root (0 if unvisited)."""
        gr = self.graph
        first = int(gr.first_edge[self.root])
        if first == UNEXPANDED:
            return []
        out = []
        for e in range(first, first + int(gr.num_edges[self.root])):
            c = int(gr.edge_child[e])
            proof = PROOF_NONE if c == NO_NODE else int(gr.proof[c])
            plies = 0 if c == NO_NODE else int(gr.proof_len[c])
            q = float(gr.q[c]) if c != NO_NODE and (gr.visits[c] > 0 or proof != PROOF_NONE) else 0.0
            out.append((int(gr.edge_move[e]), int(gr.edge_visits[e]), float(gr.edge_prior[e]),
                        proof, plies, q))
        return out

    def root_q(self) -> dict[int, float]:
        """{column: Q} for the root columns this search visited or proved: the mean value in
        [-1, 1] for the side to move at the root (+1 a win, -1 a loss; exact once proven),
        the quantity :meth:`best_move` ranks by with ``SearchConfig.select_q`` > 0."""
        return {c: q for c, v, _, proof, _, q in self._root_edges() if v > 0 or proof != PROOF_NONE}

    def root_proof(self) -> str | None:
        """'win', 'draw' or 'loss' for the side to move if the root is proven, else None."""
        return PROOF_NAMES.get(int(self.graph.proof[self.root]))

    def root_proven(self) -> dict[int, str]:
        """{column: 'win' | 'draw' | 'loss'} for the side to move at the root, for the
        searched columns whose result is proven."""
        flip = {PROOF_LOSS: "win", PROOF_DRAW: "draw", PROOF_WIN: "loss"}
        return {c: flip[p] for c, _, _, p, _, _ in self._root_edges() if p != PROOF_NONE}

    def best_move(self) -> int:
        """The fastest proven win (most visited on ties); else, among the columns that are not
        proven losses, the one of highest Q among those with at least ``SearchConfig.select_q``
        times the most visits (with 0: the most visited one); else (the root is proven lost)
        the slowest loss. Remaining ties go to more visits, the higher prior, then the lower
        column (so a search too short to visit any child plays the policy's move).

        Where the value knows distance (``TrainConfig.value_distance``), Q separates a nearer
        win or a farther loss that the visit counts of a short search do not: with 0.5, six
        6x7 nets made 0.08-0.70 fewer exact misses per 100 of Pons's positions and the shipped
        one won 0.54 against itself by visits (docs/ABLATIONS.md, "The move by Q")."""
        edges = self._root_edges()
        if not edges:
            raise ValueError("the root is not expanded: run the search first")
        wins = [(-plies, v, p, -c) for c, v, p, proof, plies, _ in edges if proof == PROOF_LOSS]
        if wins:
            return -max(wins)[3]
        safe = [(c, v, p, q) for c, v, p, proof, _, q in edges if proof != PROOF_WIN]
        if safe:
            share = self.config.select_q
            most = max(v for _, v, _, _ in safe)
            if share > 0 and most > 0:
                return -max((q, v, p, -c) for c, v, p, q in safe if v >= share * most)[3]
            return -max((v, p, -c) for c, v, p, _ in safe)[2]
        return -max((plies, v, p, -c) for c, v, p, _, plies, _ in edges)[3]


def bench_mcgs(seed: int = 0, playouts: int = 20000) -> dict:
    """Playouts/s of the play path: one 12x12 game, uniform evaluator, 8 leaves per step."""
    from c4fast.evaluators import UniformEvaluator
    from c4fast.game import Game

    gs = GraphSearch(SearchConfig(leaves_per_step=8), 12, 12, max_playouts=playouts, seed=seed)
    ev = UniformEvaluator()
    root = Game(12, 12, (5, 6)).state
    gs.set_position(root)
    gs.run(ev, playouts=50)
    gs.set_position(root)
    t0 = time.perf_counter()
    n = gs.run(ev, playouts=playouts)
    dt = time.perf_counter() - t0
    return {"mcgs_playouts_per_s": round(n / dt), "mcgs_playouts": n,
            "mcgs_nodes": gs.num_nodes, "mcgs_transpositions": gs.transpositions}
