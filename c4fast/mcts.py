"""Batched array MCTS with virtual loss: many games of one board size searched together.

Data layout (struct of arrays, preallocated once, reused across moves and games)
-------------------------------------------------------------------------------
Node pool (:class:`Tree`), ``N = games * region`` nodes; game ``g`` owns the nodes
``[g * region, (g + 1) * region)``, so games never share nodes::

    visits        int32   [N]  completed visits (the node's own evaluation included)
    value_sum     float64 [N]  sum of values, from the view of the player who moved INTO the node
    draw_sum      float64 [N]  sum of draw probabilities
    prior         float32 [N]  policy prior of the move into the node
    move          int8    [N]  column of the move into the node
    first_child   int32   [N]  index of the first child, or UNEXPANDED; children are contiguous
    num_children  int8    [N]
    inflight      int32   [N]  virtual-loss count: descents through the node not yet backed up
    terminal      int8    [N]  NOT_TERMINAL, TERMINAL_WIN (the mover won) or TERMINAL_DRAW
    ml_sum        float64 [N]  sum of moves-left estimates (plies to the game's end from the
                               node's position; an evaluator's wdl column 4, 0 at a terminal)

Per game (:class:`GameSlots`): ``root``, ``next_free`` (next unused node of the region),
``target`` (root visits that end the search), ``full`` (full search: noise and forced
playouts), ``root_temp``, ``prepared`` (root noise/temperature applied, or the Gumbel
schedule started), ``positions``
(the root position record), ``pool_full`` (expansions skipped because the region was
full: an explicit counter, never an out-of-bounds write).

Leaves waiting for the evaluator (:class:`LeafBuffer`), ``L = games * leaves_per_step``::

    game int32 [L], node int32 [L], positions POSITION_DTYPE [L],
    path int32 [L, MAX_DEPTH], depth int32 [L]

Conventions
-----------
* Visit accounting: a *playout* is one descent that ends in a backup (a network leaf
  or a terminal node). The root's own first evaluation is a playout, so after ``n``
  playouts from a fresh root ``visits[root] == n`` and the children's visits sum to
  ``n - 1``.
* PUCT: ``score = Q + c_puct * P * sqrt(1 + S) / (1 + n)`` with ``n`` = child visits +
  virtual losses and ``S`` the sum of ``n`` over siblings. A virtual loss counts as a
  visit with value -1 for the mover. Unvisited children take the FPU value
  ``Q(parent) - fpu_reduction * sqrt(sum of priors of visited siblings)``. Ties go to the
  lowest column. With ``SearchConfig.moves_left_slope`` > 0 and an evaluator that gives the
  moves-left estimate, visited children of a decisive node add the bounded moves-left
  utility (:func:`c4fast.puct.moves_left_utility`, its convention in SearchConfig).
* Root search (``SearchConfig.root_search``): ``puct`` as above at every node; ``gumbel``
  forces the root's child by Gumbel top-m sampling and sequential halving (per-game state
  in :class:`c4fast.gumbel.GumbelRoots`, ``BatchedMCTS.groots``), PUCT below the root; the
  move is :meth:`BatchedMCTS.gumbel_move` and the policy target the completed-Q policy.
* Evaluator output: policy logits ``(B, H, W)`` over cells (the move of a column is its
  landing cell) and win/draw/loss probabilities ``(B, 3)`` for the side to move at the leaf,
  or ``(B, 4)`` with the estimated plies to the game's end last (moves left).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import NamedTuple

import numpy as np
from numba import njit

from c4fast import bitboard as bb
from c4fast.config import GumbelParams, KernelParams, SearchConfig
from c4fast.encode import NUM_PLANES, encode_position
from c4fast.game import IllegalMove, check_setup
from c4fast.gumbel import (WAIT, gumbel_choice, gumbel_root_child, improved_policy, make_gumbel_roots,
                           prepare_gumbel_root)
from c4fast.protocols import Evaluator
from c4fast.puct import child_totals, exploration_scale, fpu_value, moves_left_utility, puct_score
from c4fast.rollout import make_rng, uniform

UNEXPANDED = -1
NOT_TERMINAL = 0
TERMINAL_WIN = 1
TERMINAL_DRAW = 2
MAX_DEPTH = bb.MAX_SIZE * bb.MAX_SIZE + 2  # a path never exceeds the number of cells + root
FORCED_SCORE = 1e20

# select() outcomes for one descent
_LEAF = 0
_TERMINAL = 1
_COLLISION = 2


class Tree(NamedTuple):
    visits: np.ndarray
    value_sum: np.ndarray
    draw_sum: np.ndarray
    prior: np.ndarray
    move: np.ndarray
    first_child: np.ndarray
    num_children: np.ndarray
    inflight: np.ndarray
    terminal: np.ndarray
    ml_sum: np.ndarray


class GameSlots(NamedTuple):
    root: np.ndarray
    next_free: np.ndarray
    region_start: np.ndarray
    region_end: np.ndarray
    target: np.ndarray
    full: np.ndarray
    root_temp: np.ndarray
    prepared: np.ndarray
    positions: np.ndarray
    pool_full: np.ndarray


class LeafBuffer(NamedTuple):
    game: np.ndarray
    node: np.ndarray
    positions: np.ndarray
    path: np.ndarray
    depth: np.ndarray


def make_tree(n: int) -> Tree:
    return Tree(
        np.zeros(n, np.int32),
        np.zeros(n, np.float64),
        np.zeros(n, np.float64),
        np.zeros(n, np.float32),
        np.zeros(n, np.int8),
        np.full(n, UNEXPANDED, np.int32),
        np.zeros(n, np.int8),
        np.zeros(n, np.int32),
        np.zeros(n, np.int8),
        np.zeros(n, np.float64),
    )


# ------------------------------------------------------------------- node helpers
@njit(cache=True, inline="always")
def reset_node(tree, i, move, prior, terminal):
    tree.visits[i] = 0
    tree.value_sum[i] = 0.0
    tree.draw_sum[i] = 0.0
    tree.prior[i] = prior
    tree.move[i] = move
    tree.first_child[i] = UNEXPANDED
    tree.num_children[i] = 0
    tree.inflight[i] = 0
    tree.terminal[i] = terminal
    tree.ml_sum[i] = 0.0


@njit(cache=True)
def copy_node(src, i, dst, j):
    dst.visits[j] = src.visits[i]
    dst.value_sum[j] = src.value_sum[i]
    dst.draw_sum[j] = src.draw_sum[i]
    dst.prior[j] = src.prior[i]
    dst.move[j] = src.move[i]
    dst.first_child[j] = src.first_child[i]
    dst.num_children[j] = src.num_children[i]
    dst.inflight[j] = src.inflight[i]
    dst.terminal[j] = src.terminal[i]
    dst.ml_sum[j] = src.ml_sum[i]


@njit(cache=True)
def _gamma(rng, alpha):
    """Gamma(alpha, 1) sample (Marsaglia-Tsang; alpha < 1 via the U^(1/alpha) boost)."""
    boost = 1.0
    if alpha < 1.0:
        boost = uniform(rng) ** (1.0 / alpha)
        alpha += 1.0
    d = alpha - 1.0 / 3.0
    c = 1.0 / math.sqrt(9.0 * d)
    while True:
        # standard normal by Box-Muller
        u1 = uniform(rng)
        u2 = uniform(rng)
        x = math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi * u2)
        v = 1.0 + c * x
        if v <= 0.0:
            continue
        v = v * v * v
        u = uniform(rng)
        if u < 1.0 - 0.0331 * x * x * x * x or math.log(1.0 - u) < 0.5 * x * x + d * (1.0 - v + math.log(v)):
            return d * v * boost


@njit(cache=True)
def prepare_root(tree, games, g, params, rng):
    """Apply the root policy temperature and (full searches) Dirichlet noise to the
    priors of game g's root children. Called once per search, after the root is expanded."""
    r = games.root[g]
    first = tree.first_child[r]
    n = tree.num_children[r]
    if first == UNEXPANDED or n == 0:
        return
    t = games.root_temp[g]
    if t != 1.0:
        total = 0.0
        inv = 1.0 / t
        for i in range(n):
            p = float(tree.prior[first + i])
            q = p**inv if p > 0.0 else 0.0
            tree.prior[first + i] = q
            total += q
        if total > 0.0:
            for i in range(n):
                tree.prior[first + i] = tree.prior[first + i] / total
    if games.full[g] and params.noise_fraction > 0.0 and n > 1:
        eta = np.empty(n)
        total = 0.0
        for i in range(n):
            eta[i] = _gamma(rng, params.noise_alpha)
            total += eta[i]
        f = params.noise_fraction
        for i in range(n):
            tree.prior[first + i] = (1.0 - f) * tree.prior[first + i] + f * eta[i] / total
    games.prepared[g] = 1


@njit(cache=True, inline="always")
def select_child(tree, node, is_forcing_root, params):
    """Index of the child of `node` with the best PUCT score (virtual loss included)."""
    first = tree.first_child[node]
    n = tree.num_children[node]
    total, visited_mass = child_totals(tree.visits, tree.inflight, tree.prior, first, n)
    sqrt_total = exploration_scale(total)
    if tree.visits[node] > 0:
        parent_q = -tree.value_sum[node] / tree.visits[node]
    else:
        parent_q = 0.0
    fpu = fpu_value(parent_q, visited_mass, params.fpu_reduction)
    # moves-left utility (off at slope 0): at a decisive node, for visited children
    use_ml = params.moves_left_slope > 0.0 and tree.visits[node] > 0 \
        and abs(parent_q) > params.moves_left_threshold
    parent_m = tree.ml_sum[node] / tree.visits[node] if use_ml else 0.0
    best = first
    best_score = -math.inf
    for i in range(n):
        c = first + i
        w = tree.visits[c] + tree.inflight[c]
        p = float(tree.prior[c])
        if is_forcing_root and p > 0.0 and w < math.sqrt(params.forced_k * p * total):
            score = FORCED_SCORE
        else:
            if w > 0:
                q = (tree.value_sum[c] - tree.inflight[c]) / w
            else:
                q = fpu
            score = puct_score(q, p, sqrt_total, w, params.c_puct)
            if use_ml and tree.visits[c] > 0:
                nc = tree.visits[c]
                score += moves_left_utility(tree.value_sum[c] / nc, 1.0 + tree.ml_sum[c] / nc - parent_m,
                                            params.moves_left_slope, params.moves_left_cap)
        if score > best_score:
            best_score = score
            best = c
    return best


@njit(cache=True, inline="always")
def _backup(tree, paths, k, depth, value, draw, moves_left):
    """Add one visit along paths[k, :depth]; `value` is from the view of the mover into
    the last node of the path, `moves_left` the plies from its position to the end (one
    more per node up the path). Removes the descent's virtual loss."""
    v = value
    m = moves_left
    for i in range(depth - 1, -1, -1):
        n = paths[k, i]
        tree.visits[n] += 1
        tree.value_sum[n] += v
        tree.draw_sum[n] += draw
        tree.inflight[n] -= 1
        tree.ml_sum[n] += m
        v = -v
        m += 1.0


@njit(cache=True, inline="always")
def _undo_virtual_loss(tree, paths, k, depth):
    for i in range(depth):
        tree.inflight[paths[k, i]] -= 1


@njit(cache=True, inline="always")
def _descend(tree, games, g, leaves, k, params, root_child):
    """One descent of game g into leaf slot k (virtual loss applied along the path);
    `root_child` >= 0 forces the root's child (a Gumbel root's schedule), else PUCT."""
    node = games.root[g]
    pos = leaves.positions[k]
    bb.copy_into(games.positions[g], pos)
    path = leaves.path
    path[k, 0] = node
    depth = 1
    tree.inflight[node] += 1
    forcing = games.full[g] != 0 and params.forced_k > 0.0
    while tree.first_child[node] != UNEXPANDED and tree.terminal[node] == NOT_TERMINAL:
        if depth == 1 and root_child >= 0:
            node = root_child
        else:
            node = select_child(tree, node, forcing and depth == 1, params)
        if tree.terminal[node] == NOT_TERMINAL:
            bb.play_unchecked(pos, np.int64(tree.move[node]))
        else:
            bb.play(pos, np.int64(tree.move[node]))
        path[k, depth] = node
        depth += 1
        tree.inflight[node] += 1
    leaves.depth[k] = depth
    leaves.node[k] = node
    leaves.game[k] = g
    t = tree.terminal[node]
    if t != NOT_TERMINAL:
        if t == TERMINAL_WIN:
            _backup(tree, path, k, depth, 1.0, 0.0, 0.0)
        else:
            _backup(tree, path, k, depth, 0.0, 1.0, 0.0)
        return _TERMINAL
    if tree.inflight[node] > 1 or (tree.first_child[node] != UNEXPANDED):
        _undo_virtual_loss(tree, path, k, depth)
        return _COLLISION
    return _LEAF


@njit(cache=True)
def search_done(tree, games, g):
    r = games.root[g]
    return tree.visits[r] >= games.target[g] and tree.inflight[r] == 0


@njit(cache=True)
def finished_games(tree, games, active, out):
    """Write the indices of active games whose search is done into out; returns the count."""
    n = 0
    for g in range(games.root.shape[0]):
        if active[g] and search_done(tree, games, g):
            out[n] = g
            n += 1
    return n


@njit(cache=True)
def count_unfinished(tree, games, active):
    """Number of active games whose search has not reached its target."""
    n = 0
    for g in range(games.root.shape[0]):
        if active[g] and not search_done(tree, games, g):
            n += 1
    return n


@njit(cache=True)
def select_kernel(tree, games, leaves, active, params, planes, gparams, groots):
    """Descend every active, unfinished game up to `leaves_per_step` times.

    Terminal leaves are backed up at once; the others are written to the leaf buffer
    and their planes to planes[k]. Returns the number of leaves for the evaluator.
    With `gparams.enabled`, a prepared root's child is chosen by its Gumbel schedule
    (c4fast.gumbel); a game whose halving waits for backups stops for this step.
    """
    k = 0
    for g in range(games.root.shape[0]):
        if not active[g]:
            continue
        r = games.root[g]
        for _ in range(params.leaves_per_step):
            if tree.visits[r] + tree.inflight[r] >= games.target[g]:
                break
            root_child = -1
            if gparams.enabled and games.prepared[g]:
                root_child = gumbel_root_child(tree, groots, g, r, gparams)
                if root_child == WAIT:
                    break
            status = _descend(tree, games, g, leaves, k, params, root_child)
            if status == _LEAF:
                encode_position(leaves.positions[k], planes[k])
                k += 1
            elif status == _COLLISION:
                break
    return k


@njit(inline="always")
def landing_softmax(pos, cols, logits, prior, start):
    """prior[start + i] = softmax of the logits (H, W) at the landing cell of each column in
    the column mask `cols`, ascending. Each exp is stored in float32 before the division by
    the float64 total (the differential tests replicate exactly this rounding)."""
    mx = -math.inf
    for col in range(pos.width):
        if (cols >> col) & 1:
            v = logits[pos.top[col], col]
            if v > mx:
                mx = v
    total = 0.0
    i = 0
    for col in range(pos.width):
        if (cols >> col) & 1:
            e = math.exp(float(logits[pos.top[col], col]) - mx)
            total += e
            prior[start + i] = e
            i += 1
    for j in range(i):
        prior[start + j] = prior[start + j] / total


@njit(cache=True, inline="always")
def expand_node(tree, games, g, node, pos, logits, params):
    """Create the children of `node` (position `pos`) with softmax priors from the
    cell logits (H, W). Returns False if game g's region has no room (then the node
    stays a leaf and games.pool_full[g] is incremented)."""
    p = pos.ply & 1
    c0, c1, c2 = bb.playable_cells(pos)
    w0, w1, w2 = bb.winning_cells(pos, p)
    wins = bb.columns_of(w0 & c0, w1 & c1, w2 & c2, pos.width)
    if not params.sensible:
        cols = bb.legal_columns(pos)
    elif wins:
        cols = wins
    else:
        o0, o1, o2 = bb.winning_cells(pos, 1 - p)
        cols = bb.columns_of(o0 & c0, o1 & c1, o2 & c2, pos.width)
        if cols == 0:
            cols = bb.legal_columns(pos)
    n = bb.popcount16(cols)
    start = games.next_free[g]
    if start + n > games.region_end[g]:
        games.pool_full[g] += 1
        return False
    last_cell = pos.ply + 1 == pos.cells
    i = 0
    for col in range(pos.width):
        if (cols >> col) & 1:
            if (wins >> col) & 1:
                term = TERMINAL_WIN
            elif last_cell:
                term = TERMINAL_DRAW
            else:
                term = NOT_TERMINAL
            reset_node(tree, start + i, col, 0.0, term)
            i += 1
    landing_softmax(pos, cols, logits, tree.prior, start)
    tree.first_child[node] = start
    tree.num_children[node] = n
    games.next_free[g] = start + n
    return True


@njit(cache=True)
def expand_and_backup_kernel(tree, games, leaves, n, logits, wdl, params, rng, gparams, groots):
    """Expand leaf k < n with logits[k] (H, W), back up wdl[k] (win, draw, loss for the
    side to move at the leaf, and the estimated plies left if wdl has 4 columns), remove its
    virtual loss; prepare fresh roots (PUCT: root temperature and noise; Gumbel: the
    schedule, without either)."""
    has_ml = wdl.shape[1] > 3
    for k in range(n):
        g = leaves.game[k]
        node = leaves.node[k]
        expand_node(tree, games, g, node, leaves.positions[k], logits[k], params)
        value = float(wdl[k, 0]) - float(wdl[k, 2])
        ml = float(wdl[k, 3]) if has_ml else 0.0
        _backup(tree, leaves.path, k, leaves.depth[k], -value, float(wdl[k, 1]), ml)
        if node == games.root[g] and games.prepared[g] == 0:
            if gparams.enabled:
                if prepare_gumbel_root(tree, groots, g, node, games.target[g], gparams, rng):
                    games.prepared[g] = 1
            else:
                prepare_root(tree, games, g, params, rng)


# ----------------------------------------------------------- roots and reuse
@njit(cache=True)
def reset_root(tree, games, g):
    """Empty game g's region and make a fresh, unexpanded root."""
    r = games.region_start[g]
    games.root[g] = r
    reset_node(tree, r, -1, 1.0, NOT_TERMINAL)
    games.next_free[g] = r + 1
    games.prepared[g] = 0


@njit(cache=True)
def compact_subtree(tree, scratch, games, g, new_root):
    """Move the subtree under `new_root` to the start of game g's region (breadth-first,
    children kept contiguous), via the scratch pool."""
    base = games.region_start[g]
    copy_node(tree, new_root, scratch, 0)
    nxt = 1
    head = 0
    # scratch.first_child holds OLD indices until a node's children are copied
    while head < nxt:
        old_first = scratch.first_child[head]
        nc = scratch.num_children[head]
        if old_first != UNEXPANDED:
            scratch.first_child[head] = base + nxt
            for i in range(nc):
                copy_node(tree, old_first + i, scratch, nxt + i)
            nxt += nc
        head += 1
    for i in range(nxt):
        copy_node(scratch, i, tree, base + i)
    games.root[g] = base
    games.next_free[g] = base + nxt
    tree.move[base] = -1


@njit(cache=True)
def advance_kernel(tree, scratch, games, g, col, reuse):
    """Play `col` in game g's root position; keep the matching subtree if `reuse`."""
    r = games.root[g]
    child = -1
    first = tree.first_child[r]
    if first != UNEXPANDED:
        for i in range(tree.num_children[r]):
            if tree.move[first + i] == col:
                child = first + i
    bb.play(games.positions[g], col)
    if reuse and child >= 0 and tree.visits[child] > 0:
        compact_subtree(tree, scratch, games, g, child)
    else:
        reset_root(tree, games, g)
    games.prepared[g] = 0


@njit(cache=True)
def policy_target_kernel(tree, r, params, forced, out):
    """Visit counts of root r's children written to out[col]; with `forced`, KataGo's
    policy-target pruning: subtract forced playouts from every child but the most visited
    as long as its PUCT score stays below the best child's; children left with one visit
    are removed. Returns the total of `out`."""
    first = tree.first_child[r]
    n = tree.num_children[r]
    out[:] = 0.0
    if first == UNEXPANDED:
        return 0.0
    best = first
    total = 0.0
    for i in range(n):
        c = first + i
        total += tree.visits[c]
        if tree.visits[c] > tree.visits[best]:
            best = c
    for i in range(n):
        out[tree.move[first + i]] = tree.visits[first + i]
    if not forced or params.forced_k <= 0.0 or total <= 0.0:
        return total
    sqrt_total = exploration_scale(total)

    def puct(c, visits):
        return puct_score(tree.value_sum[c] / tree.visits[c], tree.prior[c], sqrt_total, visits, params.c_puct)

    best_score = puct(best, tree.visits[best])
    s = 0.0
    for i in range(n):
        c = first + i
        nv = float(tree.visits[c])
        if c != best and nv > 0:
            n_forced = math.sqrt(params.forced_k * tree.prior[c] * total)
            q = tree.value_sum[c] / tree.visits[c]
            gap = best_score - q
            floor_n = nv - n_forced
            if gap > 0.0:
                # smallest visits v with q + c*P*sqrt_total/(1+v) <= best_score
                need = params.c_puct * tree.prior[c] * sqrt_total / gap - 1.0
                nv = max(floor_n, need, 0.0) if need < nv else nv
                nv = min(nv, float(tree.visits[c]))
            if nv <= 1.0:
                nv = 0.0
            out[tree.move[c]] = nv
        s += out[tree.move[c]]
    return s


# ------------------------------------------------------------------ Python API
class BatchedMCTS:
    """MCTS over `num_games` games of one board size, searched together.

    Typical loop (see :func:`run_search`)::

        mcts.start_search(games, full, root_temp)      # per-game targets
        while not mcts.all_done():
            n = mcts.select(planes)                   # planes: (L, C, H, W) float32
            logits, wdl = evaluator.evaluate(planes[:n], mcts.leaf_positions(n))
            mcts.expand_and_backup(n, logits, wdl)
        visits = mcts.root_visits(g); mcts.advance(g, col)

    Seeded: the same seed and call sequence give identical results.
    """

    def __init__(self, config: SearchConfig, num_games: int, height: int, width: int,
                 seed: int = 0, max_playouts: int | None = None):
        if num_games < 1:
            raise ValueError(f"num_games must be >= 1, got {num_games}")
        bb_h, bb_w, _, _ = check_setup(height, width, None)
        self.config = config
        self.params: KernelParams = config.kernel_params()
        self.gparams: GumbelParams = config.gumbel_params()
        self.num_games = int(num_games)
        self.height, self.width = bb_h, bb_w
        self.max_playouts = int(max_playouts or config.full_playouts)
        lps = config.leaves_per_step
        # each playout expands at most one node with at most `width` children; select
        # stops issuing leaves at the target, the margin covers leaves in flight
        self.region = 1 + self.width * (self.max_playouts + lps + 1)
        n = self.region * self.num_games
        self.tree = make_tree(n)
        self.scratch = make_tree(self.region)
        starts = np.arange(self.num_games, dtype=np.int32) * self.region
        self.games = GameSlots(
            starts.copy(),
            starts + 1,
            starts,
            starts + self.region,
            np.zeros(self.num_games, np.int32),
            np.zeros(self.num_games, np.int8),
            np.ones(self.num_games, np.float64),
            np.zeros(self.num_games, np.int8),
            np.zeros(self.num_games, bb.POSITION_DTYPE),
            np.zeros(self.num_games, np.int64),
        )
        nl = self.num_games * lps
        self.leaves = LeafBuffer(
            np.zeros(nl, np.int32),
            np.zeros(nl, np.int32),
            np.zeros(nl, bb.POSITION_DTYPE),
            np.zeros((nl, MAX_DEPTH), np.int32),
            np.zeros(nl, np.int32),
        )
        self.groots = make_gumbel_roots(self.num_games, self.width)
        self.rng = make_rng(seed)
        self.moves_left_known = False  # the evaluator gives moves-left estimates (wdl width 4)
        self.active = np.ones(self.num_games, np.bool_)
        self.has_position = np.zeros(self.num_games, np.bool_)

    @property
    def max_leaves(self) -> int:
        return self.leaves.game.shape[0]

    def planes_buffer(self, dtype=np.uint8) -> np.ndarray:
        """A preallocated (max_leaves, NUM_PLANES, H, W) array for select().

        Planes are 0/1, so uint8 (the default, what the inference server's shared memory
        carries: four times less memory traffic) loses nothing; float32 also works.
        """
        return np.zeros((self.max_leaves, NUM_PLANES, self.height, self.width), dtype)

    # ---------------------------------------------------------------- positions
    def set_position(self, g: int, state: np.ndarray) -> None:
        """Make the record `state` (a c4fast Game's .state) game g's root; clears its tree."""
        s = np.asarray(state).reshape(-1)[0]
        if (int(s["height"]), int(s["width"])) != (self.height, self.width):
            raise ValueError(
                f"position is {int(s['height'])}x{int(s['width'])}, this search is "
                f"{self.height}x{self.width}"
            )
        if int(s["result"]) != bb.RUNNING:
            raise ValueError("cannot search a finished game")
        self.games.positions[g] = s
        reset_root(self.tree, self.games, g)
        self.games.target[g] = 0
        self.has_position[g] = True

    def start_search(self, g: int, playouts: int, full: bool = True, root_temp: float = 1.0) -> None:
        """Begin a search of game g that ends at `playouts` root visits (reused visits count).

        Root temperature and noise are applied once per root (when it becomes the root
        and is expanded); calling start_search again on the same root continues the
        search with a higher target and leaves the priors as they are. A Gumbel root
        (``root_search == "gumbel"``) takes neither: its schedule starts there instead, with
        the visits still to come as its budget (`full` and `root_temp` are then unused), and
        a second call continues that schedule.
        """
        if not self.has_position[g]:
            raise ValueError(f"game {g} has no position (call set_position)")
        if not 1 <= playouts <= self.max_playouts:
            raise ValueError(f"playouts must be in 1..{self.max_playouts}, got {playouts}")
        if not root_temp > 0:
            raise ValueError(f"root_temp must be > 0, got {root_temp}")
        if int(self.games.positions[g]["result"]) != bb.RUNNING:
            raise ValueError(f"game {g} is over (result {int(self.games.positions[g]['result'])}): "
                             "nothing to search")
        self.games.target[g] = playouts
        self.games.full[g] = 1 if full else 0
        self.games.root_temp[g] = root_temp
        if not self.games.prepared[g]:  # once per root: a second search continues the first
            self._prepare(g)

    def _prepare(self, g: int) -> None:
        if self.gparams.enabled:
            if prepare_gumbel_root(self.tree, self.groots, g, self.games.root[g], self.games.target[g],
                                   self.gparams, self.rng):
                self.games.prepared[g] = 1
        else:
            prepare_root(self.tree, self.games, g, self.params, self.rng)

    # ---------------------------------------------------------------- stepping
    def select(self, planes: np.ndarray) -> int:
        """Descend all active games; returns the number n of leaves whose planes are in planes[:n]."""
        if planes.shape[1:] != (NUM_PLANES, self.height, self.width) or planes.shape[0] < self.max_leaves:
            raise ValueError(
                f"planes must have shape (>= {self.max_leaves}, {NUM_PLANES}, {self.height}, "
                f"{self.width}), got {planes.shape}"
            )
        return int(select_kernel(self.tree, self.games, self.leaves, self.active, self.params, planes,
                                 self.gparams, self.groots))

    def leaf_positions(self, n: int) -> np.ndarray:
        """The position records of the last select()'s leaves (a view)."""
        return self.leaves.positions[:n]

    def expand_and_backup(self, n: int, logits: np.ndarray, wdl: np.ndarray) -> None:
        """Feed the evaluator's output for the n leaves of the last select()."""
        if logits.shape[0] < n or logits.shape[1:] != (self.height, self.width):
            raise ValueError(f"logits must be ({n}, {self.height}, {self.width}), got {logits.shape}")
        if wdl.ndim != 2 or wdl.shape[0] < n or wdl.shape[1] not in (3, 4):
            raise ValueError(f"wdl must be ({n}, 3) or ({n}, 4), got {wdl.shape}")
        if wdl.shape[1] == 3 and self.params.moves_left_slope != 0.0:
            self.params = self.params._replace(moves_left_slope=0.0)  # no estimate: utility off
        self.moves_left_known = wdl.shape[1] == 4
        expand_and_backup_kernel(self.tree, self.games, self.leaves, n, logits, wdl,
                                 self.params, self.rng, self.gparams, self.groots)

    def done(self, g: int) -> bool:
        return bool(search_done(self.tree, self.games, g))

    def finished(self) -> np.ndarray:
        """Indices of active games whose search reached its target (int32 array)."""
        out = np.empty(self.num_games, np.int32)
        n = finished_games(self.tree, self.games, self.active, out)
        return out[:n]

    def all_done(self) -> bool:
        """True when every active game's search has reached its target."""
        return count_unfinished(self.tree, self.games, self.active) == 0

    # ---------------------------------------------------------------- results
    def root_visits(self, g: int) -> np.ndarray:
        """Visit count per column (float64, length width) of game g's root children."""
        out = np.zeros(self.width, np.float64)
        policy_target_kernel(self.tree, self.games.root[g], self.params, False, out)
        return out

    def policy_target(self, g: int) -> np.ndarray:
        """Normalised training target per column: visits after policy-target pruning for
        full searches (forced playouts removed), plain visits otherwise; a Gumbel search's
        completed-Q improved policy (:meth:`gumbel_policy`)."""
        if self.gparams.enabled:
            return self.gumbel_policy(g)
        out = np.zeros(self.width, np.float64)
        full = bool(self.games.full[g])
        s = policy_target_kernel(self.tree, self.games.root[g], self.params, full, out)
        if s <= 0:
            s = out.sum()
        return out / s if s > 0 else out

    def gumbel_policy(self, g: int) -> np.ndarray:
        """The completed-Q improved policy softmax(logit + sigma(completed q)) per column (W,)
        of game g's expanded root (c4fast.gumbel); zeros if the root is not expanded."""
        out = np.zeros(self.width, np.float64)
        improved_policy(self.tree, self.games.root[g], self.gparams, out)
        return out

    def gumbel_move(self, g: int) -> int:
        """The column a Gumbel search of game g plays: the survivor of its sequential halving
        (the best g + logit + sigma(completed q) among the most visited alive actions)."""
        self._check_gumbel(g)
        r = self.games.root[g]
        i = gumbel_choice(self.tree, self.groots, g, r, self.gparams)
        return int(self.tree.move[self.tree.first_child[r] + i])

    def root_gumbel(self, g: int) -> tuple[np.ndarray, np.ndarray]:
        """(g(a) per column, NaN for columns that are not root children; the considered
        columns still alive in the halving, bool) of game g's Gumbel root."""
        self._check_gumbel(g)
        t, r = self.tree, self.games.root[g]
        gum = np.full(self.width, np.nan)
        alive = np.zeros(self.width, np.bool_)
        f = t.first_child[r]
        for i in range(t.num_children[r]):
            gum[t.move[f + i]] = self.groots.gumbel[g, i]
            alive[t.move[f + i]] = bool(self.groots.alive[g, i])
        return gum, alive

    def _check_gumbel(self, g: int) -> None:
        if not self.gparams.enabled:
            raise ValueError("not a Gumbel search (SearchConfig.root_search is 'puct')")
        if not self.games.prepared[g]:
            raise ValueError(f"game {g}'s root has not been searched (expanded) yet")

    def root_wdl(self, g: int) -> np.ndarray:
        """Search estimate (win, draw, loss) for the side to move at game g's root."""
        r = self.games.root[g]
        n = self.tree.visits[r]
        if n == 0:
            return np.array([np.nan] * 3)
        v = -self.tree.value_sum[r] / n
        d = self.tree.draw_sum[r] / n
        return np.array([(1 - d + v) / 2, d, (1 - d - v) / 2])

    def root_moves_left(self, g: int) -> float | None:
        """Search estimate of the plies to the game's end from game g's root (the mean over
        its playouts), or None when the evaluator gives no moves-left estimate."""
        r = self.games.root[g]
        n = self.tree.visits[r]
        if not self.moves_left_known or n == 0:
            return None
        return float(self.tree.ml_sum[r] / n)

    def root_playouts(self, g: int) -> int:
        """Visits of game g's root (playouts of its search so far, reused subtree included)."""
        return int(self.tree.visits[self.games.root[g]])

    def root_priors(self, g: int) -> np.ndarray:
        """Prior probability per column (W,) at game g's expanded root; 0 for pruned or
        illegal columns (zeros if the root is not expanded yet)."""
        t = self.tree
        r = self.games.root[g]
        out = np.zeros(self.width)
        f = t.first_child[r]
        for i in range(t.num_children[r]):
            out[t.move[f + i]] = t.prior[f + i]
        return out

    def advance(self, g: int, col: int) -> None:
        """Play `col` at game g's root, keeping its subtree when tree reuse is on."""
        pos = self.games.positions[g]
        if not (0 <= col < self.width) or not (int(bb.legal_columns(pos)) >> col) & 1:
            raise IllegalMove(f"column {col} is not legal in game {g}")
        advance_kernel(self.tree, self.scratch, self.games, g, col, self.config.tree_reuse)
        self.games.target[g] = 0

    def position_result(self, g: int) -> int:
        return int(self.games.positions[g]["result"])


def run_search(mcts: BatchedMCTS, evaluator: Evaluator, planes: np.ndarray | None = None,
               on_step: Callable[[int], bool] | None = None) -> int:
    """The one select / evaluate / expand_and_backup loop; returns the evaluator leaves.

    Without `on_step` it runs until every active game's search is done (benchmarks,
    tests). With it, `on_step(leaves of this step)` is called after every step and the
    loop runs while some game is active until it returns True: self-play finishes moves
    and starts games there (:class:`selfplay.generation.worker.SelfPlayEngine`).
    """
    if planes is None:
        planes = mcts.planes_buffer()
    leaves = 0
    while not mcts.all_done() if on_step is None else mcts.active.any():
        n = mcts.select(planes)
        if n:
            logits, wdl = evaluator.evaluate(planes[:n], mcts.leaf_positions(n))
            mcts.expand_and_backup(n, logits, wdl)
            leaves += n
        if on_step is not None and on_step(n):
            break
    return leaves


def choose_move(visits: np.ndarray, temperature: float, rng: np.random.Generator) -> int:
    """A column drawn with probability proportional to visits ** (1 / temperature);
    temperature 0 picks the most visited (lowest column on ties)."""
    v = np.asarray(visits, dtype=np.float64)
    if v.sum() <= 0:
        raise ValueError("no visited move to choose from")
    if temperature <= 0:
        return int(np.argmax(v))
    logv = np.where(v > 0, np.log(np.maximum(v, 1e-300)), -np.inf) / temperature
    p = np.exp(logv - logv.max())
    p /= p.sum()
    return int(rng.choice(len(v), p=p))
