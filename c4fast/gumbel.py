"""Gumbel root search (Danihelka, Guez, Schrittwieser, Silver, "Policy improvement by planning
with Gumbel", ICLR 2022) for the batched MCTS: njit kernels on the tree arrays of
:mod:`c4fast.mcts` (used there when ``SearchConfig.root_search == "gumbel"``).

At the root of a Gumbel search
1. every root child ``a`` (the root's sensible, or legal, columns, in column order) draws
   ``g(a) ~ Gumbel(0, 1)``; the ``m = min(gumbel_actions, children)`` children with the
   largest ``g(a) + logit(a)`` are considered (``logit(a) = log P(a)``, the net's root prior:
   its logits up to a constant; no root temperature and no Dirichlet noise at such a root);
2. sequential halving spreads the budget ``B`` (the child visits of this search: target
   minus the root's visits when the schedule starts, so reused visits do not count) over
   ``P = ceil(log2 m)`` phases: in a phase with ``k`` actions alive each gets
   ``max(1, B // (P * k))`` more visits (round-robin, highest ``g + logit`` first), then the
   best ``max(2, k // 2)`` by ``g + logit + sigma(q)`` stay alive. With two left, the rest
   of the budget keeps going round-robin over both. The visit counts are mctx's
   (``seq_halving.get_sequence_of_considered_visits``); the eliminations are explicit, at the
   end of each phase. The root child of a descent is forced by this schedule; below the
   root, PUCT as usual. ``m = 1``: the one action takes every visit;
3. the move is the survivor: among the alive actions with the most visits of this search,
   the arg max of ``g + logit + sigma(completed q)`` (this replaces move sampling);
4. the policy target is the improved policy ``softmax(logit + sigma(completed q))`` over the
   root's children: every child gets mass, however few the simulations.

Conventions
-----------
* ``q(a)`` is child ``a``'s expected score for the side to move at the root, in [0, 1]:
  ``(1 + mean value) / 2`` (win 1, draw 1/2, loss 0). ``sigma(q) = (c_visit + max_b N(b)) *
  c_scale * q`` with ``N(b)`` the visits of root child ``b`` (reused visits included); the
  paper's board-game constants ``c_visit = 50``, ``c_scale = 1`` with values in [0, 1] are the
  defaults (mctx's ``qtransform_completed_by_mix_value`` instead min-max rescales the
  completed values over the siblings, with scale 0.1).
* completed ``q(a)`` = ``q(a)`` for visited children, else the mixed value (paper, appendix D)
  ``v_mix = (v + S * sum_{N(a)>0} P(a) q(a) / sum_{N(a)>0} P(a)) / (1 + S)``, ``S = sum_b
  N(b)``, ``v`` the net's own value of the root (in [0, 1]; recovered from the tree as the
  root's visits that ended at the root itself, :func:`root_value`).
* Ties (equal scores) go to the lowest column.
* Virtual loss: a child's count includes its descents in flight; a halving waits until no
  descent under the root is in flight (:func:`gumbel_root_child` returns ``WAIT`` and the
  select kernel stops that game's step), so the eliminations see complete values.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from numba import njit

from c4fast.rollout import uniform

WAIT = -1  # gumbel_root_child: no descent now (a halving waits for backups)
TINY_PRIOR = 1e-30  # logit(a) = log(max(P(a), TINY_PRIOR)): a float32 prior may underflow to 0
_MIN_UNIFORM = 1.0 / 9007199254740992.0  # 2**-53: the smallest nonzero uniform()


class GumbelRoots(NamedTuple):
    """Per-game state of the Gumbel root schedule (``G`` games, ``W`` the board width; child
    slot ``i`` is the root's i-th child, children in column order)::

        gumbel   float64 [G, W]  g(a) of child slot i
        base     int32   [G, W]  the child's visits when the schedule started (tree reuse)
        alive    int8    [G, W]  1 while the child is in the halving
        alive_n  int32   [G]     alive children k
        level    int32   [G]     visits of this search every alive child has at the phase's end
        budget   int32   [G]     B: child visits of this search
        phases   int32   [G]     P = ceil(log2 m)

    Valid while the game's root is prepared (``GameSlots.prepared``)."""

    gumbel: np.ndarray
    base: np.ndarray
    alive: np.ndarray
    alive_n: np.ndarray
    level: np.ndarray
    budget: np.ndarray
    phases: np.ndarray


def make_gumbel_roots(games: int, width: int) -> GumbelRoots:
    return GumbelRoots(
        np.zeros((games, width), np.float64),
        np.zeros((games, width), np.int32),
        np.zeros((games, width), np.int8),
        np.zeros(games, np.int32),
        np.zeros(games, np.int32),
        np.zeros(games, np.int32),
        np.zeros(games, np.int32),
    )


# ------------------------------------------------------------------------ formulas
@njit(cache=True)
def gumbel_draw(rng):
    """A Gumbel(0, 1) sample ``-log(-log(u))``, ``u`` uniform in (0, 1) from the kernel RNG."""
    u = uniform(rng)
    if u <= 0.0:
        u = _MIN_UNIFORM
    return -math.log(-math.log(u))


@njit(cache=True, inline="always")
def child_logit(prior):
    """logit(a) = log P(a) (float64 of the stored float32 prior, floored at TINY_PRIOR)."""
    return math.log(max(float(prior), TINY_PRIOR))


@njit(cache=True, inline="always")
def num_phases(m):
    """P = ceil(log2 m) (0 for m = 1)."""
    p = 0
    while (1 << p) < m:
        p += 1
    return p


@njit(cache=True, inline="always")
def phase_visits(budget, phases, k):
    """Visits each of the k alive actions gets in one phase: max(1, B // (P * k))."""
    return max(1, budget // (phases * k))


@njit(cache=True, inline="always")
def q_score(value_sum, visits):
    """Mean value in [-1, 1] -> expected score in [0, 1]."""
    return 0.5 * (1.0 + value_sum / visits)


@njit(cache=True, inline="always")
def sigma(q, max_visits, c_visit, c_scale):
    """The paper's monotone transform of q in [0, 1]: (c_visit + max_b N(b)) * c_scale * q."""
    return (c_visit + max_visits) * c_scale * q


@njit(cache=True)
def root_value(tree, r):
    """The net's value of root r for its side to move, in [0, 1]: the mean of the visits
    that ended at r itself (its own evaluation; more than one only after a full region),
    i.e. everything in r's sums that did not come from its children."""
    first = tree.first_child[r]
    s = tree.value_sum[r]
    c = tree.visits[r]
    for i in range(tree.num_children[r]):
        s += tree.value_sum[first + i]
        c -= tree.visits[first + i]
    if c <= 0:  # cannot happen for an evaluated root; its mean value then
        return 0.5 * (1.0 - tree.value_sum[r] / tree.visits[r])
    return 0.5 * (1.0 - s / c)  # value_sum is from the view of the mover INTO r


@njit(cache=True)
def completed_q(tree, r, out):
    """out[i] = completed q of root child i (in [0, 1]); returns max_b N(b) (float)."""
    first = tree.first_child[r]
    n = tree.num_children[r]
    raw = root_value(tree, r)
    total = 0.0
    mass = 0.0
    weighted = 0.0
    max_n = 0.0
    for i in range(n):
        c = first + i
        v = tree.visits[c]
        total += v
        if v > 0:
            p = max(float(tree.prior[c]), TINY_PRIOR)
            mass += p
            weighted += p * q_score(tree.value_sum[c], v)
            if v > max_n:
                max_n = float(v)
    vmix = raw
    if total > 0:
        vmix = (raw + total * (weighted / mass)) / (total + 1.0)
    for i in range(n):
        c = first + i
        out[i] = q_score(tree.value_sum[c], tree.visits[c]) if tree.visits[c] > 0 else vmix
    return max_n


@njit(cache=True)
def final_scores(tree, roots, g, r, gp, out):
    """out[i] = g(a) + logit(a) + sigma(completed q(a)) for root child slot i."""
    first = tree.first_child[r]
    max_n = completed_q(tree, r, out)
    for i in range(tree.num_children[r]):
        out[i] = (roots.gumbel[g, i] + child_logit(tree.prior[first + i])
                  + sigma(out[i], max_n, gp.c_visit, gp.c_scale))


@njit(cache=True)
def improved_policy(tree, r, gp, out):
    """out[col] = softmax(logit + sigma(completed q)) over root r's children (0 elsewhere);
    the completed-Q policy target."""
    first = tree.first_child[r]
    n = tree.num_children[r]
    out[:] = 0.0
    if first < 0 or n == 0:
        return
    s = np.empty(n)
    max_n = completed_q(tree, r, s)
    mx = -math.inf
    for i in range(n):
        s[i] = child_logit(tree.prior[first + i]) + sigma(s[i], max_n, gp.c_visit, gp.c_scale)
        mx = max(mx, s[i])
    total = 0.0
    for i in range(n):
        s[i] = math.exp(s[i] - mx)
        total += s[i]
    for i in range(n):
        out[tree.move[first + i]] = s[i] / total


# ------------------------------------------------------------------------ the schedule
@njit(cache=True)
def prepare_gumbel_root(tree, roots, g, r, target, gp, rng):
    """Start game g's schedule at its expanded root r for a search ending at `target` root
    visits: draw g(a), keep the top m by g + logit, the first phase. Returns False (and
    draws nothing) if r is not expanded yet."""
    first = tree.first_child[r]
    n = tree.num_children[r]
    if first < 0 or n == 0:
        return False
    for i in range(n):
        roots.gumbel[g, i] = gumbel_draw(rng)
        roots.base[g, i] = tree.visits[first + i]
        roots.alive[g, i] = 0
    m = min(gp.actions, n)
    for _ in range(m):
        best = -1
        best_s = 0.0
        for i in range(n):
            if roots.alive[g, i] == 0:
                s = roots.gumbel[g, i] + child_logit(tree.prior[first + i])
                if best < 0 or s > best_s:
                    best = i
                    best_s = s
        roots.alive[g, best] = 1
    budget = max(0, target - tree.visits[r])
    p = num_phases(m)
    roots.alive_n[g] = m
    roots.budget[g] = budget
    roots.phases[g] = p
    roots.level[g] = phase_visits(budget, p, m) if m >= 2 else budget
    return True


@njit(cache=True)
def _halve(tree, roots, g, r, keep_n, gp):
    """Keep the keep_n alive children of game g with the best final scores."""
    n = tree.num_children[r]
    scores = np.empty(n)
    final_scores(tree, roots, g, r, gp, scores)
    keep = np.zeros(n, np.int8)
    for _ in range(keep_n):
        best = -1
        for i in range(n):
            if roots.alive[g, i] and not keep[i] and (best < 0 or scores[i] > scores[best]):
                best = i
        keep[best] = 1
    for i in range(n):
        roots.alive[g, i] = keep[i]
    roots.alive_n[g] = keep_n


@njit(cache=True)
def gumbel_root_child(tree, roots, g, r, gp):
    """The root child (node index) that game g's next descent must take: the alive child
    with the fewest visits of this search (in flight included; ties to the highest
    g + logit), after closing finished phases; or WAIT while a halving waits for
    descents in flight under r."""
    first = tree.first_child[r]
    n = tree.num_children[r]
    while True:
        best = -1
        best_c = 0
        best_s = 0.0
        for i in range(n):
            if roots.alive[g, i]:
                c = first + i
                cnt = tree.visits[c] + tree.inflight[c] - roots.base[g, i]
                s = roots.gumbel[g, i] + child_logit(tree.prior[c])
                if best < 0 or cnt < best_c or (cnt == best_c and s > best_s):
                    best = i
                    best_c = cnt
                    best_s = s
        k = roots.alive_n[g]
        if k == 1 or best_c < roots.level[g]:
            return first + best
        keep_n = max(2, k // 2)
        if keep_n < k:
            if tree.inflight[r] > 0:
                return WAIT
            _halve(tree, roots, g, r, keep_n, gp)
        roots.level[g] += phase_visits(roots.budget[g], roots.phases[g], keep_n)


@njit(cache=True)
def gumbel_choice(tree, roots, g, r, gp):
    """Child slot of game g's move: among the alive children with the most visits of this
    search, the best final score (-1 if r is not expanded)."""
    first = tree.first_child[r]
    n = tree.num_children[r]
    if first < 0 or n == 0:
        return -1
    scores = np.empty(n)
    final_scores(tree, roots, g, r, gp, scores)
    most = -1
    for i in range(n):
        if roots.alive[g, i]:
            most = max(most, tree.visits[first + i] - roots.base[g, i])
    best = -1
    for i in range(n):
        if (roots.alive[g, i] and tree.visits[first + i] - roots.base[g, i] == most
                and (best < 0 or scores[i] > scores[best])):
            best = i
    return best
