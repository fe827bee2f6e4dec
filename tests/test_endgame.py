"""Exact endgame solving in play: the budgeted solver against the exact solver (6x7 one-word
engine, Saiblo sizes multi-word), and the net player's use of it (deterministic budgets)."""

from __future__ import annotations

import numpy as np
import pytest

import c4fast
from c4fast.config import EndgameConfig, SearchConfig
from c4fast.evaluators import UniformEvaluator
from c4fast.players import solver as sv
from c4fast.players.endgame import EndgameSolver, empty_cells
from nets.netplayer import NetPlayer


def random_endgames(count, empty, seed, height=6, width=7, forbidden=None):
    """Positions with `empty` empty cells, still running: random moves, avoiding those that
    end the game while another one does not (so the board fills up)."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        g = c4fast.Game(height, width, forbidden)
        while g.result is None and empty_cells(g) > empty:
            quiet = []
            for c in g.legal_moves():
                g2 = g.copy()
                g2.play(c)
                if g2.result is None:
                    quiet.append(c)
            g.play(int(rng.choice(quiet or g.legal_moves())))
        if g.result is None:
            out.append(g)
    return out


def verdict(score):
    return "win" if score > 0 else ("draw" if score == 0 else "loss")


@pytest.mark.parametrize("height,width,forbidden,empty", [(6, 7, None, 14), (6, 7, None, 20),
                                                          (9, 10, (0, 4), 16)])
def test_endgame_solver_matches_the_exact_solver(height, width, forbidden, empty):
    exact = sv.Solver(20)
    es = EndgameSolver(18)
    for g in random_endgames(6, empty, seed=empty, height=height, width=width, forbidden=forbidden):
        res = es.solve(g, nodes=10**9)
        assert res is not None
        assert res.score == exact.solve(g), repr(g)
        assert sorted(res.best) == sorted(exact.best_moves(g)), repr(g)
        scores = exact.move_scores(g)
        for c, v in res.proven.items():
            assert v == verdict(scores[c]), (repr(g), c)
        for c in res.best:
            assert res.proven[c] == verdict(res.score)


def test_endgame_solver_gives_up_when_out_of_budget():
    g = c4fast.Game.from_moves(6, 7, None, [3, 3])
    es = EndgameSolver(16)
    assert es.solve(g, nodes=50) is None
    assert es.solve(g, seconds=0.005) is None
    with pytest.raises(ValueError):
        es.solve(g)


def player(playouts=50, **endgame):
    return NetPlayer("uniform", playouts=playouts, evaluator=UniformEvaluator(),
                     search=SearchConfig(leaves_per_step=4), endgame=EndgameConfig(**endgame))


def test_net_player_solves_endgames_exactly():
    """Near the end of 6x7 the move is an optimal one of the exact solver, reported as solved."""
    exact = sv.Solver(20)
    p = player(max_empty=16)
    for g in random_endgames(8, 16, seed=3):
        p.reset(g)
        col = p.choose(g)
        a = p.analysis()
        assert a["solved"] is True and col in exact.best_moves(g), repr(g)
        s = exact.solve(g)
        assert a["score"] == s
        assert a["wdl"] == {"win": (1.0, 0.0, 0.0), "draw": (0.0, 1.0, 0.0),
                            "loss": (0.0, 0.0, 1.0)}[verdict(s)]
        assert a["proven"][col] == verdict(s)


def test_net_player_falls_back_to_the_search():
    g = c4fast.Game.from_moves(6, 7, None, [3, 3, 2])
    p = player(max_empty=40, nodes=1)  # the solve cannot finish
    col = p.choose(g)
    a = p.analysis()
    assert a["solved"] is False and a["playouts"] >= 1 and col in g.legal_moves()
    p = player(max_empty=20)  # above the threshold: no solve at all
    p.choose(g)
    assert p.analysis()["solved"] is False and "proven" in p.analysis()


def test_net_player_reports_search_proofs():
    g = c4fast.Game.from_moves(9, 9, (0, 4), [0, 8, 1, 8, 2, 7])  # column 3 wins at once
    p = player(max_empty=0)
    assert p.choose(g) == 3
    a = p.analysis()
    assert a["proven"][3] == "win" and a["solved"] is False and a["wdl"] == (1.0, 0.0, 0.0)
    assert a["q"][3] == 1.0 and set(a["q"]) >= set(a["visits"])


def test_endgame_config_is_validated():
    with pytest.raises(ValueError):
        EndgameConfig(share=0.0)
    with pytest.raises(ValueError):
        EndgameConfig(max_empty=-1)
    with pytest.raises(ValueError):
        EndgameConfig(nodes=0)


def test_a_timed_net_player_keeps_its_graph_between_moves_and_a_playout_budget_does_not():
    """Under a time budget the search of each move goes on from the node the last move's
    graph has for the new position (``analysis()['reused']`` is exactly its visits); under a
    playout budget, and after reset(), every search starts afresh."""
    from c4fast.mcgs import _lookup

    rng = np.random.default_rng(2)
    for seconds, playouts in ((0.2, 0), (0.0, 60)):
        p = NetPlayer("uniform", playouts=playouts, seconds=seconds, evaluator=UniformEvaluator(),
                      search=SearchConfig(leaves_per_step=4), endgame=EndgameConfig(max_empty=0))
        g = c4fast.Game(6, 7)
        p.reset(g)
        reused = []
        while g.result is None:
            expect = 0
            gs = p.search
            if gs is not None and p._keep and seconds and not gs.pool_full and 2 * gs.num_nodes <= len(gs.graph.key):
                _, node = _lookup(gs.graph, g.state[0]["hash"])  # (a graph over half full is cleared)
                expect = int(gs.graph.visits[node]) if node >= 0 else 0
            col = p.choose(g.copy())
            a = p.analysis()
            assert a["reused"] == expect and a["playouts"] >= expect
            reused.append(a["reused"])
            g.play(col)
            if g.result is None:
                g.play(int(rng.choice(g.legal_moves())))
        assert (max(reused) > 0) == bool(seconds), reused
        p.reset(c4fast.Game(6, 7))
        p.choose(c4fast.Game(6, 7))
        assert p.analysis()["reused"] == 0
