"""A plain-Python reference of the Gumbel root search (Danihelka et al., ICLR 2022) for ONE
game: the reference for ``c4fast.gumbel`` and the Gumbel root of ``c4fast.mcts``.

It never imports ``c4fast.mcts`` or ``c4fast.gumbel``. Below the root it reuses
``ref_puct`` (one leaf per step, no virtual loss). The schedule is written as the paper
and mctx describe it, phase by phase:

* the considered actions are the ``m = min(m, children)`` best by ``g(a) + logit(a)``
  (ties to the lowest column), ``logit(a) = log P(a)`` of the float32 root prior;
* ``P = ceil(log2 m)`` (``(m - 1).bit_length()``); in a phase with ``k`` actions each gets
  ``max(1, B // (P * k))`` visits, round-robin in the order of ``g + logit`` (best first);
  the budget may end inside a phase; after a phase the best ``max(2, k // 2)`` by
  ``g + logit + sigma(q)`` survive (no ranking when the budget is spent);
* ``sigma(q) = (c_visit + max_b N(b)) * c_scale * q`` with ``q = (1 + mean value) / 2``;
* completed ``q`` = ``q`` if visited, else ``v_mix = (v + S * sum P q / sum P) / (1 + S)``
  over the visited children, ``S`` their total visits, ``v`` the root's own value in [0, 1];
* the move: among the survivors with the most visits of this search, the best
  ``g + logit + sigma(completed q)``; the target ``softmax(logit + sigma(completed q))``.
"""

from __future__ import annotations

import math

import numpy as np

import ref_puct
from c4fast import Game

TINY = 1e-30


def logit(prior) -> float:
    return math.log(max(float(prior), TINY))


def sigma(q: float, max_visits: float, c_visit: float, c_scale: float) -> float:
    return (c_visit + max_visits) * c_scale * q


def completed_q(visits, qs, priors, root_value: float) -> list[float]:
    """Completed q per child: q where visited, else the paper's mixed value v_mix."""
    total = sum(visits)
    seen = [i for i, n in enumerate(visits) if n > 0]
    if total == 0:
        vmix = root_value
    else:
        mass = sum(max(float(priors[i]), TINY) for i in seen)
        mean_q = sum(max(float(priors[i]), TINY) * qs[i] for i in seen) / mass
        vmix = (root_value + total * mean_q) / (1 + total)
    return [qs[i] if visits[i] > 0 else vmix for i in range(len(visits))]


def scores(gumbel, priors, visits, qs, root_value, c_visit, c_scale) -> list[float]:
    """g + logit + sigma(completed q) per child."""
    cq = completed_q(visits, qs, priors, root_value)
    top = float(max(visits))
    return [gumbel[i] + logit(priors[i]) + sigma(cq[i], top, c_visit, c_scale) for i in range(len(priors))]


def improved_policy(priors, visits, qs, root_value, c_visit, c_scale) -> np.ndarray:
    """softmax(logit + sigma(completed q)) per child."""
    cq = completed_q(visits, qs, priors, root_value)
    top = float(max(visits))
    z = np.array([logit(priors[i]) + sigma(cq[i], top, c_visit, c_scale) for i in range(len(priors))])
    e = np.exp(z - z.max())
    return e / e.sum()


def sequential_halving(base_scores, budget: int, m: int, visit, final_scores):
    """Run the schedule: `visit(i)` gives child i one visit, `final_scores()` the current
    g + logit + sigma(completed q) per child. Returns (alive children, the phases as
    (alive, visits each) pairs, the visits of this search per child)."""
    n = len(base_scores)
    order = sorted(range(n), key=lambda i: (-base_scores[i], i))
    m = min(m, n)
    alive = order[:m]
    new = [0] * n
    phases = []
    if m == 1:
        for _ in range(budget):
            visit(alive[0])
            new[alive[0]] += 1
        return alive, [(list(alive), budget)], new
    p = (m - 1).bit_length()
    used = 0
    k = m
    while True:
        per = max(1, budget // (p * k))
        phases.append((list(alive), per))
        ranked = sorted(alive, key=lambda i: (-base_scores[i], i))
        for _ in range(per):
            for i in ranked:
                if used == budget:
                    return alive, phases, new
                visit(i)
                new[i] += 1
                used += 1
        if used == budget:
            return alive, phases, new
        keep = max(2, k // 2)
        if keep < k:
            s = final_scores()
            alive = sorted(alive, key=lambda i: (-s[i], i))[:keep]
            k = keep


def choice(alive, new, final) -> int:
    """The move's child: the best final score among the most visited survivors."""
    most = max(new[i] for i in alive)
    cands = [i for i in alive if new[i] == most]
    return max(cands, key=lambda i: (final[i], -i))


class Result:
    """What the reference search returns (child lists in column order)."""

    def __init__(self, root, cols, alive, phases, new, move, policy, root_value):
        self.root, self.cols, self.alive, self.phases = root, cols, alive, phases
        self.new, self.move, self.policy, self.root_value = new, move, policy, root_value

    def visits_by_column(self, width: int) -> np.ndarray:
        return ref_puct.root_visits(self.root, width)

    def policy_by_column(self, width: int) -> np.ndarray:
        out = np.zeros(width)
        out[self.cols] = self.policy
        return out


def search(game: Game, evaluate, playouts: int, gumbel_by_col, *, m: int = 16,
           c_visit: float = 50.0, c_scale: float = 1.0, c_puct: float = 1.1,
           fpu_reduction: float = 0.2, sensible: bool = True,
           root: ref_puct.Node | None = None) -> Result:
    """Gumbel search of a running `game` until the root has `playouts` visits, with the
    Gumbel draws `gumbel_by_col[col]` given. `root` continues a reused tree (its visits
    count; the schedule spreads what is left). `evaluate(game) -> (logits, wdl)`."""
    logits, wdl = evaluate(game)
    win, draw, loss = (np.float32(x) for x in wdl)
    value = float(np.float32(win - loss))
    if root is None:
        root = ref_puct.Node(-1, 1.0)
        ref_puct.expand(root, game, logits, sensible)
        ref_puct.backup([root], -value, float(draw))
    root_value = (1.0 + value) / 2.0  # the net's own value of the root, side to move
    kids = root.children
    cols = [k.move for k in kids]
    priors = [k.prior for k in kids]
    gum = [float(gumbel_by_col[c]) for c in cols]
    base = [gum[i] + logit(priors[i]) for i in range(len(kids))]

    def visit(i):
        node, pos, path = kids[i], game.copy(), [root, kids[i]]
        pos.play(node.move)
        while node.children is not None and node.terminal == ref_puct.NOT_TERMINAL:
            node = ref_puct.select_child(node, c_puct, fpu_reduction)
            pos.play(node.move)
            path.append(node)
        if node.terminal == ref_puct.TERMINAL_WIN:
            ref_puct.backup(path, 1.0, 0.0)
        elif node.terminal == ref_puct.TERMINAL_DRAW:
            ref_puct.backup(path, 0.0, 1.0)
        else:
            lg, w = evaluate(pos)
            ref_puct.expand(node, pos, lg, sensible)
            a, d, b = (np.float32(x) for x in w)
            ref_puct.backup(path, -float(np.float32(a - b)), float(d))

    def stats():
        visits = [k.visits for k in kids]
        qs = [(1.0 + k.value_sum / k.visits) / 2.0 if k.visits else 0.0 for k in kids]
        return visits, qs

    def final():
        visits, qs = stats()
        return scores(gum, priors, visits, qs, root_value, c_visit, c_scale)

    budget = max(0, playouts - root.visits)
    alive, phases, new = sequential_halving(base, budget, m, visit, final)
    move = cols[choice(alive, new, final())]
    visits, qs = stats()
    policy = improved_policy(priors, visits, qs, root_value, c_visit, c_scale)
    return Result(root, cols, alive, phases, new, move, policy, root_value)
