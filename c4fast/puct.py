"""The PUCT selection rule, shared by the tree search (:mod:`c4fast.mcts`) and the graph
search (:mod:`c4fast.mcgs`); njit functions inlined into their kernels.

``score = Q + c_puct * P * sqrt(1 + S) / (1 + n)``: ``Q`` the child's mean value for the
side choosing (virtual loss counted as a loss), ``P`` its prior, ``S`` the visits of all
children (virtual loss included), ``n`` the child's. An unvisited child takes the
first-play-urgency value ``Q(parent) - fpu_reduction * sqrt(prior mass of visited
children)``. Values are in [-1, 1], from the view of the player choosing.
:func:`moves_left_utility` is the bounded moves-left term added at decisive nodes
(``SearchConfig.moves_left_slope``).
"""

from __future__ import annotations

import math

from numba import njit


@njit(cache=True, inline="always")
def child_totals(visits, inflight, prior, first, n):
    """(S, prior mass of visited children) over the children ``first .. first + n - 1``
    (visits and virtual losses in `visits` and `inflight`, priors in `prior`)."""
    total = 0.0
    visited_mass = 0.0
    for i in range(n):
        w = visits[first + i] + inflight[first + i]
        total += w
        if w > 0:
            visited_mass += prior[first + i]
    return total, visited_mass


@njit(cache=True, inline="always")
def exploration_scale(total_visits):
    """sqrt(1 + S), S the visits (and virtual losses) of all children."""
    return math.sqrt(1.0 + total_visits)


@njit(cache=True, inline="always")
def fpu_value(parent_q, visited_mass, fpu_reduction):
    """The value an unvisited child is scored with."""
    return parent_q - fpu_reduction * math.sqrt(visited_mass)


@njit(cache=True, inline="always")
def moves_left_utility(q, extra_plies, slope, cap):
    """Lc0's moves-left utility, bounded: ``-q * clip(slope * extra_plies, -cap, cap)``.

    `q`: the child's value for the side choosing, in [-1, 1]; `extra_plies`: how many plies
    longer the game lasts through the child than the parent's average (``1 + M(child) -
    M(parent)``, M the estimated plies to the end from a node's position). Positive for a
    shorter game when winning (q > 0) and a longer one when losing (q < 0); its absolute
    value is at most ``|q| * cap <= cap``; 0 when ``slope`` is 0."""
    x = slope * extra_plies
    if x > cap:
        x = cap
    elif x < -cap:
        x = -cap
    return -q * x


@njit(cache=True, inline="always")
def puct_score(q, prior, scale, visits, c_puct):
    """The PUCT score of a child with value `q`, prior `prior` and `visits` visits;
    `scale` is :func:`exploration_scale` of the parent."""
    return q + c_puct * prior * scale / (1.0 + visits)
