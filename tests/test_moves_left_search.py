"""The moves-left utility of the searches (``SearchConfig.moves_left_slope``, issue 35):
its sign and bound against the reference's definition, the tree search node for node
against ``ref_puct`` with the utility on, and both searches unchanged with it off."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ref_puct
from c4fast import Game
from c4fast.config import SearchConfig
from c4fast.mcgs import PROOF_NONE, GraphSearch
from c4fast.mcts import BatchedMCTS, run_search
from c4fast.puct import moves_left_utility

HYP = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))
finite = dict(allow_nan=False, allow_infinity=False)


class MovesLeftEvaluator:
    """Deterministic fake net with the moves-left head: logits, (win, draw, loss) and the
    plies left (up to the empty cells) drawn from a Generator seeded by the position's hash.
    `bias` > 0 tilts every value toward a win for the side to move (< 0: a loss), so that
    nodes are decisive; `width` 3 drops the estimate (an old net)."""

    def __init__(self, salt: int = 0, bias: float = 0.0, width: int = 4):
        self.salt, self.bias, self.width = salt, bias, width

    def position(self, rec):
        rng = np.random.default_rng([int(rec["hash"]), self.salt])
        h, w = int(rec["height"]), int(rec["width"])
        logits = (rng.standard_normal((h, w)) * 1.5).astype(np.float32)
        raw = rng.random(3) + 0.05
        raw[0 if self.bias > 0 else 2] += abs(self.bias)
        wdl = raw / raw.sum()
        empty = h * w - int(rec["ply"])
        plies = rng.random() * empty
        return logits, np.array([*wdl, plies][:self.width], np.float32)

    def __call__(self, game: Game):
        return self.position(game.state[0])

    def evaluate(self, planes, positions):
        b, _, h, w = planes.shape
        logits = np.zeros((b, h, w), np.float32)
        wdl = np.zeros((b, self.width), np.float32)
        for i in range(b):
            logits[i], wdl[i] = self.position(positions[i])
        return logits, wdl


def tree_search(game, config, playouts, ev, seed=0):
    m = BatchedMCTS(config, 1, game.height, game.width, seed=seed, max_playouts=playouts)
    m.set_position(0, game.state)
    m.start_search(0, playouts, full=False)
    run_search(m, ev)
    return m


def graph_search(game, config, playouts, ev):
    gs = GraphSearch(config, game.height, game.width, max_playouts=max(playouts, 10))
    gs.set_position(game.state)
    gs.run(ev, playouts=playouts)
    return gs


# ------------------------------------------------------------------------- the utility


@settings(max_examples=300, **HYP)
@given(q=st.floats(-1, 1, **finite), extra=st.floats(-150, 150, **finite),
       slope=st.floats(0, 1, **finite), cap=st.floats(0, 0.5, **finite))
def test_the_utility_is_the_references_and_has_its_sign_and_bound(q, extra, slope, cap):
    u = moves_left_utility(q, extra, slope, cap)
    assert u == ref_puct.moves_left_utility(q, extra, slope, cap)
    assert abs(u) <= cap * abs(q) + 1e-15 <= cap + 1e-15  # the bound
    if slope == 0 or q == 0 or extra == 0:
        assert u == 0
    # the side that wins (q > 0) gains by a shorter game (extra < 0), the loser by a longer one
    gains = (q > 0) == (extra < 0)
    assert (u >= 0) if gains else (u <= 0)
    if min(abs(q), cap, abs(slope * extra)) > 1e-6:  # no underflow to 0
        assert (u > 0) == gains


# ---------------------------------------------------------------- the tree search


CASES = [
    # id, game, config changes, playouts, evaluator
    ("winning-9x10", lambda: Game(9, 10, (0, 4)), {}, 250, dict(bias=3.0)),
    ("losing-6x7", lambda: Game.from_moves(6, 7, None, [3, 3, 2]), {}, 250, dict(bias=-3.0, salt=1)),
    ("steep-uncapped-7x8", lambda: Game(7, 8, (3, 3)), {"moves_left_slope": 0.5, "moves_left_cap": 0.4}, 200,
     dict(bias=2.0, salt=2)),
    ("threshold-0-even", lambda: Game(6, 7), {"moves_left_threshold": 0.0}, 200, dict(salt=3)),
    ("sensible-off-tactics", lambda: Game.from_moves(6, 7, None, [3, 3, 4, 4, 2]), {"sensible": False}, 200,
     dict(bias=1.0)),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_the_tree_search_with_the_utility_matches_the_reference(case):
    _, make, changes, playouts, ev_kwargs = case
    game = make()
    config = SearchConfig(leaves_per_step=1, moves_left_slope=0.05, moves_left_cap=0.1, moves_left_threshold=0.3)
    config = config.replace(**changes)
    ev = MovesLeftEvaluator(**ev_kwargs)
    m = tree_search(game, config, playouts, ev)
    ref = ref_puct.search_with_config(game, ev, playouts, config)
    np.testing.assert_array_equal(m.root_visits(0), ref_puct.root_visits(ref, game.width))
    assert m.root_moves_left(0) == pytest.approx(ref.ml_sum / ref.visits, rel=1e-12)
    off = tree_search(game, config.replace(moves_left_slope=0.0), playouts, ev)
    assert (off.root_visits(0) != m.root_visits(0)).any(), "precondition: the utility changed the search"


@pytest.mark.parametrize("case", CASES[:3], ids=[c[0] for c in CASES[:3]])
def test_with_the_switch_off_the_searches_ignore_the_estimate(case):
    _, make, _, playouts, ev_kwargs = case
    game = make()
    config = SearchConfig(leaves_per_step=4)
    with_ml, without = MovesLeftEvaluator(**ev_kwargs), MovesLeftEvaluator(**ev_kwargs, width=3)
    a, b = tree_search(game, config, playouts, with_ml), tree_search(game, config, playouts, without)
    for f in ("visits", "value_sum", "draw_sum", "prior", "first_child"):
        np.testing.assert_array_equal(getattr(a.tree, f), getattr(b.tree, f))
    assert a.root_moves_left(0) is not None and b.root_moves_left(0) is None
    ga, gb = graph_search(game, config, playouts, with_ml), graph_search(game, config, playouts, without)
    n = ga.num_nodes
    assert n == gb.num_nodes
    for f in ("visits", "q", "q_draw", "edge_visits", "proof"):
        np.testing.assert_array_equal(getattr(ga.graph, f)[:n], getattr(gb.graph, f)[:n])
    assert ga.root_moves_left() is not None and gb.root_moves_left() is None
    # an evaluator without the estimate turns a configured utility off
    on = config.replace(moves_left_slope=0.2)
    c = tree_search(game, on, playouts, without)
    np.testing.assert_array_equal(c.tree.visits, b.tree.visits)
    gc = graph_search(game, on, playouts, without)
    np.testing.assert_array_equal(gc.graph.edge_visits, gb.graph.edge_visits)


def test_the_winner_prefers_the_short_game_and_the_loser_the_long_one():
    """Every position says the first player wins (or, reversed, loses), and the estimate of
    the plies left grows with the column just played. With the utility the first player's
    root visits move to the low columns when it wins, to the high ones when it loses."""

    class Tilted(MovesLeftEvaluator):
        def position(self, rec):
            logits, wdl = super().position(rec)
            first_to_move = int(rec["ply"]) % 2 == 0
            wdl[:3] = (0.9, 0.0, 0.1) if first_to_move == (self.bias > 0) else (0.1, 0.0, 0.9)
            wdl[3] = 20.0 + 3.0 * max(int(rec["last"][0][1]), 0)
            return np.zeros_like(logits), wdl

    game = Game(8, 9, (7, 8))
    config = SearchConfig(leaves_per_step=1, moves_left_slope=0.1, moves_left_cap=0.2, moves_left_threshold=0.5)
    cols = np.arange(game.width)
    for bias, direction in ((1.0, -1), (-1.0, 1)):  # the first player wins / loses
        ev = Tilted(bias=bias)
        on = tree_search(game, config, 300, ev).root_visits(0)
        off = tree_search(game, config.replace(moves_left_slope=0.0), 300, ev).root_visits(0)
        mean_on, mean_off = (on * cols).sum() / on.sum(), (off * cols).sum() / off.sum()
        assert direction * (mean_on - mean_off) > 0.5, (bias, on, off)
        g_on = graph_search(game, config, 300, ev).root_visits()
        assert direction * ((g_on * cols).sum() / g_on.sum() - mean_off) > 0.5, (bias, g_on, off)


# ---------------------------------------------------------------- the graph search


@pytest.mark.parametrize("moves,playouts", [((), 60), ((3, 3, 4), 80), ((0, 1, 0, 1, 0), 60)])
def test_without_transpositions_the_graph_with_the_utility_equals_the_tree(moves, playouts):
    config = SearchConfig(leaves_per_step=1, proofs=False, moves_left_slope=0.05, moves_left_cap=0.1,
                          moves_left_threshold=0.2)
    game = Game.from_moves(6, 7, None, list(moves))
    ev = MovesLeftEvaluator(bias=2.0, salt=5)
    gs = graph_search(game, config, playouts, ev)
    assert gs.transpositions == 0, "precondition: this search met no transposition"
    m = tree_search(game, config, playouts, ev)
    np.testing.assert_array_equal(gs.root_visits(), m.root_visits(0))
    assert gs.root_moves_left() == pytest.approx(m.root_moves_left(0), rel=1e-9)


def test_a_proven_root_reports_its_exact_distance_and_mean_distances_are_consistent():
    game = Game.from_moves(6, 9, None, [2, 2, 3, 3, 6, 0, 6, 0, 6, 8])  # wins now in column 6
    config = SearchConfig(leaves_per_step=1, moves_left_slope=0.05, moves_left_cap=0.1)
    gs = graph_search(game, config, 200, MovesLeftEvaluator(bias=1.0))
    assert gs.root_proof() == "win" and gs.best_move() == 6
    assert gs.root_moves_left() == int(gs.graph.proof_len[gs.root]) == 1
    # a node's mean: its own estimate and its children's, one ply further each (in a graph
    # without transpositions, where no child changes behind its parent's back)
    gs = graph_search(Game.from_moves(6, 7, None, [3, 3, 4]), config.replace(proofs=False), 80,
                      MovesLeftEvaluator(bias=2.0, salt=5))
    assert gs.transpositions == 0
    g = gs.graph
    checked = 0
    for n in range(gs.num_nodes):
        if g.proof[n] != PROOF_NONE or g.first_edge[n] < 0 or g.visits[n] < 2:
            continue
        e0, ne = int(g.first_edge[n]), int(g.num_edges[n])
        total, s = 1, g.util_ml[n]
        for e in range(e0, e0 + ne):
            if g.edge_visits[e] > 0:
                total += g.edge_visits[e]
                s += g.edge_visits[e] * (1.0 + g.q_ml[g.edge_child[e]])
        assert total == g.visits[n] and math.isclose(g.q_ml[n], s / total, rel_tol=1e-12)
        checked += 1
    assert checked > 5


def test_the_switch_is_checked():
    for bad in ({"moves_left_slope": -0.1}, {"moves_left_cap": float("nan")}, {"moves_left_threshold": 1.0},
                {"moves_left_threshold": -0.2}):
        with pytest.raises(ValueError, match="moves_left"):
            SearchConfig(**bad)
    assert SearchConfig().moves_left_slope == 0.0
