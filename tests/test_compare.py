"""Tests of selfplay.evaluation.compare: paired differences of two players against one opponent."""

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from selfplay.evaluation.arena import summarize
from selfplay.evaluation.compare import compare, main, sign_test

REPO = Path(__file__).resolve().parents[1]
OPP = "alphabeta:0.2"


def pair_games(player, pair, points_first, points_second, board=(9, 10, [3, 4], [])):
    """The two games of `pair`: `player` moves first in the first, second in the other;
    its points in each (1, 0.5, 0) set the results."""
    h, w, f, opening = board
    res = {1.0: (1, 2), 0.5: (0, 0), 0.0: (2, 1)}
    common = {"height": h, "width": w, "forbidden": f, "moves": list(opening) + [0], "opening": len(opening), "pair": pair}
    return [dict(common, first=player, second=OPP, result=res[points_first][0]),
            dict(common, first=OPP, second=player, result=res[points_second][1])]


def match(player, points, boards=None):
    recs = []
    for k, (p1, p2) in enumerate(points):
        recs += pair_games(player, k, p1, p2, *([boards[k]] if boards else []))
    return recs


def test_golden_values():
    a = match("A", [(1, 1), (1, 0), (1, 0.5), (0, 0)])        # pair scores 1, .5, .75, 0
    b = match("B", [(1, 0), (0.5, 0.5), (0, 0.5), (0, 0)])    # .5, .5, .25, 0
    c = compare(a, b)
    assert (c.a, c.b, c.opponent, c.pairs, c.only_a, c.only_b) == ("A", "B", OPP, 4, 0, 0)
    assert c.score_a == pytest.approx(0.5625) and c.score_b == pytest.approx(0.3125)
    assert c.difference == pytest.approx(0.25)
    half = 1.959963984540054 * math.sqrt(0.25 / 3) / 2        # d = .5, 0, .5, 0
    assert c.ci95 == pytest.approx((0.25 - half, 0.25 + half))
    assert (c.a_better, c.b_better, c.ties) == (2, 0, 2)
    assert c.sign_p == pytest.approx(0.5)


def sign_test_reference(wins, losses):
    """P(|X - n/2| >= |wins - n/2|) for X ~ Binomial(n, 1/2), by enumeration."""
    n = wins + losses
    dev = abs(wins - n / 2)
    return sum(math.comb(n, x) for x in range(n + 1) if abs(x - n / 2) >= dev - 1e-12) / 2 ** n


@settings(deadline=None, max_examples=200)
@given(st.integers(0, 40), st.integers(0, 40))
def test_sign_test_matches_reference(w, l):
    assert sign_test(w, l) == pytest.approx(min(1.0, sign_test_reference(w, l)))


POINTS = st.sampled_from([0.0, 0.5, 1.0])


@settings(deadline=None, max_examples=100)
@given(st.lists(st.tuples(POINTS, POINTS, POINTS, POINTS), min_size=2, max_size=30))
def test_difference_against_the_arena_scores(rows):
    a = match("net:a.pt:200", [(r[0], r[1]) for r in rows])
    b = match("net:b.pt:200", [(r[2], r[3]) for r in rows])
    c = compare(a, b)
    # independent: the arena's own summary of each whole match
    assert c.score_a == pytest.approx(summarize(a, "net:a.pt:200")["score"], abs=1e-4)
    assert c.score_b == pytest.approx(summarize(b, "net:b.pt:200")["score"], abs=1e-4)
    assert c.difference == pytest.approx(c.score_a - c.score_b)
    assert c.ci95[0] <= c.difference <= c.ci95[1]
    assert c.a_better + c.b_better + c.ties == c.pairs == len(rows)
    r = compare(b, a)
    assert r.difference == pytest.approx(-c.difference)
    assert (r.a_better, r.b_better) == (c.b_better, c.a_better) and r.sign_p == pytest.approx(c.sign_p)


def test_pairs_in_one_file_only_are_left_out_and_counted():
    a = match("A", [(1, 1)] * 5)
    b = match("B", [(0, 0)] * 3)
    c = compare(a, b)
    assert (c.pairs, c.only_a, c.only_b, c.difference) == (3, 2, 0, 1.0)


@pytest.mark.parametrize("case, message", [
    ("appended twice", "pair 0 has 4 game"),
    ("two players", "2 players besides"),
    ("other boards", "pair 1 was played on different boards"),
    ("pair boards differ", "the two games of pair 0 are on different boards"),
    ("no pair key", "no integer 'pair'"),
    ("no board", "lacks its board"),
    ("same player", "nothing to compare"),
    ("no common pair", "no pair in common"),
    ("no common opponent", "cannot tell the common opponent"),
])
def test_bad_inputs_are_refused(case, message):
    a = match("A", [(1, 0), (0.5, 0.5)])
    b = match("B", [(1, 0), (0.5, 0.5)])
    if case == "appended twice":
        a = a + a
    elif case == "two players":
        a = a + match("C", [(1, 1)])
    elif case == "other boards":
        b = match("B", [(1, 0), (0.5, 0.5)], boards=[(9, 10, [3, 4], []), (12, 12, [0, 0], [])])
    elif case == "pair boards differ":
        a[1]["width"] = 11
    elif case == "no pair key":
        del a[2]["pair"]
    elif case == "no board":
        for r in a:
            del r["height"]
    elif case == "same player":
        b = match("A", [(1, 0), (0.5, 0.5)])
    elif case == "no common pair":
        for r in b:
            r["pair"] += 10
    elif case == "no common opponent":
        for r in b:
            r["first"], r["second"] = ("B" if r["first"] == "B" else "uct:9"), ("B" if r["second"] == "B" else "uct:9")
    with pytest.raises(ValueError, match=message):
        compare(a, b)


def test_cli_on_real_arena_matches(tmp_path):
    """Two real matches on the same boards (same seed), one on other boards (another seed)."""
    common = ["--sizes", "6x7", "--forbidden", "none", "--pairs", "3", "--workers", "1", "--json"]
    files = {}
    for name, player, seed in (("a", "uct:60", 7), ("b", "greedy", 7), ("c", "greedy", 8)):
        files[name] = tmp_path / f"{name}.jsonl"
        subprocess.run([sys.executable, "-m", "selfplay.evaluation.arena", player, "uct:20", "--seed", str(seed),
                        "--out", str(files[name]), *common], cwd=REPO, check=True, capture_output=True)
    out = subprocess.run([sys.executable, "-m", "selfplay.evaluation.compare", str(files["a"]), str(files["b"]), "--json"],
                         cwd=REPO, check=True, capture_output=True, text=True)
    c = json.loads(out.stdout)
    recs_a = [json.loads(x) for x in files["a"].read_text().splitlines()]
    assert (c["a"], c["b"], c["opponent"], c["pairs"]) == ("uct:60", "greedy", "uct:20", 3)
    assert c["score_a"] == pytest.approx(summarize(recs_a, "uct:60")["score"], abs=1e-4)
    bad = subprocess.run([sys.executable, "-m", "selfplay.evaluation.compare", str(files["a"]), str(files["c"])],
                         cwd=REPO, capture_output=True, text=True)
    assert bad.returncode == 2 and "different boards" in bad.stderr and "--seed" in bad.stderr


def test_cli_refuses_malformed_files(tmp_path, capsys):
    good = tmp_path / "good.jsonl"
    good.write_text("".join(json.dumps(r) + "\n" for r in match("A", [(1, 0)])))
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps(match("B", [(1, 0)])[0]) + "\n{not json\n")
    assert main([str(good), str(broken)]) == 2
    assert f"{broken}:2: malformed JSON line" in capsys.readouterr().err
    assert main([str(good), str(tmp_path / "missing.jsonl")]) == 2
    assert "No such file" in capsys.readouterr().err


def test_the_shipped_control_record():
    """models/ ships the control's equal-time match for comparisons: golden figures."""
    from selfplay.evaluation.compare import pair_scores
    from selfplay.evaluation.elo import load_records

    recs = load_records(REPO / "models" / "c4fast_cpu_vs_alphabeta_0.2s.jsonl")
    player, scores = pair_scores(recs, "alphabeta:0.2")
    assert player == "net:models/c4fast_cpu.pt:0.2s" and sorted(scores) == list(range(100))
    assert sum(s for s, _ in scores.values()) / 100 == pytest.approx(0.90)
    assert summarize(recs, player)["score"] == pytest.approx(0.90)
