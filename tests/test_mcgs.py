"""Graph search for play: transpositions share nodes; without them (and without proofs) it
equals the tree search; proven results are sound against brute force and the exact solver."""

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import c4fast
from c4fast.config import SearchConfig
from c4fast.evaluators import RolloutEvaluator, UniformEvaluator
from c4fast.mcgs import PROOF_LOSS, PROOF_NONE, PROOF_WIN, GraphSearch, _lookup
from c4fast.players import solver as sv
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
    config = SearchConfig(leaves_per_step=1, proofs=False)  # the tree search has no proofs
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


# ================================================================================ proofs
def search(game, playouts, evaluator=None, **config):
    gs = GraphSearch(SearchConfig(**config), game.height, game.width, max_playouts=max(playouts, 10))
    gs.set_position(game.state)
    gs.run(evaluator or HashEvaluator(), playouts=playouts)
    return gs


@pytest.mark.parametrize("height,width,forbidden,moves,playouts,leaves", [
    (9, 9, (0, 4), (), 60, 1), (9, 9, (0, 4), (), 120, 8), (12, 12, (5, 6), (6, 5), 200, 8),
    (6, 7, None, (), 40, 1)])
def test_proofs_change_nothing_when_no_end_is_reached(height, width, forbidden, moves, playouts, leaves):
    game = c4fast.Game.from_moves(height, width, forbidden, list(moves))
    on = search(game, playouts, leaves_per_step=leaves)
    off = search(game, playouts, leaves_per_step=leaves, proofs=False)
    n = on.num_nodes
    assert (on.graph.terminal[:n] == 0).all(), "precondition: no terminal reached"
    assert (on.graph.proof[:n] == PROOF_NONE).all()
    assert n == off.num_nodes
    np.testing.assert_array_equal(on.root_visits(), off.root_visits())
    np.testing.assert_array_equal(on.root_wdl(), off.root_wdl())
    for f in ("visits", "q", "q_draw", "key"):
        np.testing.assert_array_equal(getattr(on.graph, f)[:n], getattr(off.graph, f)[:n])
    assert on.best_move() == off.best_move() and on.root_proven() == {}


def wins_within(game, k):
    """Brute force: the side to move wins within k of its own moves, whatever the opponent does."""
    for c in game.legal_moves():
        g = game.copy()
        g.play(c)
        if g.result == game.to_move:
            return True
        if k > 1 and g.result is None and all(_reply_keeps_win(g, r, k - 1) for r in g.legal_moves()):
            return True
    return False


def _reply_keeps_win(g, r, k):
    g2 = g.copy()
    g2.play(r)
    return g2.result is None and wins_within(g2, k)


def winning_moves_within(game, k):
    out = []
    for c in game.legal_moves():
        g = game.copy()
        g.play(c)
        if g.result == game.to_move or (k > 1 and g.result is None and all(
                _reply_keeps_win(g, r, k - 1) for r in g.legal_moves())):
            out.append(c)
    return out


def forced_win_positions(k, count, seed, height=6, width=7):
    """Random-play positions whose side to move wins in exactly k of its moves (brute force)."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < count:
        g = c4fast.Game(height, width)
        for _ in range(int(rng.integers(6, height * width - 8))):
            g.play(int(rng.choice(g.legal_moves())))
            if g.result is not None:
                break
        if g.result is None and wins_within(g, k) and (k == 1 or not wins_within(g, k - 1)):
            out.append(g)
    return out


@pytest.mark.parametrize("k,playouts", [(1, 20), (2, 300), (3, 3000)])
def test_forced_wins_are_proven_and_played(k, playouts):
    for game in forced_win_positions(k, 4 if k < 3 else 2, seed=k):
        gs = search(game, playouts, UniformEvaluator(), leaves_per_step=8)
        assert gs.root_proof() == "win", repr(game)
        assert gs.playouts() <= playouts  # the search stops once the root is proven
        assert gs.best_move() in winning_moves_within(game, k), repr(game)
        assert gs.root_wdl()[0] == 1.0
        wins = [c for c, v in gs.root_proven().items() if v == "win"]
        assert set(wins) <= set(winning_moves_within(game, k + 2))


def test_proofs_agree_with_the_exact_solver_and_losses_are_avoided():
    """Every proof the search reports (root and columns) is the exact solver's verdict, and
    the move is never a proven loss while another column is not one."""
    solver = sv.Solver(20)
    rng = np.random.default_rng(5)
    seen = {"win": 0, "draw": 0, "loss": 0}
    avoided = 0
    for i in range(40):
        g = c4fast.Game(6, 7)
        for _ in range(int(rng.integers(14, 36))):
            g.play(int(rng.choice(g.legal_moves())))
            if g.result is not None:
                break
        if g.result is not None:
            continue
        gs = search(g, 400, RolloutEvaluator(1, seed=i), leaves_per_step=4, sensible=bool(i % 2))
        scores = solver.move_scores(g)
        verdict = {c: ("win" if s > 0 else "draw" if s == 0 else "loss") for c, s in scores.items()}
        for c, v in gs.root_proven().items():
            assert v == verdict[c], (repr(g), c)
            seen[v] += 1
        if gs.root_proof() is not None:
            s = solver.solve(g)
            assert gs.root_proof() == ("win" if s > 0 else "draw" if s == 0 else "loss")
        proven = gs.root_proven()
        if any(v == "loss" for v in proven.values()) and gs.root_proof() != "loss":
            assert proven.get(gs.best_move()) != "loss", repr(g)
            avoided += 1
    assert seen["win"] and seen["loss"] and avoided  # the property was exercised


def test_proven_nodes_are_consistent_with_their_children():
    rng = np.random.default_rng(11)
    game = c4fast.Game(6, 7)
    while game.ply < 16 or game.result is not None:
        game = c4fast.Game(6, 7)
        while game.result is None and game.ply < 16:
            game.play(int(rng.choice(game.legal_moves())))
    gs = search(game, 2000, UniformEvaluator(), leaves_per_step=8, sensible=False)
    g = gs.graph
    n = gs.num_nodes
    assert (g.proof[:n] != PROOF_NONE).sum() > (g.terminal[:n] != 0).sum()  # exercised
    flip = {1: 3, 3: 1, 2: 2}
    for i in range(n):
        if g.terminal[i] or g.first_edge[i] < 0 or g.proof[i] == PROOF_NONE:
            continue
        f, ne = int(g.first_edge[i]), int(g.num_edges[i])
        kids = [int(g.proof[c]) if c >= 0 else 0 for c in g.edge_child[f:f + ne]]
        outcomes = [flip.get(p, 0) for p in kids]  # for the side to move at node i
        if g.proof[i] == 1:
            assert 1 in outcomes
        else:
            assert 0 not in outcomes and 1 not in outcomes
            assert (2 in outcomes) == (g.proof[i] == 2)
        assert g.visits[i] == 1 + g.edge_visits[f:f + ne].sum()
    assert (g.inflight[:n] == 0).all()


def two_plies_on(gs, game):
    """`game` after the root's most visited move and that child's most visited reply (both
    read from the graph by hash), and the graph's node of the resulting position."""
    g = gs.graph
    out = game.copy()
    for _ in range(2):
        _, node = _lookup(g, out.state[0]["hash"])
        f, ne = int(g.first_edge[node]), int(g.num_edges[node])
        out.play(int(g.edge_move[f + int(np.argmax(g.edge_visits[f:f + ne]))]))
    return out, _lookup(g, out.state[0]["hash"])[1]


def test_a_kept_graph_continues_from_the_new_positions_node():
    """set_position(keep=True) two plies on: the node of the new position becomes the root
    with its visits and value; the playout target counts them; unknown positions, a graph
    over half full or keep=False clear it."""
    config = SearchConfig(leaves_per_step=4)
    gs = GraphSearch(config, 6, 7, max_playouts=5000)
    gs.set_position(c4fast.Game(6, 7).state)
    gs.run(HashEvaluator(), playouts=1500)
    nodes = gs.num_nodes
    g = gs.graph
    game, node = two_plies_on(gs, c4fast.Game(6, 7))
    visits, q = int(g.visits[node]), float(g.q[node])
    assert visits > 1
    assert gs.set_position(game.state, keep=True)
    assert gs.playouts() == visits and gs.num_nodes == nodes  # nothing cleared, nothing added
    assert gs.root_wdl()[0] - gs.root_wdl()[2] == pytest.approx(-q)
    gs.run(HashEvaluator(), playouts=visits + 40)
    assert visits + 40 <= gs.playouts() <= visits + 40 + config.leaves_per_step
    assert gs.best_move() in game.legal_moves()
    assert (g.inflight[:gs.num_nodes] == 0).all() and (g.edge_inflight[:g.counters[1]] == 0).all()
    # a position the graph has never seen, keep=False, and a graph over half full: cleared
    other = c4fast.Game.from_moves(6, 7, None, [3, 3, 2, 4])
    assert not gs.set_position(other.state, keep=True) and gs.num_nodes == 1 and gs.playouts() == 0
    gs.run(HashEvaluator(), playouts=100)
    again, node = two_plies_on(gs, other)
    assert node >= 0
    assert not gs.set_position(again.state, keep=False) and gs.num_nodes == 1
    gs.run(HashEvaluator(), playouts=100)
    again, node = two_plies_on(gs, again)
    assert node >= 0
    g.counters[0] = len(g.key) // 2 + 1  # pretend the pool is more than half used
    assert not gs.set_position(again.state, keep=True) and gs.num_nodes == 1


def test_proofs_stay_exact_when_the_graph_is_kept_over_a_whole_game():
    """Games searched ply after ply (both sides) on one kept graph: every proof it reports
    is still the exact solver's verdict, and the graph was really kept."""
    solver = sv.Solver(20)
    rng = np.random.default_rng(8)
    kept = checked = 0
    for i in range(6):
        g = c4fast.Game(6, 7)
        gs = GraphSearch(SearchConfig(leaves_per_step=4), 6, 7, max_playouts=100_000)
        while g.result is None:
            kept += gs.set_position(g.state, keep=g.ply > 0)
            gs.run(RolloutEvaluator(1, seed=i), playouts=min(gs.playouts() + 400, 100_000))
            if g.ply >= 14:
                scores = solver.move_scores(g)
                for c, v in gs.root_proven().items():
                    assert v == ("win" if scores[c] > 0 else "draw" if scores[c] == 0 else "loss"), (repr(g), c)
                    checked += 1
            g.play(gs.best_move() if rng.random() < 0.85 else int(rng.choice(g.legal_moves())))
    assert kept > 60 and checked > 30, (kept, checked)


def reference_move(gs, share):
    """The play move computed from the graph arrays: a proven win first (fewest plies),
    never a proven loss while another column is not one; then the most visited column, or
    with `share` > 0 the highest Q among columns with at least share * the most visits
    (ties: visits, prior, lower column)."""
    gr, root = gs.graph, gs.root
    first, n = int(gr.first_edge[root]), int(gr.num_edges[root])
    rows = []
    for e in range(first, first + n):
        c = int(gr.edge_child[e])
        proof = PROOF_NONE if c < 0 else int(gr.proof[c])
        q = 0.0 if c < 0 or (gr.visits[c] == 0 and proof == PROOF_NONE) else float(gr.q[c])
        rows.append(dict(col=int(gr.edge_move[e]), n=int(gr.edge_visits[e]), p=float(gr.edge_prior[e]),
                         proof=proof, plies=0 if c < 0 else int(gr.proof_len[c]), q=q))
    wins = [r for r in rows if r["proof"] == PROOF_LOSS]  # a loss for the child's side to move
    if wins:
        return sorted(wins, key=lambda r: (r["plies"], -r["n"], -r["p"], r["col"]))[0]["col"]
    safe = [r for r in rows if r["proof"] != PROOF_WIN]
    if not safe:
        return sorted(rows, key=lambda r: (-r["plies"], -r["n"], -r["p"], r["col"]))[0]["col"]
    most = max(r["n"] for r in safe)
    if share > 0 and most > 0:
        safe = [r for r in safe if r["n"] >= share * most]
        return sorted(safe, key=lambda r: (-r["q"], -r["n"], -r["p"], r["col"]))[0]["col"]
    return sorted(safe, key=lambda r: (-r["n"], -r["p"], r["col"]))[0]["col"]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(size=st.sampled_from([(4, 4), (5, 6), (6, 7), (9, 9)]), seed=st.integers(0, 10**6),
       plies=st.integers(0, 20), playouts=st.integers(1, 300), share=st.sampled_from([0.0, 0.05, 0.3, 0.5, 1.0]),
       rollouts=st.booleans())
def test_select_q_plays_the_reference_move_and_changes_nothing_else(size, seed, plies, playouts, share, rollouts):
    """`SearchConfig.select_q` only changes the move read off the finished search: the same
    graph as with the visit-count move (0), and the move of an independent reference over the
    root's edges."""
    rng = np.random.default_rng(seed)
    g = c4fast.Game(*size)
    for _ in range(plies):
        if g.result is not None:
            break
        g.play(int(rng.choice(g.legal_moves())))
    assume(g.result is None)
    ev = (lambda: RolloutEvaluator(1, seed=seed)) if rollouts else HashEvaluator
    base = search(g, playouts, ev(), leaves_per_step=4, select_q=0.0)
    gs = search(g, playouts, ev(), leaves_per_step=4, select_q=share)
    np.testing.assert_array_equal(gs.root_visits(), base.root_visits())
    assert gs.best_move() == reference_move(gs, share)
    assert base.best_move() == reference_move(base, 0.0)
    assert gs.best_move() in g.legal_moves()
    # root_q: exactly the visited and proven columns, the exact value where proven, in [-1, 1]
    q, proven = gs.root_q(), gs.root_proven()
    assert set(q) == {c for c, v in enumerate(gs.root_visits()) if v > 0} | set(proven)
    assert all(-1.0 <= v <= 1.0 for v in q.values())
    assert all(q[c] == {"win": 1.0, "draw": 0.0, "loss": -1.0}[r] for c, r in proven.items())


def test_select_q_picks_a_higher_value_than_the_most_visited_column():
    """On fixed positions the Q rule plays another column than the visit count in some of
    them, and its column's Q is then never lower than the most visited one's."""
    rng = np.random.default_rng(3)
    differ = 0
    for i in range(30):
        g = c4fast.Game(6, 7)
        for _ in range(int(rng.integers(0, 12))):
            g.play(int(rng.choice(g.legal_moves())))
        gs = search(g, 150, HashEvaluator(), leaves_per_step=4, select_q=0.2)
        by_q, by_n = gs.best_move(), search(g, 150, HashEvaluator(), leaves_per_step=4, select_q=0.0).best_move()
        if by_q != by_n:
            differ += 1
            q = {c: q for c, _, _, _, _, q in gs._root_edges()}
            assert q[by_q] > q[by_n]
    assert differ >= 3


def test_select_q_is_checked_and_reaches_the_net_player():
    for bad in (-0.1, 1.5, float("nan"), True, "0.5"):
        with pytest.raises(ValueError, match="select_q"):
            SearchConfig(select_q=bad)
    from c4fast.config import EndgameConfig
    from nets.players import apply_play_options

    assert apply_play_options({"select_q": "0.25"}, SearchConfig(), EndgameConfig())[0].select_q == 0.25
    with pytest.raises(ValueError, match="select_q"):
        apply_play_options({"select_q": "2"}, SearchConfig(), EndgameConfig())


def test_select_q_threshold_is_inclusive_on_set_statistics():
    """Root statistics set by hand: with share 0.5 and most visits 10, a column with 5
    visits is a candidate and one with 4 is not, whatever their Q."""
    gs = search(c4fast.Game(6, 7), 60, HashEvaluator(), leaves_per_step=1, select_q=0.5)
    gr, first = gs.graph, int(gs.graph.first_edge[gs.root])
    edges = list(range(first, first + int(gr.num_edges[gs.root])))
    assert len(edges) == 7 and all(gr.edge_child[e] >= 0 for e in edges)
    cols = [int(gr.edge_move[e]) for e in edges]
    for e, n, q in zip(edges, (10, 5, 4, 1, 0, 0, 0), (0.0, 0.2, 0.9, 0.95, 0.0, 0.0, 0.0)):
        gr.edge_visits[e] = n
        gr.q[gr.edge_child[e]] = q
        gr.proof[gr.edge_child[e]] = PROOF_NONE
    assert gs.best_move() == cols[1]
    gr.q[gr.edge_child[edges[1]]] = -0.1  # below the most visited column's Q
    assert gs.best_move() == cols[0]
    gs.config = SearchConfig(select_q=0.0)
    assert gs.best_move() == cols[0]
