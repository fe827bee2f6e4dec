"""The exact solver (c4fast.players.solver) against Pascal Pons's benchmark scores, a plain
brute-force negamax on small boards with forbidden cells, and its command lines."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from c4fast import Game
from c4fast.players import solver as sv
from selfplay.evaluation import solverbench

REPO_ROOT = Path(__file__).resolve().parents[1]
PONS_DIR = Path(__file__).resolve().parents[1] / "data" / "pons-connect4"


def pons_entries(name: str) -> list[tuple[str, int]]:
    path = PONS_DIR / name
    if not path.is_file():
        pytest.skip(f"Pons benchmark file not found: {path}")
    return sv.read_pons_file(path)


@pytest.fixture(scope="module")
def solver() -> sv.Solver:
    return sv.Solver()


@pytest.fixture(scope="module")
def multi() -> sv.Solver:
    return sv.Solver(20, engine="multi-word")


def brute_score(g: Game, memo: dict) -> int:
    """Plain negamax without pruning (memoised on the Zobrist hash): the reference."""
    k = g.hash
    if k in memo:
        return memo[k]
    cells = g.height * g.width - (g.forbidden is not None)
    best = -(10**9)
    for c in g.legal_moves():
        g2 = g.copy()
        g2.play(c)
        if g2.result is None:
            v = -brute_score(g2, memo)
        elif g2.result == 0:
            v = 0
        else:
            v = (cells + 1 - g.ply) // 2
        best = max(best, v)
    memo[k] = best
    return best


# ------------------------------------------------------------------------ Pons files
@pytest.mark.parametrize("name", ["Test_L3_R1", "Test_L2_R1"])
def test_every_position_of_easy_files(solver, name):
    entries = pons_entries(name)
    assert len(entries) == 1000
    wrong = [(m, s, solver.solve(sv.pons_game(m))) for m, s in entries]
    wrong = [w for w in wrong if w[1] != w[2]]
    assert not wrong, f"{len(wrong)} wrong scores, first: {wrong[:3]}"


def test_sample_of_middle_medium(solver):
    entries = pons_entries("Test_L2_R2")
    sample = random.Random(20240601).sample(entries, 200)
    for moves, score in sample:
        assert solver.solve(sv.pons_game(moves)) == score, moves


def test_multi_word_engine_is_exact_too(multi):
    """The three-word engine (alpha-beta player, large boards) on the same positions."""
    for name, step in (("Test_L3_R1", 4), ("Test_L2_R1", 8)):
        for moves, score in pons_entries(name)[::step]:
            assert multi.solve(sv.pons_game(moves)) == score, (name, moves)
    for moves, score in random.Random(7).sample(pons_entries("Test_L2_R2"), 5):
        assert multi.solve(sv.pons_game(moves)) == score, moves


def test_batch_benchmark_kernel(solver):
    rec = sv.bench_file(solver, PONS_DIR / "Test_L3_R1", limit=200) if PONS_DIR.is_dir() else None
    if rec is None:
        pytest.skip("no Pons data")
    assert rec["positions"] == 200 and rec["correct"] == 200
    assert rec["mean_nodes"] > 0 and rec["positions_per_s"] > 0


# ------------------------------------------------------------------------ best moves
def test_best_moves_agree_with_move_scores(solver):
    entries = pons_entries("Test_L2_R1")[:: 1000 // 30]
    entries += random.Random(3).sample(pons_entries("Test_L2_R2"), 4)
    for moves, score in entries:
        g = sv.pons_game(moves)
        best = solver.best_moves(g)
        scores = solver.move_scores(g)
        assert set(best) <= set(g.legal_moves())
        assert max(scores.values()) == score
        assert best == sorted(c for c, v in scores.items() if v == score)
        # the column whose negated child score equals the root score is among them
        for c in best:
            g2 = g.copy()
            g2.play(c)
            if g2.result is None:
                assert -solver.solve(g2) == score


def test_module_level_helpers():
    g = sv.pons_game("445566")
    assert sv.solve(g) == (43 - 6) // 2
    assert sv.best_moves(g) == [2, 6]


# ------------------------------------------------------------------- hand-made cases
@pytest.mark.parametrize(
    "moves, wins",
    [
        ("445566", [2, 6]),  # X on 4,5,6 of the bottom row: 3 or 7 wins at once
        ("121314", [0]),  # X stacked three in column 1
        ("1212121", None),  # game over: refused (checked below)
    ],
)
def test_immediate_wins(solver, moves, wins):
    if wins is None:
        g = Game.from_moves(6, 7, None, [int(ch) - 1 for ch in moves])
        assert g.result == 1
        with pytest.raises(ValueError, match="over"):
            solver.solve(g)
        return
    g = sv.pons_game(moves)
    n = len(moves)
    assert solver.solve(g) == (43 - n) // 2
    assert solver.best_moves(g) == wins


def test_pons_worked_examples(solver):
    assert solver.solve(sv.pons_game("4455")) == 18
    assert solver.solve(sv.pons_game("44455554221")) == -15


def test_must_block(solver):
    # 5x6 (an early 6x7 position takes a minute to solve): X on columns 1, 2, 3 of the
    # bottom row, O on 0 and 5; O to move must block column 4
    g = Game.from_moves(5, 6, None, [1, 0, 2, 5, 3])
    assert g.to_move == 2 and g.sensible_moves() == [4]
    assert solver.best_moves(g) == [4]
    assert solver.solve(g) > -((30 - 5) // 2)
    scores = solver.move_scores(g)
    assert all(scores[c] == -((30 - 5) // 2) for c in scores if c != 4)
    # 6x7, X: 2,3,4 on the bottom row, O: 1 and 7; O to move must block column 5
    g = sv.pons_game("21374")
    assert g.sensible_moves() == [4]
    for c in g.legal_moves():
        if c != 4:
            g2 = g.copy()
            g2.play(c)
            assert -solver.solve(g2) == -((42 - 5) // 2)  # X wins at once
    # X: 2,3,4 with 1 and 5 open, O: 7,7: a double threat, every O move loses at once
    g = sv.pons_game("27374")
    assert solver.solve(g) == -((42 - 5) // 2)
    assert solver.best_moves(g) == g.legal_moves()
    assert set(solver.move_scores(g).values()) == {-((42 - 5) // 2)}


def test_single_threat_positions_are_blocked(solver):
    """Over Pons positions where the opponent threatens exactly one immediate win and
    the side to move cannot win: the block is optimal, and the only optimal move
    unless every move loses at the opponent's next stone."""
    checked = 0
    for moves, score in pons_entries("Test_L2_R1") + pons_entries("Test_L3_R1"):
        g = sv.pons_game(moves)
        me, opp = g.to_move, 3 - g.to_move
        land = {c: g.board()[:, c].tolist().index(0) for c in g.legal_moves()}
        if any((land[c], c) in g.winning_cells(me) for c in land):
            continue
        threats = [c for c in land if (land[c], c) in g.winning_cells(opp)]
        if len(threats) != 1:
            continue
        best = solver.best_moves(g)
        assert threats[0] in best, moves
        if score > -((42 - g.ply) // 2):
            assert best == threats, moves
        checked += 1
    assert checked > 50


# ------------------------------------------------------ other sizes, forbidden cells
def _random_small_positions(n: int, seed: int, max_empty: int):
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        h, w = int(rng.integers(4, 7)), int(rng.integers(4, 7))
        f = (int(rng.integers(h)), int(rng.integers(w))) if rng.random() < 0.7 else None
        g = Game(h, w, f)
        cells = h * w - (f is not None)
        target = int(rng.integers(max(0, cells - max_empty), cells - 1))
        while g.result is None and g.ply < target:
            g.play(int(rng.choice(g.legal_moves())))
        if g.result is None:
            out.append(g)
    return out


def test_small_boards_against_brute_force(solver, multi):
    """Generalised scores (cells instead of 42), forbidden cells, both engines."""
    for g in _random_small_positions(60, seed=11, max_empty=10):
        ref = brute_score(g, {})
        assert solver.solve(g) == ref, repr(g)
        assert multi.solve(g) == ref, repr(g)
        best = solver.best_moves(g)
        assert best == multi.best_moves(g), repr(g)
        scores = solver.move_scores(g)
        assert best == [c for c in sorted(scores) if scores[c] == ref], repr(g)


def _sign(v: int) -> int:
    return (v > 0) - (v < 0)


def test_outcome_moves_against_brute_force(solver, multi):
    """Columns keeping the result (AlphaZero.jl's criterion), against plain negamax scores."""
    kinds = set()
    for g in _random_small_positions(60, seed=12, max_empty=10):
        memo: dict = {}
        ref = {}
        cells = g.height * g.width - (g.forbidden is not None)
        for c in g.legal_moves():
            g2 = g.copy()
            g2.play(c)
            if g2.result is None:
                ref[c] = -brute_score(g2, memo)
            else:
                ref[c] = 0 if g2.result == 0 else (cells + 1 - g.ply) // 2
        want = max(_sign(v) for v in ref.values())
        expected = sorted(c for c, v in ref.items() if _sign(v) == want)
        kinds.add(want)
        assert solver.outcome_moves(g) == expected, repr(g)
        assert multi.outcome_moves(g) == expected, repr(g)
        assert set(solver.best_moves(g)) <= set(expected), repr(g)
    assert kinds == {-1, 0, 1}  # won, drawn and lost positions were all covered


def test_large_board_endgame_uses_multi_word_engine(solver):
    """A 9x11 board with a forbidden cell, filled at random to a few empty cells."""
    rng = np.random.default_rng(5)
    done = 0
    while done < 8:
        g = Game(9, 11, (int(rng.integers(9)), int(rng.integers(11))))
        # random moves that do not complete a four (random games end far too early)
        while g.ply < g.height * g.width - 1 - 8:
            wins = g.winning_cells(g.to_move)
            board = g.board()
            quiet = [c for c in g.legal_moves() if (board[:, c].tolist().index(0), c) not in wins]
            if not quiet:
                break
            g.play(int(rng.choice(quiet)))
        if g.ply < g.height * g.width - 1 - 8 or g.result is not None:
            continue
        assert not sv.fits_one_word(g.height, g.width)
        assert solver.solve(g) == brute_score(g, {}), repr(g)
        done += 1


def test_engine_option_errors():
    with pytest.raises(ValueError, match="engine"):
        sv.Solver(engine="fast")
    with pytest.raises(ValueError, match="tt_log2"):
        sv.Solver(tt_log2=3)
    with pytest.raises(ValueError, match="one-word"):
        sv.Solver(16, engine="one-word").solve(Game(9, 9))


def test_table_is_cleared_between_setups():
    """One-word keys do not encode the setup: switching boards must not reuse entries."""
    s = sv.Solver(16)
    for g in _random_small_positions(30, seed=2, max_empty=9):
        assert s.solve(g) == brute_score(g, {}), repr(g)


# ---------------------------------------------------------------------- command lines
def test_cli_benchmark_json(capsys):
    if not PONS_DIR.is_dir():
        pytest.skip("no Pons data")
    rc = sv.main(["--file", str(PONS_DIR / "Test_L3_R1"), "--file",
                  str(PONS_DIR / "Test_L2_R1"), "--limit", "30", "--tt-log2", "18"])
    assert rc == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [x["file"] for x in lines] == ["Test_L3_R1", "Test_L2_R1"]
    for x in lines:
        assert x["positions"] == 30 and x["correct"] == 30
        assert {"positions_per_s", "mean_nodes"} <= set(x)


def test_cli_errors(tmp_path, capsys):
    assert sv.main(["--file", str(tmp_path / "missing")]) == 2
    assert "no such file" in capsys.readouterr().err
    bad = tmp_path / "bad"
    bad.write_text("4455 18\n44x5 3\n")
    assert sv.main(["--file", str(bad)]) == 2
    assert "bad:2" in capsys.readouterr().err
    over = tmp_path / "over"
    over.write_text("1212121 0\n")
    assert sv.main(["--file", str(over)]) == 2
    assert "over" in capsys.readouterr().err


def test_cli_module_entry_point():
    out = subprocess.run([sys.executable, "-m", "c4fast.players.solver", "--help"],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and "--file" in out.stdout and "--limit" in out.stdout
    out = subprocess.run([sys.executable, "-m", "c4fast.players.solver", "--file", "/nonexistent"],
                         cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "no such file" in out.stderr


def test_solverbench(tmp_path, capsys):
    if not PONS_DIR.is_dir():
        pytest.skip("no Pons data")
    cache = tmp_path / "cache.json"
    files = [str(PONS_DIR / "Test_L3_R1"), str(PONS_DIR / "Test_L2_R1")]
    no_table = ["--solved-table", str(tmp_path / "none.tsv")]  # exercise the cache, not the table
    rc = solverbench.main(["--player", "solver", "--files", *files, "--limit", "15",
                           "--cache", str(cache), "--tt-log2", "18", *no_table])
    assert rc == 0
    recs = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [r["file"] for r in recs] == ["Test_L3_R1", "Test_L2_R1", "all"]
    assert all(r["fraction"] == 1.0 and r["outcome_fraction"] == 1.0 for r in recs)
    cached = json.loads(cache.read_text())
    assert len(cached["best_moves"]) == 30 and len(cached["outcome_moves"]) == 30
    for moves, best in cached["best_moves"].items():  # the weaker criterion admits more
        assert set(best) <= set(cached["outcome_moves"][moves])
    # random is worse than perfect; the cache gives the same answer
    rc = solverbench.main(["--player", "random", "--files", *files, "--limit", "15",
                           "--cache", str(cache), *no_table])
    assert rc == 0
    recs = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert recs[-1]["positions"] == 30 and recs[-1]["fraction"] < 1.0
    assert all(r["fraction"] <= r["outcome_fraction"] for r in recs)
    assert recs[-1]["optimal"] == sum(r["optimal"] for r in recs[:-1])
    assert recs[-1]["outcome_optimal"] == sum(r["outcome_optimal"] for r in recs[:-1])


def test_solverbench_reads_a_version_1_cache(tmp_path, capsys):
    """A cache from before the outcome criterion still serves its optimal moves."""
    if not PONS_DIR.is_dir():
        pytest.skip("no Pons data")
    f = PONS_DIR / "Test_L3_R1"
    moves = [m for m, _ in sv.read_pons_file(f, 4)]
    # deliberately wrong entries (no column is optimal) prove the file is read
    cache = tmp_path / "v1.json"
    cache.write_text(json.dumps({"version": 1, "best_moves": {m: [] for m in moves}}))
    assert solverbench.main(["--player", "solver", "--files", str(f), "--limit", "4",
                             "--cache", str(cache), "--solved-table", str(tmp_path / "none.tsv")]) == 0
    rec = json.loads(capsys.readouterr().out.splitlines()[0])
    assert rec["optimal"] == 0 and rec["outcome_optimal"] == 4
    saved = json.loads(cache.read_text())
    assert saved["version"] == solverbench.CACHE_VERSION and len(saved["outcome_moves"]) == 4


def test_solved_table_export_and_use(tmp_path, capsys):
    """--export-solved writes the solver's move sets; a later run reads them before solving."""
    if not PONS_DIR.is_dir():
        pytest.skip("no Pons data")
    f = PONS_DIR / "Test_L2_R1"
    table = tmp_path / "solved.tsv"
    assert solverbench.main(["--export-solved", str(table), "--files", str(f), "--limit", "6",
                             "--no-cache"]) == 0
    recs = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert recs[0]["file"] == "Test_L2_R1" and recs[-1]["positions"] == 6
    got = solverbench.read_solved_table(table)
    solver = sv.Solver(18)
    for moves, _ in sv.read_pons_file(f, 6):
        g = sv.pons_game(moves)
        assert got["best_moves"][moves] == solver.best_moves(g)
        assert got["outcome_moves"][moves] == solver.outcome_moves(g)
    # a table that calls every legal column optimal: the random player then scores 100 %
    lines = [ln for ln in table.read_text().splitlines() if not ln.startswith("#")]
    table.write_text("".join(f"{ln.split(chr(9))[0]}\t1234567\t1234567\n" for ln in lines))
    args = ["--player", "random", "--files", str(f), "--limit", "6", "--solved-table", str(table)]
    assert solverbench.main([*args, "--cache", str(tmp_path / "c.json")]) == 0
    rec = json.loads(capsys.readouterr().out.splitlines()[0])
    assert rec["optimal"] == rec["outcome_optimal"] == 6
    assert not (tmp_path / "c.json").exists()  # nothing had to be solved
    # a malformed table is a clear error before any work
    for bad in ("4455\t8\t8\n", "4455\t37\n", "4455\t37\t1\n", "44x5\t1\t1\n"):
        table.write_text(bad)
        assert solverbench.main([*args, "--no-cache"]) == 0  # --no-cache skips the table
        capsys.readouterr()
        assert solverbench.main([*args, "--cache", str(tmp_path / "c.json")]) == 2
        assert "line 1" in capsys.readouterr().err


def test_shipped_solved_table():
    """The repository's table covers the five default files and agrees with the solver."""
    if not solverbench.SOLVED_TABLE.is_file():
        pytest.skip("no solved-move table")
    table = solverbench.read_solved_table(solverbench.SOLVED_TABLE)
    solver = sv.Solver(20)
    rng = random.Random(28)
    for name in solverbench.DEFAULT_FILES:
        entries = pons_entries(name)
        for moves, score in entries:
            best, kept = table["best_moves"][moves], table["outcome_moves"][moves]
            legal = sv.pons_game(moves).legal_moves()
            assert set(best) <= set(kept) <= set(legal) and best, moves
            if score < 0:
                assert kept == sorted(legal), moves  # lost: every column keeps the result
        for moves, _ in rng.sample(entries, 4 if name.startswith("Test_L1") else 8):
            g = sv.pons_game(moves)
            assert table["best_moves"][moves] == solver.best_moves(g), moves
            assert table["outcome_moves"][moves] == solver.outcome_moves(g), moves


def test_solverbench_errors(tmp_path, capsys):
    assert solverbench.main(["--player", "nonsense", "--no-cache"]) == 2
    assert "valid forms" in capsys.readouterr().err
    assert solverbench.main(["--model", "x.pt", "--no-cache"]) == 2
    assert "x.pt" in capsys.readouterr().err
    assert solverbench.main(["--player", "random", "--files", str(tmp_path / "nope"),
                             "--no-cache"]) == 2
    assert "no such file" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        solverbench.main([])  # --player or --model is required


def test_solverbench_measures_a_network_with_and_without_search(tmp_path, capsys):
    import torch

    from nets.checkpoint import save_checkpoint
    from nets.config import get_preset
    from nets.model import build_model

    torch.manual_seed(0)
    path = tmp_path / "model_00000001.pt"
    save_checkpoint(path, build_model(get_preset("tiny")), get_preset("tiny"), 1)
    if not PONS_DIR.is_dir():
        pytest.skip("Pons data not available")
    files = [str(PONS_DIR / "Test_L3_R1")]
    rc = solverbench.main(["--model", str(path), "--playouts", "30", "--files", *files, "--limit", "10",
                           "--cache", str(tmp_path / "c.json")])
    assert rc == 0
    recs = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    alls = [r for r in recs if r["file"] == "all"]
    assert [r["player"] for r in alls] == ["net:model_00000001.pt:policy", "net:model_00000001.pt:30"]
    assert all(r["positions"] == 10 and 0.0 <= r["fraction"] <= 1.0 for r in alls)
