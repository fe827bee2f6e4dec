"""Gumbel root search (``SearchConfig.root_search = "gumbel"``, ``c4fast.gumbel``).

* Sequential halving against the plain-Python schedule of ``ref_gumbel`` (hypothesis over
  m, the budget, the board width, leaves per step and games searched together): with a toy
  evaluator whose value depends only on the root move, every root child's q is a known
  constant, so the schedule (visits per column, survivors, the move, the completed-Q
  target) is exact even under virtual loss.
* The whole search against ``ref_gumbel.search`` (``ref_puct`` below the root), tree for
  tree, one leaf per step, fresh and reused roots; the completed-Q target against the
  reference formula with the root's own value taken from the evaluator.
* A forced win is played; Gumbel draws are Gumbel; the self-play worker records weight-1
  completed-Q targets and plays the survivor; the flags reach the loop.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ref_gumbel
import ref_puct
from c4fast import Game
from c4fast.config import SearchConfig
from c4fast.evaluators import RolloutEvaluator, UniformEvaluator
from c4fast.gumbel import gumbel_draw, num_phases
from c4fast.mcts import BatchedMCTS, run_search
from c4fast.players.endgame import EndgameSolver
from c4fast.rollout import make_rng
from test_mcts import HashEvaluator, compare_trees, random_midgame

HYP = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))


def gumbel_config(**kw) -> SearchConfig:
    return SearchConfig(root_search="gumbel", **{"fast_playouts": 1, **kw})


# ================================================================ schedule, constant q
def run_toy(m: BatchedMCTS, root_value, move_value, root_logits) -> None:
    """Search every active game with a toy evaluator: the root's own value root_value[g],
    every other leaf worth move_value[g][a] for the side to move at the root (a the root
    move above it), flat logits below the root and root_logits[g] per column at it."""
    h, w = m.height, m.width
    planes = m.planes_buffer()
    while not m.all_done():
        n = m.select(planes)
        logits = np.zeros((max(n, 1), h, w), np.float32)
        wdl = np.zeros((max(n, 1), 3), np.float32)
        for k in range(n):
            g, depth = int(m.leaves.game[k]), int(m.leaves.depth[k])
            if depth == 1:
                logits[k] = np.broadcast_to(root_logits[g], (h, w))
                v = root_value[g]
            else:
                a = int(m.tree.move[m.leaves.path[k, 1]])
                v = move_value[g][a] if (depth - 1) % 2 == 0 else -move_value[g][a]
            wdl[k] = ((1 + v) / 2, 0.0, (1 - v) / 2)
        m.expand_and_backup(n, logits, wdl)


GRID = [i / 8 for i in range(-8, 9)]  # values whose sums and means are exact


@settings(max_examples=70, **HYP)
@given(data=st.data(), width=st.integers(4, 12), m_actions=st.integers(1, 16),
       playouts=st.integers(1, 160), lps=st.sampled_from([1, 3, 8]), games=st.integers(1, 3),
       c=st.sampled_from([(50.0, 1.0), (0.0, 0.1), (10.0, 0.5)]), seed=st.integers(0, 2**16))
def test_sequential_halving_matches_the_reference_schedule(data, width, m_actions, playouts, lps, games, c, seed):
    height = 8
    config = gumbel_config(gumbel_actions=m_actions, gumbel_c_visit=c[0], gumbel_c_scale=c[1],
                           leaves_per_step=lps, sensible=False, full_playouts=max(playouts, 2))
    vals = st.sampled_from(GRID)
    root_value = [data.draw(vals) for _ in range(games)]
    move_value = [data.draw(st.lists(vals, min_size=width, max_size=width)) for _ in range(games)]
    root_logits = [np.array(data.draw(st.lists(st.floats(-3, 3, width=32), min_size=width, max_size=width)),
                            np.float32) for _ in range(games)]
    m = BatchedMCTS(config, games, height, width, seed=seed)
    for g in range(games):
        m.set_position(g, Game(height, width).state)
        m.start_search(g, playouts)
    run_toy(m, root_value, move_value, root_logits)

    game = Game(height, width)
    cols = list(range(width))
    for g in range(games):
        # no node below the root ended the game (else q would not be the constant)
        lo, hi = int(m.games.region_start[g]), int(m.games.next_free[g])
        assert (m.tree.terminal[lo:hi] == 0).all()
        priors = ref_puct.softmax_priors(np.broadcast_to(root_logits[g], (height, width)), game, cols)
        gum, alive = m.root_gumbel(g)
        base = [float(gum[i]) + ref_gumbel.logit(priors[i]) for i in cols]
        counts = [0] * width
        q = [(1 + move_value[g][i]) / 2 for i in cols]
        v_root = (1 + root_value[g]) / 2

        def visit(i):
            counts[i] += 1

        def final():
            return ref_gumbel.scores(gum, priors, counts, q, v_root, c[0], c[1])

        ref_alive, phases, new = ref_gumbel.sequential_halving(base, playouts - 1, m_actions, visit, final)
        np.testing.assert_array_equal(m.root_visits(g), counts, err_msg=f"phases {phases}")
        assert sorted(np.flatnonzero(alive)) == sorted(ref_alive)
        assert m.gumbel_move(g) == ref_gumbel.choice(ref_alive, new, final())
        assert m.root_playouts(g) == playouts
        np.testing.assert_allclose(
            m.policy_target(g), ref_gumbel.improved_policy(priors, counts, q, v_root, c[0], c[1]),
            rtol=1e-9, atol=1e-12)


def test_schedule_visits_are_mctx_sequence():
    """16 actions, 200 simulations: mctx's table gives 3, 6, 12 and then 25 + 6 visits per
    phase (48 + 48 + 48 + 50 + 6); the halving keeps 8, 4, 2."""
    counts = [0] * 16
    base = [-i for i in range(16)]  # action 0 best by g + logit
    q = [0.5] * 16

    def visit(i):
        counts[i] += 1

    alive, phases, new = ref_gumbel.sequential_halving(
        base, 200, 16, visit, lambda: ref_gumbel.scores([0] * 16, [1 / 16] * 16, counts, q, 0.5, 50, 1))
    assert [(len(a), per) for a, per in phases] == [(16, 3), (8, 6), (4, 12), (2, 25), (2, 25)]
    assert sorted(counts, reverse=True) == [3 + 6 + 12 + 25 + 3] * 2 + [3 + 6 + 12] * 2 + [3 + 6] * 4 + [3] * 8
    assert num_phases(16) == 4 and num_phases(9) == 4 and num_phases(2) == 1 and num_phases(1) == 0


# ================================================================ the whole search
CASES = [
    ("empty-6x7", lambda: Game(6, 7), {}, 200, {}),
    ("saiblo-9x10", lambda: Game(9, 10, (0, 4)), {"gumbel_actions": 4}, 150, {"salt": 1}),
    ("must-block", lambda: Game.from_moves(6, 7, None, [3, 3, 4, 4, 2]), {}, 120, {}),
    ("sensible-off", lambda: Game.from_moves(6, 7, None, [3, 3, 4, 4, 2]), {"sensible": False}, 120, {}),
    ("midgame-12x12", lambda: random_midgame(3, 12, 12, (5, 5), 30), {"gumbel_c_scale": 0.1}, 180, {"salt": 2}),
    ("nearly-full-4x4", lambda: random_midgame(5, 4, 4, (2, 1), 10), {"sensible": False}, 80, {}),
    ("one-action", lambda: Game(7, 9, (3, 3)), {"gumbel_actions": 1}, 60, {}),
    ("one-playout", lambda: Game(7, 9, (3, 3)), {}, 1, {}),
    ("budget-below-m", lambda: Game(9, 12), {}, 6, {"salt": 4}),
]


def check_against_reference(m, g, game, ref, config):
    assert compare_trees(m, g, ref.root) == int(m.games.next_free[g] - m.games.region_start[g])
    np.testing.assert_array_equal(m.root_visits(g), ref.visits_by_column(game.width))
    gum, alive = m.root_gumbel(g)
    assert sorted(np.flatnonzero(alive)) == sorted(ref.cols[i] for i in ref.alive)
    assert m.gumbel_move(g) == ref.move
    np.testing.assert_allclose(m.policy_target(g), ref.policy_by_column(game.width), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_search_matches_reference(case):
    _, make, changes, playouts, ev_kwargs = case
    game = make()
    config = gumbel_config(leaves_per_step=1, full_playouts=max(playouts, 2), **changes)
    ev = HashEvaluator(**ev_kwargs)
    m = BatchedMCTS(config, 1, game.height, game.width, seed=7)
    m.set_position(0, game.state)
    m.start_search(0, playouts)
    run_search(m, ev)
    ref = ref_gumbel.search(game, ev, playouts, m.root_gumbel(0)[0], m=config.gumbel_actions,
                            c_visit=config.gumbel_c_visit, c_scale=config.gumbel_c_scale,
                            c_puct=config.c_puct, fpu_reduction=config.fpu_reduction, sensible=config.sensible)
    check_against_reference(m, 0, game, ref, config)


@settings(max_examples=25, **HYP)
@given(seed=st.integers(0, 10_000), plies=st.integers(0, 20), m_actions=st.integers(1, 16),
       playouts=st.integers(1, 120), sensible=st.booleans(), size=st.sampled_from([(6, 7), (9, 10), (5, 12)]))
def test_search_matches_reference_hypothesis(seed, plies, m_actions, playouts, sensible, size):
    h, w = size
    game = random_midgame(seed, h, w, None, plies)
    config = gumbel_config(leaves_per_step=1, full_playouts=max(playouts, 2), gumbel_actions=m_actions,
                           sensible=sensible)
    ev = HashEvaluator(salt=seed % 5)
    m = BatchedMCTS(config, 1, h, w, seed=seed)
    m.set_position(0, game.state)
    m.start_search(0, playouts)
    run_search(m, ev)
    ref = ref_gumbel.search(game, ev, playouts, m.root_gumbel(0)[0], m=m_actions, sensible=sensible)
    check_against_reference(m, 0, game, ref, config)


def test_reused_root_continues_with_its_own_value_and_a_new_schedule():
    """advance() keeps the played child's subtree; the next Gumbel search spreads only its
    new visits, and v_mix uses the new root's own evaluation (recovered from the tree)."""
    game = Game(7, 8, (2, 5))
    config = gumbel_config(leaves_per_step=1, full_playouts=300)
    ev = HashEvaluator(salt=9)
    m = BatchedMCTS(config, 1, 7, 8, seed=3)
    m.set_position(0, game.state)
    m.start_search(0, 150)
    run_search(m, ev)
    ref = ref_gumbel.search(game, ev, 150, m.root_gumbel(0)[0])
    col = m.gumbel_move(0)
    assert col == ref.move
    kid = next(k for k in ref.root.children if k.move == col)
    before = kid.visits
    assert before > 1
    m.advance(0, col)
    game.play(col)
    m.start_search(0, 260)
    run_search(m, ev)
    ref2 = ref_gumbel.search(game, ev, 260, m.root_gumbel(0)[0], root=kid)
    check_against_reference(m, 0, game, ref2, config)
    assert sum(ref2.new) == 260 - before  # the schedule spread only the new visits


def test_completed_q_target_formula():
    """The target on a hand-checked case: visited children keep q, unvisited ones take
    v_mix, then softmax(logit + (c_visit + max N) * c_scale * q)."""
    priors = [0.5, 0.3, 0.2]
    visits = [3, 1, 0]
    qs = [0.75, 0.25, 0.0]
    v = 0.4
    vmix = (v + 4 * (0.5 * 0.75 + 0.3 * 0.25) / 0.8) / 5
    cq = ref_gumbel.completed_q(visits, qs, priors, v)
    assert cq == pytest.approx([0.75, 0.25, vmix])
    z = np.log(priors) + (50 + 3) * 1.0 * np.array(cq)
    np.testing.assert_allclose(ref_gumbel.improved_policy(priors, visits, qs, v, 50, 1.0),
                               np.exp(z) / np.exp(z).sum())


# ================================================================ play and sampling
def solved_wins(game: Game) -> set[int]:
    res = EndgameSolver(tt_log2=16).solve(game, nodes=1_000_000)
    assert res is not None
    return {c for c, v in res.proven.items() if v == "win"}


@pytest.mark.parametrize("moves,size,lps", [
    ([3, 3, 4, 4], (6, 7), 8),  # 2 or 5 makes an open three on the bottom row: a win in 3
    ([4, 3, 1, 2, 2, 2, 3, 0], (5, 5), 1),  # the solver: only 1 wins
    ([3, 1, 0, 3, 1, 2, 1, 2], (5, 5), 8),  # 1 or 2
    ([2, 4, 2, 3, 3, 4], (5, 5), 3),  # only 2
])
def test_plays_a_forced_win(moves, size, lps):
    game = Game.from_moves(*size, None, moves)
    wins = {2, 5} if size == (6, 7) else solved_wins(game)
    assert wins and set(wins) != set(game.legal_moves())
    config = gumbel_config(leaves_per_step=lps, full_playouts=800)
    for seed in range(2):
        m = BatchedMCTS(config, 1, *size, seed=seed)
        m.set_position(0, game.state)
        m.start_search(0, 800)
        run_search(m, RolloutEvaluator(rollouts=4, seed=seed, sensible=True))
        assert m.gumbel_move(0) in wins


def test_gumbel_draws_follow_the_gumbel_distribution():
    rng = make_rng(12345)
    x = np.array([gumbel_draw(rng) for _ in range(40_000)])
    assert x.mean() == pytest.approx(0.5772156649, abs=0.02)  # Euler-Mascheroni
    assert x.var() == pytest.approx(math.pi**2 / 6, rel=0.03)
    for t in (-1.0, 0.0, 1.0, 3.0):
        assert (x <= t).mean() == pytest.approx(math.exp(-math.exp(-t)), abs=0.01)


def test_config_checks():
    with pytest.raises(ValueError, match="root_search"):
        SearchConfig(root_search="alphazero")
    for field, bad in (("gumbel_actions", 0), ("gumbel_c_visit", -1.0), ("gumbel_c_scale", math.nan)):
        with pytest.raises(ValueError, match=field):
            SearchConfig(**{field: bad})
    assert SearchConfig().root_search == "puct" and not SearchConfig().gumbel_params().enabled
    m = BatchedMCTS(SearchConfig(), 1, 6, 7)
    with pytest.raises(ValueError, match="not a Gumbel search"):
        m.gumbel_move(0)
    m = BatchedMCTS(gumbel_config(), 1, 6, 7)
    m.set_position(0, Game(6, 7).state)
    with pytest.raises(ValueError, match="not been searched"):
        m.gumbel_move(0)


def test_worker_records_weight_one_completed_q_targets_and_plays_the_survivor():
    from selfplay.generation.config import SelfPlayConfig
    from selfplay.generation.worker import SelfPlayEngine

    search = gumbel_config(full_playouts=24, fast_playouts=4, full_probability=0.0, leaves_per_step=4)
    eng = SelfPlayEngine(UniformEvaluator(), search, SelfPlayConfig(forbidden_cell=False, opening_max=0),
                         6, 7, num_games=3, seed=5)
    games = []
    eng.play(3, lambda record, samples: games.append((record, samples)))
    assert len(games) == 3
    for record, samples in games:
        assert len(samples) == record["num_moves"]
        for smp in samples:
            assert smp["policy_weight"] == 1.0
            p = smp["policy"]
            assert p.sum() == pytest.approx(1.0)
            # every sensible column keeps mass (3 child visits would leave most at 0)
            g = Game.from_moves(6, 7, None, list(record["moves"][:smp["ply"]]))
            cols = g.sensible_moves()
            assert all(p[:, c].sum() > 0 for c in cols)
            assert np.count_nonzero(p) == len(cols)


def test_loop_help_lists_the_gumbel_flags():
    import argparse

    from c4fast.cli import add_config_arguments
    from selfplay.generation.loop import LoopConfig

    parser = argparse.ArgumentParser()
    add_config_arguments(parser, LoopConfig)
    text = parser.format_help()
    for flag in ("--selfplay.root-search", "--selfplay.gumbel-actions", "--selfplay.gumbel-c-visit",
                 "--selfplay.gumbel-c-scale"):
        assert flag in text
