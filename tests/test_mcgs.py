"""Graph search for play: transpositions share nodes; without them it equals the tree search."""

import numpy as np
import pytest

import c4fast
from c4fast.config import SearchConfig
from c4fast.evaluators import RolloutEvaluator, UniformEvaluator
from c4fast.mcgs import GraphSearch
from c4fast.mcts import BatchedMCTS, run_search


class HashEvaluator:
    """Deterministic, position-dependent logits and WDL (seeded by the Zobrist hash)."""

    def evaluate(self, planes, positions):
        b, _, h, w = planes.shape
        logits = np.zeros((b, h, w), np.float32)
        wdl = np.zeros((b, 3), np.float32)
        for i in range(b):
            r = np.random.default_rng(int(positions[i]["hash"]) % (2**63))
            logits[i] = r.normal(size=(h, w))
            x = r.random(3) + 0.1
            wdl[i] = x / x.sum()
        return logits, wdl


def tree_visits(game, playouts, config):
    m = BatchedMCTS(config, 1, game.height, game.width, max_playouts=playouts)
    m.set_position(0, game.state)
    m.start_search(0, playouts, full=False)
    run_search(m, HashEvaluator())
    return m.root_visits(0), m.root_wdl(0)


@pytest.mark.parametrize("moves,playouts", [((), 25), ((3, 3, 4), 40), ((3, 3, 4, 4), 300),
                                            ((0, 1, 0, 1, 0), 60)])
def test_without_transpositions_graph_equals_tree(moves, playouts):
    config = SearchConfig(leaves_per_step=1)
    game = c4fast.Game.from_moves(6, 7, None, list(moves))
    gs = GraphSearch(config, 6, 7, max_playouts=1000)
    gs.set_position(game.state)
    gs.run(HashEvaluator(), playouts=playouts)
    assert gs.transpositions == 0, "precondition: this search met no transposition"
    visits, wdl = tree_visits(game, playouts, config)
    np.testing.assert_array_equal(gs.root_visits(), visits)
    np.testing.assert_allclose(gs.root_wdl(), wdl, atol=1e-9)


def test_transpositions_share_one_node():
    config = SearchConfig(leaves_per_step=1, sensible=False)
    game = c4fast.Game(5, 5)
    gs = GraphSearch(config, 5, 5, max_playouts=3000)
    gs.set_position(game.state)
    gs.run(UniformEvaluator(), playouts=2000)
    assert gs.transpositions > 0
    g = gs.graph
    n = gs.num_nodes
    keys = g.key[:n]
    assert len(np.unique(keys)) == n  # one node per position
    # a position reached by two move orders is one node with in-edges from two parents
    a = c4fast.Game.from_moves(5, 5, None, [0, 1, 2])
    b = c4fast.Game.from_moves(5, 5, None, [2, 1, 0])
    assert a.hash == b.hash
    idx = np.flatnonzero(keys == np.uint64(a.hash))
    assert len(idx) == 1
    node = int(idx[0])
    incoming = np.flatnonzero(g.edge_child[: int(g.counters[1])] == node)
    assert len(incoming) >= 2
    # graph invariant: N(n) = 1 + sum of out-edge visits for expanded non-terminal nodes
    for i in range(n):
        if g.first_edge[i] >= 0 and g.terminal[i] == 0:
            f, k = int(g.first_edge[i]), int(g.num_edges[i])
            assert g.visits[i] == 1 + g.edge_visits[f:f + k].sum()
    assert (g.inflight[:n] == 0).all() and (g.edge_inflight[: int(g.counters[1])] == 0).all()
    # fewer nodes than the tree search needs for the same playouts
    m = BatchedMCTS(config, 1, 5, 5, max_playouts=2000)
    m.set_position(0, game.state)
    m.start_search(0, 2000, full=False)
    run_search(m, UniformEvaluator())
    tree_nodes = int(m.games.next_free[0] - m.games.region_start[0])
    assert n < tree_nodes


def test_graph_search_finds_the_win_and_blocks():
    config = SearchConfig(leaves_per_step=8)
    win = c4fast.Game.from_moves(9, 9, (0, 4), [0, 8, 1, 8, 2, 7])  # X: three in row 0, col 3 wins
    gs = GraphSearch(config, 9, 9, max_playouts=500)
    gs.set_position(win.state)
    gs.run(RolloutEvaluator(2, seed=1), playouts=200)
    assert gs.best_move() == 3 and gs.root_wdl()[0] > 0.9
    block = c4fast.Game.from_moves(9, 9, (0, 4), [0, 8, 1, 8, 2])  # O must block column 3
    gs.set_position(block.state)
    gs.run(RolloutEvaluator(2, seed=1), playouts=200)
    assert gs.best_move() == 3


def test_memory_is_reclaimed_between_moves_and_full_pool_is_explicit():
    config = SearchConfig(leaves_per_step=4)
    game = c4fast.Game(12, 12, (5, 6))
    gs = GraphSearch(config, 12, 12, max_playouts=100)
    gs.set_position(game.state)
    gs.run(UniformEvaluator(), playouts=100)
    used = gs.num_nodes
    gs.advance(gs.best_move())
    assert gs.num_nodes == 1  # only the new root
    gs.run(UniformEvaluator(), playouts=100)
    assert gs.num_nodes <= used + 8 and not gs.pool_full
    tiny = GraphSearch(SearchConfig(leaves_per_step=1), 12, 12, max_playouts=5)
    tiny.set_position(game.state)
    tiny.graph.counters[0] = tiny.graph.key.shape[0]  # pretend the node pool is full
    tiny.run(UniformEvaluator(), playouts=5)
    assert tiny.pool_full


def test_errors():
    gs = GraphSearch(SearchConfig(), 6, 7, max_playouts=10)
    with pytest.raises(ValueError, match="no position"):
        gs.run(UniformEvaluator(), playouts=5)
    with pytest.raises(ValueError, match="9x9"):
        gs.set_position(c4fast.Game(9, 9).state)
    gs.set_position(c4fast.Game(6, 7).state)
    with pytest.raises(ValueError, match="playouts"):
        gs.run(UniformEvaluator(), playouts=11)
    with pytest.raises(c4fast.IllegalMove):
        gs.advance(7)
