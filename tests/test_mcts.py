"""The batched array MCTS (``c4fast.mcts``).

* Differential: with one leaf per step, no noise and no forced playouts, the Numba
  search and the pure-Python reference ``ref_puct.py`` visit exactly the same columns
  the same number of times (whole trees compared node by node), from several
  positions and root temperatures.
* Tactics with the uniform evaluator: win now, block, prefer the faster win.
* Invariants (hypothesis): visit accounting, no virtual loss left, games never share
  nodes, expansions match the rules, determinism, tree reuse.
* Formula-level checks of forced playouts and policy-target pruning on hand-built
  root statistics, Dirichlet noise, ``choose_move`` and the API's errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import c4fast
import ref_puct
from c4fast import Game
from c4fast.config import SearchConfig
from c4fast.evaluators import RolloutEvaluator, UniformEvaluator
from c4fast.mcts import (
    FORCED_SCORE,
    NOT_TERMINAL,
    TERMINAL_DRAW,
    TERMINAL_WIN,
    UNEXPANDED,
    BatchedMCTS,
    choose_move,
    policy_target_kernel,
    run_search,
    select_child,
)

HYP = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))


# --------------------------------------------------------------------------- evaluators
class HashEvaluator:
    """Deterministic fake network: logits and wdl drawn from a numpy Generator seeded by
    the position's Zobrist hash. ``scale=0`` gives flat logits (ties everywhere)."""

    def __init__(self, scale: float = 1.5, salt: int = 0, wdl_levels: int = 0):
        self.scale = scale
        self.salt = salt
        self.wdl_levels = wdl_levels  # > 0: wdl on a coarse grid (equal values, Q ties)
        self.calls = 0

    def position(self, rec):
        rng = np.random.default_rng([int(rec["hash"]), self.salt])
        h, w = int(rec["height"]), int(rec["width"])
        logits = (rng.standard_normal((h, w)) * self.scale).astype(np.float32)
        if self.wdl_levels:
            raw = rng.integers(0, self.wdl_levels + 1, 3).astype(np.float64) + 1.0
        else:
            raw = rng.random(3) + 0.05
        return logits, (raw / raw.sum()).astype(np.float32)

    def __call__(self, game: Game):
        """The reference's evaluator: evaluate(game) -> (logits, wdl)."""
        return self.position(game.state[0])

    def evaluate(self, planes, positions):
        """The c4fast evaluator contract."""
        b, _, h, w = planes.shape
        logits = np.zeros((b, h, w), np.float32)
        wdl = np.zeros((b, 3), np.float32)
        for i in range(b):
            logits[i], wdl[i] = self.position(positions[i])
        self.calls += b
        return logits, wdl


# --------------------------------------------------------------------------- helpers
def searched(game: Game, config: SearchConfig, playouts: int, evaluator, *, full=False,
             root_temp=1.0, seed=0, max_playouts=None) -> BatchedMCTS:
    m = BatchedMCTS(config, 1, game.height, game.width, seed=seed,
                    max_playouts=max_playouts or playouts)
    m.set_position(0, game.state)
    m.start_search(0, playouts, full=full, root_temp=root_temp)
    run_search(m, evaluator)
    return m


def compare_trees(m: BatchedMCTS, g: int, root: ref_puct.Node) -> int:
    """Assert that game g's Numba tree equals the reference tree node by node; returns
    the number of nodes compared."""
    t = m.tree
    stack = [(int(m.games.root[g]), root, "root")]
    count = 0
    while stack:
        i, ref, where = stack.pop()
        count += 1
        assert t.visits[i] == ref.visits, where
        assert t.value_sum[i] == pytest.approx(ref.value_sum, abs=1e-9), where
        assert t.draw_sum[i] == pytest.approx(ref.draw_sum, abs=1e-9), where
        assert t.terminal[i] == ref.terminal, where
        if ref.children is None:
            assert t.first_child[i] == UNEXPANDED, where
            continue
        first, n = int(t.first_child[i]), int(t.num_children[i])
        assert first != UNEXPANDED, where
        assert [int(c) for c in t.move[first:first + n]] == [k.move for k in ref.children], where
        for j, kid in enumerate(ref.children):
            assert t.prior[first + j] == kid.prior, f"{where}/{kid.move} prior"
            stack.append((first + j, kid, f"{where}/{kid.move}"))
    return count


def immediate_wins(game: Game) -> list[int]:
    out = []
    for c in game.legal_moves():
        after = game.copy()
        after.play(c)
        if after.result == game.to_move:
            out.append(c)
    return out


def random_midgame(seed: int, height: int, width: int, forbidden, plies: int) -> Game:
    """Random moves that never end the game (a reproducible position)."""
    rng = np.random.default_rng(seed)
    g = Game(height, width, forbidden)
    for _ in range(plies):
        quiet = quiet_moves(g)
        if not quiet:
            break
        g.play(int(rng.choice(quiet)))
    return g


def quiet_moves(g: Game) -> list[int]:
    """Legal columns whose move does not end the game."""
    quiet = []
    for c in g.legal_moves():
        after = g.copy()
        after.play(c)
        if after.result is None:
            quiet.append(c)
    return quiet


# ====================================================================== differential
DIFF_CASES = [
    # id, game, config changes, playouts, evaluator kwargs
    ("empty-6x7", lambda: Game(6, 7), {}, 400, {}),
    ("saiblo-9x10-forbidden", lambda: Game(9, 10, (0, 4)), {}, 300, {}),
    ("saiblo-12x12-forbidden-high", lambda: Game(12, 12, (7, 3)), {}, 150, {"salt": 3}),
    ("must-block-double-threat", lambda: Game.from_moves(6, 7, None, [3, 3, 4, 4, 2]), {}, 200, {}),
    ("tactics-sensible-off", lambda: Game.from_moves(6, 7, None, [3, 3, 4, 4, 2]),
     {"sensible": False}, 200, {}),
    ("win-now-sensible-off", lambda: Game.from_moves(6, 9, None, [2, 2, 3, 3, 6, 0, 6, 0, 6, 8]),
     {"sensible": False}, 250, {"salt": 1}),
    ("midgame-9x10", lambda: random_midgame(7, 9, 10, (4, 5), 24), {}, 300, {"salt": 2}),
    ("midgame-sensible-off", lambda: random_midgame(11, 7, 8, (0, 0), 18),
     {"sensible": False, "c_puct": 2.5, "fpu_reduction": 0.5}, 300, {}),
    ("nearly-full-4x4", lambda: random_midgame(5, 4, 4, (2, 1), 10), {"sensible": False}, 120, {}),
    ("flat-logits-ties", lambda: Game(7, 9, (3, 3)), {}, 200, {"scale": 0.0, "wdl_levels": 2}),
    ("no-fpu-big-cpuct", lambda: Game(6, 7), {"fpu_reduction": 0.0, "c_puct": 4.0}, 50, {}),
]


@pytest.mark.parametrize("root_temp", [1.0, 0.5, 2.0])
@pytest.mark.parametrize("case", DIFF_CASES, ids=[c[0] for c in DIFF_CASES])
def test_matches_reference(case, root_temp):
    _, make, changes, playouts, ev_kwargs = case
    game = make()
    assert game.result is None
    config = SearchConfig(leaves_per_step=1, **changes)
    ev = HashEvaluator(**ev_kwargs)
    m = searched(game, config, playouts, ev, full=False, root_temp=root_temp)
    ref = ref_puct.search_with_config(game, ev, playouts, config, root_temp=root_temp)

    np.testing.assert_array_equal(m.root_visits(0), ref_puct.root_visits(ref, game.width))
    assert m.root_playouts(0) == ref.visits == playouts
    assert sum(k.visits for k in ref.children) == playouts - 1
    wdl = m.root_wdl(0)
    assert abs((wdl[0] - wdl[2]) - ref_puct.root_q(ref)) < 1e-9
    assert abs(wdl[1] - ref.draw_sum / ref.visits) < 1e-9
    # every node, not just the root's children; a fresh tree has no unreachable nodes
    assert compare_trees(m, 0, ref) == int(m.games.next_free[0] - m.games.region_start[0])
    # the policy target of a non-full search is the plain visit distribution
    np.testing.assert_allclose(m.policy_target(0), m.root_visits(0) / (playouts - 1), atol=1e-12)


@pytest.mark.parametrize("root_temp", [1.0, 0.5])
def test_matches_reference_after_tree_reuse(root_temp):
    """advance() keeps the played child's subtree (the reference's child node, exactly),
    and searching on from it matches the reference continuing from that child."""
    game = Game(7, 8, (2, 5))
    config = SearchConfig(leaves_per_step=1)
    ev = HashEvaluator(salt=9)
    m = searched(game, config, 200, ev, max_playouts=300, root_temp=root_temp)
    ref = ref_puct.search_with_config(game, ev, 200, config, root_temp=root_temp)
    for _ in range(3):
        col = int(np.argmax(m.root_visits(0)))
        kid = next(k for k in ref.children if k.move == col)
        m.advance(0, col)
        game.play(col)
        assert m.root_playouts(0) == kid.visits > 0
        compare_trees(m, 0, kid)
        target = kid.visits + 100
        m.start_search(0, target, full=False, root_temp=root_temp)
        run_search(m, ev)
        ref = ref_puct.search_with_config(game, ev, target, config, root_temp=root_temp, root=kid)
        np.testing.assert_array_equal(m.root_visits(0), ref_puct.root_visits(ref, game.width))
        assert m.root_playouts(0) == target
        compare_trees(m, 0, ref)


def test_batched_game_equals_game_searched_alone():
    """Without noise, a game's tree does not depend on the other games of the batch
    (regions are private; only the node offsets differ)."""
    config = SearchConfig(leaves_per_step=4)
    ev = HashEvaluator(salt=4)
    games = [Game(8, 9, (1, 1)), random_midgame(3, 8, 9, (1, 1), 9), random_midgame(4, 8, 9, None, 6)]
    targets = [90, 40, 130]
    batch = BatchedMCTS(config, len(games), 8, 9, max_playouts=130)
    for g, (game, n) in enumerate(zip(games, targets)):
        batch.set_position(g, game.state)
        batch.start_search(g, n, full=False)
    run_search(batch, ev)
    for g, (game, n) in enumerate(zip(games, targets)):
        solo = searched(game, config, n, ev, max_playouts=130)
        a0, s0 = int(batch.games.region_start[g]), int(solo.games.region_start[0])
        used = int(solo.games.next_free[0]) - s0
        assert int(batch.games.next_free[g]) - a0 == used
        for name in batch.tree._fields:
            got = getattr(batch.tree, name)[a0:a0 + used].copy()
            want = getattr(solo.tree, name)[s0:s0 + used].copy()
            if name == "first_child":
                got = np.where(got == UNEXPANDED, UNEXPANDED, got - a0)
                want = np.where(want == UNEXPANDED, UNEXPANDED, want - s0)
            np.testing.assert_array_equal(got, want, err_msg=f"game {g} {name}")


# ============================================================================ tactics
def most_visited(m: BatchedMCTS) -> int:
    return int(np.argmax(m.root_visits(0)))


@pytest.mark.parametrize("sensible", [False, True])
def test_takes_immediate_win(sensible):
    game = Game.from_moves(6, 7, None, [0, 6, 0, 6, 0, 5])  # X: col 0 rows 0-2
    assert immediate_wins(game) == [0]
    m = searched(game, SearchConfig(sensible=sensible), 200, UniformEvaluator())
    assert most_visited(m) == 0
    assert m.root_wdl(0)[0] > 0.9


@pytest.mark.parametrize("sensible", [False, True])
def test_blocks_single_threat(sensible):
    game = Game.from_moves(6, 7, None, [0, 6, 0, 6, 0])  # O to move, X threatens col 0
    assert immediate_wins(game) == []
    assert game.sensible_moves() == [0]
    m = searched(game, SearchConfig(sensible=sensible), 200, UniformEvaluator())
    assert most_visited(m) == 0


def test_prefers_faster_win():
    game = Game.from_moves(6, 9, None, [2, 2, 3, 3, 6, 0, 6, 0, 6, 8])
    assert immediate_wins(game) == [6]

    def unstoppable(col):  # after col, every reply leaves X an immediate win
        after = game.copy()
        after.play(col)
        if after.result is not None:
            return False
        for reply in after.legal_moves():
            g2 = after.copy()
            g2.play(reply)
            if g2.result is not None or not immediate_wins(g2):
                return False
        return True

    double = [c for c in game.legal_moves() if unstoppable(c)]
    assert 4 in double
    m = searched(game, SearchConfig(sensible=False), 200, UniformEvaluator())
    root, t = int(m.games.root[0]), m.tree
    first, n = int(t.first_child[root]), int(t.num_children[root])
    assert list(t.move[first:first + n]) == game.legal_moves()  # both moves are expanded
    v = m.root_visits(0)
    assert most_visited(m) == 6
    assert v[6] > v[4] and v[4] > 0


# ========================================================================= invariants
@st.composite
def scenarios(draw):
    height = draw(st.integers(4, 12))
    width = draw(st.integers(4, 12))
    config = SearchConfig(
        c_puct=draw(st.sampled_from([0.0, 0.5, 1.1, 3.0])),
        fpu_reduction=draw(st.sampled_from([0.0, 0.2, 1.0])),
        noise_fraction=draw(st.sampled_from([0.0, 0.25, 1.0])),
        noise_alpha=draw(st.sampled_from([0.3, 0.8, 2.0])),
        forced_k=draw(st.sampled_from([0.0, 2.0])),
        leaves_per_step=draw(st.integers(1, 8)),
        sensible=draw(st.booleans()),
        tree_reuse=draw(st.booleans()),
    )
    games = []
    for _ in range(draw(st.integers(1, 3))):
        forbidden = None
        if draw(st.booleans()):
            forbidden = (draw(st.integers(0, height - 1)), draw(st.integers(0, width - 1)))
        g = Game(height, width, forbidden)
        for choice in draw(st.lists(st.integers(0, 11), max_size=10)):
            quiet = quiet_moves(g)
            if not quiet:
                break
            g.play(quiet[choice % len(quiet)])
        games.append(g)
    targets = [draw(st.integers(1, 48)) for _ in games]
    full = [draw(st.booleans()) for _ in games]
    temps = [draw(st.sampled_from([1.0, 0.3, 2.0])) for _ in games]
    evaluator = draw(st.sampled_from(["hash", "flat", "rollout"]))
    seed = draw(st.integers(0, 2**31))
    return height, width, config, games, targets, full, temps, evaluator, seed


def make_evaluator(kind):
    if kind == "hash":
        return HashEvaluator()
    if kind == "flat":
        return HashEvaluator(scale=0.0, wdl_levels=2)
    return RolloutEvaluator(rollouts=2, seed=1)


def check_tree(m: BatchedMCTS, g: int, game: Game) -> int:
    """Structural invariants of game g's tree; returns the number of reachable nodes."""
    t, G = m.tree, m.games
    lo, hi, nxt = int(G.region_start[g]), int(G.region_end[g]), int(G.next_free[g])
    assert lo < nxt <= hi
    assert G.pool_full[g] == 0
    root = int(G.root[g])
    assert lo <= root < nxt
    sensible = m.config.sensible
    seen = set()
    stack = [(root, game)]
    while stack:
        i, pos = stack.pop()
        assert lo <= i < nxt, f"node {i} outside game {g}'s region [{lo}, {nxt})"
        assert i not in seen
        seen.add(i)
        assert t.inflight[i] == 0, "virtual loss left behind"
        v = int(t.visits[i])
        assert abs(t.value_sum[i]) <= v + 1e-9 and -1e-9 <= t.draw_sum[i] <= v + 1e-9
        first, n = int(t.first_child[i]), int(t.num_children[i])
        if t.terminal[i] != NOT_TERMINAL:
            assert first == UNEXPANDED and n == 0
            if t.terminal[i] == TERMINAL_WIN:
                assert t.value_sum[i] == v and t.draw_sum[i] == 0
            else:
                assert t.value_sum[i] == 0 and t.draw_sum[i] == v
            continue
        if first == UNEXPANDED:
            assert n == 0 and v == 0, f"node {i} visited but not expanded"
            continue
        assert n >= 1 and lo <= first and first + n <= nxt
        kids = range(first, first + n)
        assert v == 1 + sum(int(t.visits[k]) for k in kids)
        want = pos.sensible_moves() if sensible else pos.legal_moves()
        assert [int(t.move[k]) for k in kids] == want
        assert abs(math.fsum(float(t.prior[k]) for k in kids) - 1.0) < 1e-5
        assert all(t.prior[k] >= 0 for k in kids)
        for k in kids:
            after = pos.copy()
            after.play(int(t.move[k]))
            if after.result == pos.to_move:
                assert t.terminal[k] == TERMINAL_WIN
            elif after.result == 0:
                assert t.terminal[k] == TERMINAL_DRAW
            else:
                assert t.terminal[k] == NOT_TERMINAL
            stack.append((k, after))
    return len(seen)


def run_scenario(sc, check: bool):
    height, width, config, games, targets, full, temps, evaluator, seed = sc
    lps = config.leaves_per_step
    m = BatchedMCTS(config, len(games), height, width, seed=seed, max_playouts=48)
    ev = make_evaluator(evaluator)
    for g, game in enumerate(games):
        m.set_position(g, game.state)
        m.start_search(g, targets[g], full=full[g], root_temp=temps[g])
    run_search(m, ev)
    assert m.all_done()
    positions = []
    for g, game in enumerate(games):
        assert m.done(g)
        if check:
            check_tree(m, g, game)
        assert targets[g] <= m.root_playouts(g) < targets[g] + lps
        assert np.all(m.tree.inflight == 0)
        pt = m.policy_target(g)
        if targets[g] > 1:
            assert abs(pt.sum() - 1.0) < 1e-9 and np.all(pt >= 0)
        assert np.all((m.root_visits(g) > 0) <= (np.array([c in game.legal_moves() for c in range(width)])))

    # tree reuse: play the most visited non-terminal child of every game, search again
    for g, game in enumerate(games):
        r, t = int(m.games.root[g]), m.tree
        first, n = int(t.first_child[r]), int(t.num_children[r])
        kids = [k for k in range(first, first + n) if t.terminal[k] == NOT_TERMINAL]
        if not kids:
            positions.append(None)
            continue
        k = max(kids, key=lambda k: (int(t.visits[k]), -k))
        col, kid_visits = int(t.move[k]), int(t.visits[k])
        m.advance(g, col)
        after = game.copy()
        after.play(col)
        assert after.result is None
        np.testing.assert_array_equal(m.games.positions[g], after.state[0])
        expected = kid_visits if (config.tree_reuse and kid_visits > 0) else 0
        assert m.root_playouts(g) == expected
        if check:
            check_tree(m, g, after)
        positions.append(after)
        reused = m.root_playouts(g)
        m.start_search(g, targets[g], full=full[g], root_temp=temps[g])
        targets[g] = max(targets[g], reused)
    run_search(m, ev)
    for g, after in enumerate(positions):
        if after is None:
            continue
        if check:
            check_tree(m, g, after)
        assert targets[g] <= m.root_playouts(g) < targets[g] + lps or m.root_playouts(g) == targets[g]
    assert np.all(m.tree.inflight == 0)
    return m


@settings(max_examples=max(25, settings.default.max_examples // 2), **HYP)
@given(scenarios())
def test_invariants_and_determinism(sc):
    m1 = run_scenario(sc, check=True)
    m2 = run_scenario(sc, check=False)
    for name in m1.tree._fields:
        assert np.array_equal(getattr(m1.tree, name), getattr(m2.tree, name)), name
    for name in m1.games._fields:
        assert np.array_equal(getattr(m1.games, name), getattr(m2.games, name)), name


def test_root_visits_exact_for_fresh_root():
    """A fresh root of target n ends with n visits and children summing to n - 1."""
    for lps in (1, 3, 8):
        config = SearchConfig(leaves_per_step=lps)
        m = searched(Game(9, 9, (4, 4)), config, 77, HashEvaluator(), full=True)
        assert 77 <= m.root_playouts(0) < 77 + lps
        r = int(m.games.root[0])
        assert m.root_visits(0).sum() == m.root_playouts(0) - 1
        assert m.tree.visits[r] == m.root_playouts(0)


def test_virtual_loss_spreads_leaves():
    """With several leaves per step, one select() returns distinct leaves of one game."""
    config = SearchConfig(leaves_per_step=8)
    m = BatchedMCTS(config, 1, 6, 7, max_playouts=100)
    m.set_position(0, Game(6, 7).state)
    m.start_search(0, 100, full=False)
    planes = m.planes_buffer()
    ev = UniformEvaluator()
    n = m.select(planes)
    assert n == 1  # the unexpanded root: the second descent collides
    m.expand_and_backup(n, *ev.evaluate(planes[:n], m.leaf_positions(n)))
    n = m.select(planes)
    assert n == 7  # all seven root children, no duplicates
    assert sorted(int(m.tree.move[x]) for x in m.leaves.node[:n]) == list(range(7))
    r = int(m.games.root[0])
    assert m.tree.inflight[r] == 7
    m.expand_and_backup(n, *ev.evaluate(planes[:n], m.leaf_positions(n)))
    assert np.all(m.tree.inflight == 0)
    assert m.root_playouts(0) == 8


# ============================================================ forced playouts, pruning
def hand_tree(stats, forced_k=2.0, c_puct=1.1, width=7):
    """A BatchedMCTS whose game-0 root has children (col, visits, value_sum, prior)."""
    config = SearchConfig(forced_k=forced_k, c_puct=c_puct, leaves_per_step=1)
    m = BatchedMCTS(config, 1, 6, width, max_playouts=50)
    t = m.tree
    r = int(m.games.root[0])
    first = r + 1
    t.first_child[r] = first
    t.num_children[r] = len(stats)
    t.visits[r] = 1 + sum(s[1] for s in stats)
    t.value_sum[r] = -sum(s[2] for s in stats)  # the mover into the root is the opponent
    for j, (col, visits, value_sum, prior) in enumerate(stats):
        t.move[first + j] = col
        t.visits[first + j] = visits
        t.value_sum[first + j] = value_sum
        t.prior[first + j] = prior
        t.first_child[first + j] = UNEXPANDED
    return m, r


def expected_pruned(stats, forced_k, c_puct):
    """KataGo's policy-target pruning, computed independently: every child but the
    most visited loses up to sqrt(k * P * total) visits, but never so many that its
    PUCT score rises above the best child's (found by bisection); <= 1 visit -> 0."""
    total = float(sum(s[1] for s in stats))
    sqrt_total = math.sqrt(1.0 + total)
    best = max(range(len(stats)), key=lambda j: (stats[j][1], -j))

    def puct(j, v):
        _, visits, value_sum, prior = stats[j]
        return value_sum / visits + c_puct * float(np.float32(prior)) * sqrt_total / (1.0 + v)

    best_score = puct(best, stats[best][1])
    out = {}
    for j, (col, visits, _, prior) in enumerate(stats):
        if j == best or visits == 0:
            out[col] = float(visits)
            continue
        lowest = max(0.0, visits - math.sqrt(forced_k * float(np.float32(prior)) * total))
        if puct(j, visits) > best_score:
            v = float(visits)  # already better than the best: nothing is forced
        elif puct(j, lowest) <= best_score:
            v = lowest
        else:  # smallest v in [lowest, visits] with puct(j, v) <= best_score
            a, b = lowest, float(visits)
            for _ in range(200):
                mid = (a + b) / 2
                if puct(j, mid) <= best_score:
                    b = mid
                else:
                    a = mid
            v = b
        out[col] = 0.0 if v <= 1.0 else v
    return out


PRUNING_CASES = {
    # (col, visits, value_sum, prior): a clear best child and weaker, forced siblings
    "typical": [(0, 5, -2.0, 0.05), (1, 40, 12.0, 0.3), (2, 120, 60.0, 0.4),
                (3, 12, 1.0, 0.2), (5, 3, -0.5, 0.05)],
    # child 3's Q is above the best child's PUCT score: gap <= 0, no reduction
    "no-reduction": [(0, 100, 0.0, 0.5), (3, 10, 9.5, 0.3), (6, 4, 2.0, 0.2)],
    # a sibling whose score would pass the best's after a partial reduction
    # child 1 stops where its score meets the best's (k = 2) or loses all n_forced (k = 0.7)
    "partial": [(0, 100, 50.0, 0.4), (1, 20, 6.0, 0.3), (2, 3, -1.5, 0.3)],
    "unvisited-child": [(0, 0, 0.0, 0.4), (1, 30, 3.0, 0.3), (2, 9, 0.9, 0.3)],
    "tied-best-lowest-column-kept": [(1, 20, 2.0, 0.3), (4, 20, 4.0, 0.3), (5, 10, 1.0, 0.4)],
}


@pytest.mark.parametrize("name", list(PRUNING_CASES))
@pytest.mark.parametrize("forced_k", [2.0, 0.7])
def test_policy_target_pruning(name, forced_k):
    stats = PRUNING_CASES[name]
    c_puct = 1.1
    m, r = hand_tree(stats, forced_k=forced_k, c_puct=c_puct)
    width = m.width
    want = np.zeros(width)
    for col, v in expected_pruned(stats, forced_k, c_puct).items():
        want[col] = v
    out = np.zeros(width)
    s = policy_target_kernel(m.tree, r, m.params, True, out)
    np.testing.assert_allclose(out, want, rtol=1e-9, atol=1e-9)
    assert s == pytest.approx(want.sum(), abs=1e-9)
    plain = np.zeros(width)
    for col, visits, _, _ in stats:
        plain[col] = visits
    # the most visited child (lowest column on ties) keeps its visits
    best_col = max(stats, key=lambda s_: (s_[1], -s_[0]))[0]
    assert out[best_col] == plain[best_col]
    assert np.all(out <= plain)
    # forced=False: plain visits
    out2 = np.zeros(width)
    assert policy_target_kernel(m.tree, r, m.params, False, out2) == plain.sum()
    np.testing.assert_array_equal(out2, plain)
    np.testing.assert_array_equal(m.root_visits(0), plain)
    # the public target: pruned for full searches, plain otherwise
    m.games.full[0] = 1
    np.testing.assert_allclose(m.policy_target(0), want / want.sum(), atol=1e-12)
    m.games.full[0] = 0
    np.testing.assert_allclose(m.policy_target(0), plain / plain.sum(), atol=1e-12)
    if name == "no-reduction":
        np.testing.assert_array_equal(out, plain)
    if name in ("typical", "partial"):
        assert np.any(out < plain)


def test_policy_target_forced_k_zero_is_plain():
    stats = PRUNING_CASES["typical"]
    m, r = hand_tree(stats, forced_k=0.0)
    out = np.zeros(m.width)
    policy_target_kernel(m.tree, r, m.params, True, out)
    plain = np.zeros(m.width)
    for col, visits, _, _ in stats:
        plain[col] = visits
    np.testing.assert_array_equal(out, plain)


def test_policy_target_unexpanded_root():
    m, r = hand_tree([(0, 3, 1.0, 1.0)])
    m.tree.first_child[r] = UNEXPANDED
    out = np.ones(m.width)
    assert policy_target_kernel(m.tree, r, m.params, True, out) == 0.0
    assert np.all(out == 0)


def test_select_child_forces_under_visited_child():
    # child 0: strong and well visited; child 2: weak, 3 visits < sqrt(2 * 0.3 * 105) ~ 7.9;
    # child 4: zero prior, unvisited; child 5: weak, 2 visits < sqrt(2 * 0.1 * 105) ~ 4.6
    stats = [(0, 100, 80.0, 0.6), (2, 3, -3.0, 0.3), (4, 0, 0.0, 0.0), (5, 2, -2.0, 0.1)]
    m, r = hand_tree(stats, forced_k=2.0)
    t = m.tree
    first = int(t.first_child[r])
    total = sum(s[1] for s in stats)
    assert 3 < math.sqrt(2.0 * 0.3 * total) and 2 < math.sqrt(2.0 * 0.1 * total)
    assert int(select_child(t, r, False, m.params)) == first  # best PUCT: the strong child
    # forcing root: the first child below its forced playouts wins over the better one
    assert int(select_child(t, r, True, m.params)) == first + 1
    # 9 visits >= sqrt(2 * 0.3 * 111): child 2 no longer forced; child 5 (2 visits) is
    t.visits[first + 1] = 9
    assert 9 >= math.sqrt(2.0 * 0.3 * (total + 6))
    assert int(select_child(t, r, True, m.params)) == first + 3
    # a zero-prior child is never forced, even unvisited: plain PUCT again
    t.prior[first + 3] = 0.0
    t.prior[first + 1] = 0.0
    assert int(select_child(t, r, True, m.params)) == first
    assert FORCED_SCORE > 1e10
    # virtual losses count as visits in the forcing test
    t.prior[first + 3] = 0.1
    t.inflight[first + 3] = 3
    assert int(select_child(t, r, True, m.params)) == first
    t.inflight[first + 3] = 0


def test_forced_playouts_only_in_full_searches():
    """A full search gives every root child with a decent prior at least about
    sqrt(k P N) visits; the policy target then removes them again."""
    game = Game(6, 7)
    config = SearchConfig(leaves_per_step=1, noise_fraction=0.0, forced_k=2.0)
    ev = HashEvaluator(scale=2.0, salt=5)
    n = 300
    full = searched(game, config, n, ev, full=True)
    t, r = full.tree, int(full.games.root[0])
    first, nk = int(t.first_child[r]), int(t.num_children[r])
    for k in range(first, first + nk):
        forced = math.sqrt(2.0 * float(t.prior[k]) * (n - 1))
        assert t.visits[k] >= math.floor(forced) - 1
    fast = searched(game, config, n, ev, full=False)
    assert not np.array_equal(full.root_visits(0), fast.root_visits(0))
    # pruning shrinks the non-best children of the full search
    pt = full.policy_target(0)
    plain = full.root_visits(0) / full.root_visits(0).sum()
    best = int(np.argmax(plain))
    assert pt[best] > plain[best]


# ==================================================================== Dirichlet noise
def root_priors(m: BatchedMCTS, g: int = 0) -> np.ndarray:
    t, r = m.tree, int(m.games.root[g])
    first, n = int(t.first_child[r]), int(t.num_children[r])
    return t.prior[first:first + n].copy()


def test_dirichlet_noise():
    game = Game(9, 10, (2, 2))
    ev = HashEvaluator(salt=8)
    logits, _ = ev(game)
    raw = np.array(ref_puct.softmax_priors(logits, game, game.legal_moves()), np.float32)
    config = SearchConfig(noise_fraction=0.25, leaves_per_step=2)

    quiet = searched(game, config, 20, ev, full=False, seed=1)
    np.testing.assert_array_equal(root_priors(quiet), raw)

    a = searched(game, config, 20, ev, full=True, seed=1)
    b = searched(game, config, 20, ev, full=True, seed=1)
    c = searched(game, config, 20, ev, full=True, seed=2)
    pa = root_priors(a)
    assert not np.allclose(pa, raw)
    assert abs(float(pa.astype(np.float64).sum()) - 1.0) < 1e-5
    noise = (pa - 0.75 * raw) / 0.25
    assert np.all(noise > -1e-5)
    np.testing.assert_array_equal(pa, root_priors(b))  # same seed, same noise
    assert not np.array_equal(pa, root_priors(c))
    for name in a.tree._fields:
        assert np.array_equal(getattr(a.tree, name), getattr(b.tree, name)), name
    # noise only at the root: the priors one level down are the raw softmax
    t, r = a.tree, int(a.games.root[0])
    k = int(t.first_child[r]) + int(np.argmax(a.root_visits(0)[game.legal_moves()]))
    child = game.copy()
    child.play(int(t.move[k]))
    first, n = int(t.first_child[k]), int(t.num_children[k])
    want = ref_puct.softmax_priors(ev(child)[0], child, child.sensible_moves())
    np.testing.assert_array_equal(t.prior[first:first + n], np.array(want, np.float32))


def test_dirichlet_noise_statistics():
    """Over many roots the noise has the Dirichlet(alpha) mean 1/n and variance
    (1/n)(1 - 1/n)/(n alpha + 1) (loose bounds)."""
    games, width, alpha = 400, 7, 0.8
    config = SearchConfig(noise_fraction=1.0, noise_alpha=alpha, leaves_per_step=1)
    m = BatchedMCTS(config, games, 6, width, seed=12, max_playouts=1)
    for g in range(games):
        m.set_position(g, Game(6, 7).state)
        m.start_search(g, 1, full=True)
    run_search(m, UniformEvaluator())
    eta = np.array([root_priors(m, g) for g in range(games)], np.float64)
    assert eta.shape == (games, width)
    np.testing.assert_allclose(eta.sum(axis=1), 1.0, atol=1e-5)
    assert np.all(np.abs(eta.mean(axis=0) - 1 / width) < 0.04)
    var = (1 / width) * (1 - 1 / width) / (width * alpha + 1)
    assert 0.7 * var < eta.var() < 1.3 * var


def test_root_temperature_priors():
    game = Game(7, 8)
    ev = HashEvaluator(salt=6)
    raw = ref_puct.softmax_priors(ev(game)[0], game, game.legal_moves())
    for temp in (0.25, 1.0, 3.0):
        m = searched(game, SearchConfig(leaves_per_step=1), 1, ev, root_temp=temp)
        want = np.array(ref_puct.tempered(raw, temp), np.float32)
        np.testing.assert_array_equal(root_priors(m), want)
        assert abs(float(want.astype(np.float64).sum()) - 1) < 1e-5
    hot = searched(game, SearchConfig(), 1, ev, root_temp=100.0)
    assert np.ptp(root_priors(hot)) < np.ptp(np.array(raw)) / 10


# ======================================================================== choose_move
def test_choose_move_temperature_zero():
    rng = np.random.default_rng(0)
    assert choose_move(np.array([0, 3, 9, 2, 9.0]), 0.0, rng) == 2
    assert choose_move(np.array([5, 5, 5.0]), 0, rng) == 0
    assert choose_move(np.array([0, 0, 1.0]), 0, rng) == 2


def test_choose_move_distribution():
    rng = np.random.default_rng(123)
    visits = np.array([0, 10, 100, 1, 0, 5, 0], np.float64)
    draws = np.array([choose_move(visits, 1e6, rng) for _ in range(4000)])
    counts = np.bincount(draws, minlength=len(visits))
    assert counts[visits == 0].sum() == 0
    freq = counts[visits > 0] / len(draws)
    assert np.all(np.abs(freq - 0.25) < 0.04)
    # temperature 1: proportional to visits
    draws = np.array([choose_move(visits, 1.0, rng) for _ in range(4000)])
    counts = np.bincount(draws, minlength=len(visits))
    assert counts[visits == 0].sum() == 0
    np.testing.assert_allclose(counts / len(draws), visits / visits.sum(), atol=0.03)
    # low temperature: the most visited nearly always
    draws = [choose_move(visits, 0.1, rng) for _ in range(200)]
    assert all(d == 2 for d in draws)


def test_choose_move_no_visits():
    with pytest.raises(ValueError):
        choose_move(np.zeros(5), 1.0, np.random.default_rng(0))


# ============================================================================= errors
def test_errors():
    config = SearchConfig(leaves_per_step=2)
    m = BatchedMCTS(config, 2, 6, 7, max_playouts=50)
    with pytest.raises(ValueError):
        m.start_search(0, 10)  # no position yet
    m.set_position(0, Game(6, 7).state)
    with pytest.raises(ValueError):
        m.start_search(0, 51)
    with pytest.raises(ValueError):
        m.start_search(0, 0)
    with pytest.raises(ValueError):
        m.start_search(0, -3)
    with pytest.raises(ValueError):
        m.start_search(0, 10, root_temp=0.0)
    with pytest.raises(ValueError):
        m.set_position(1, Game(7, 6).state)
    with pytest.raises(ValueError):
        m.set_position(1, Game(6, 8).state)
    finished = Game.from_moves(6, 7, None, [0, 1, 0, 1, 0, 1, 0])
    with pytest.raises(ValueError):
        m.set_position(1, finished.state)
    m.start_search(0, 10)
    planes = m.planes_buffer()
    assert planes.shape == (m.max_leaves, c4fast.NUM_PLANES, 6, 7)
    for bad in (planes[:, :, :, :6], planes[:, 1:], planes[:1],
                np.zeros((m.max_leaves, c4fast.NUM_PLANES, 7, 6), np.float32)):
        with pytest.raises(ValueError):
            m.select(bad)
    run_search(m, UniformEvaluator())
    full_col = Game.from_moves(4, 4, None, [0, 0, 0, 0])
    m2 = BatchedMCTS(config, 1, 4, 4, max_playouts=10)
    m2.set_position(0, full_col.state)
    for bad in (0, -1, 4, 99):
        with pytest.raises(c4fast.IllegalMove):
            m2.advance(0, bad)
    with pytest.raises(c4fast.IllegalMove):
        m.advance(0, 7)
    with pytest.raises(ValueError):
        BatchedMCTS(config, 0, 6, 7)
    with pytest.raises(ValueError):
        BatchedMCTS(config, 1, 3, 7)


def test_advance_without_reuse_resets_root():
    config = SearchConfig(tree_reuse=False, leaves_per_step=4)
    m = searched(Game(6, 7), config, 60, HashEvaluator())
    m.advance(0, 3)
    assert m.root_playouts(0) == 0
    r = int(m.games.root[0])
    assert r == m.games.region_start[0] and m.tree.first_child[r] == UNEXPANDED
    assert m.games.next_free[0] == r + 1
    np.testing.assert_array_equal(m.games.positions[0], Game.from_moves(6, 7, None, [3]).state[0])


@pytest.mark.parametrize("reuse", [False, True])
def test_start_search_rejects_finished_game_after_advance(reuse):
    game = Game.from_moves(6, 7, None, [0, 1, 0, 1, 0, 1])  # X wins with column 0
    m = BatchedMCTS(SearchConfig(tree_reuse=reuse, leaves_per_step=1), 1, 6, 7, max_playouts=50)
    m.set_position(0, game.state)
    m.start_search(0, 30, full=False)
    run_search(m, UniformEvaluator())
    m.advance(0, 0)
    assert m.position_result(0) == 1
    with pytest.raises(ValueError):
        m.start_search(0, 40, full=False)


def test_second_start_search_on_the_same_root_keeps_the_priors():
    game = Game.from_moves(9, 9, (0, 4), [4, 3])
    m = BatchedMCTS(SearchConfig(leaves_per_step=2), 1, 9, 9, max_playouts=200, seed=3)
    m.set_position(0, game.state)
    m.start_search(0, 50, full=True, root_temp=2.0)
    run_search(m, HashEvaluator())
    r = int(m.games.root[0])
    f, n = int(m.tree.first_child[r]), int(m.tree.num_children[r])
    before = m.tree.prior[f:f + n].copy()
    m.start_search(0, 120, full=True, root_temp=2.0)  # continue: no second temperature/noise
    run_search(m, HashEvaluator())
    np.testing.assert_array_equal(m.tree.prior[f:f + n], before)
    assert m.root_playouts(0) == 120


def test_policy_logits_outside_legal_cells_are_never_used():
    """Only the landing cell of each legal column is read: garbage elsewhere changes nothing."""

    class Noisy:
        def __init__(self, garbage):
            self.garbage = garbage
            self.inner = HashEvaluator()

        def evaluate(self, planes, positions):
            logits, wdl = self.inner.evaluate(planes, positions)
            logits = logits.copy()
            playable = planes[:, 2] > 0  # plane 2: landing cells of legal columns
            if self.garbage:
                logits[~playable] = 1e6
            else:
                logits[~playable] = -1e6
            return logits, wdl

    game = Game.from_moves(9, 10, (0, 4), [4, 4, 3, 5])
    out = []
    for garbage in (False, True):
        m = BatchedMCTS(SearchConfig(leaves_per_step=4), 1, 9, 10, max_playouts=300, seed=1)
        m.set_position(0, game.state)
        m.start_search(0, 300, full=True)
        run_search(m, Noisy(garbage))
        out.append((m.root_visits(0), m.root_wdl(0)))
    np.testing.assert_array_equal(out[0][0], out[1][0])
    np.testing.assert_array_equal(out[0][1], out[1][1])
