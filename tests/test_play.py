"""Arena, network players, the Saiblo protocol player (over real pipes) and human play."""

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import c4fast
from nets.checkpoint import checkpoint_name, save_checkpoint
from nets.config import get_preset
from nets.model import build_model
from nets.numpy_net import export_numpy
from conftest import skip_without_instructions

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    d = tmp_path_factory.mktemp("model")
    torch.manual_seed(0)
    m = build_model(get_preset("tiny")).eval()
    pt = d / checkpoint_name(3)
    save_checkpoint(pt, m, get_preset("tiny"), 3)
    npz = d / "tiny.npz"
    export_numpy(str(pt), str(npz))
    return pt, npz


@settings(max_examples=40, deadline=None)
@given(n=st.integers(0, 2), cut=st.floats(0.0, 1.0), whole_unterminated=st.booleans())
def test_an_appended_games_file_drops_only_a_line_cut_off_mid_write(tmp_path_factory, n, cut, whole_unterminated):
    """A process killed while writing a game leaves a partial last line; the next match's
    appends must not glue onto it (load_records would then reject the file for good)."""
    from selfplay.evaluation.arena import open_for_append, play_match
    from selfplay.evaluation.elo import load_records

    path = tmp_path_factory.mktemp("append") / "games.jsonl"
    recs = play_match("greedy", "random", 2, seed=n, sizes=[(6, 7)], forbidden=False)[:2 * n]
    text = "".join(json.dumps(r) + "\n" for r in recs)
    last = json.dumps({"first": "greedy", "second": "random", "cut": True})
    if whole_unterminated:  # a whole record without its newline (edited by hand) is kept
        data, kept = text + last, text + last + "\n"
    else:  # any proper prefix of a line: what a killed writer leaves
        data, kept = text + last[:int(cut * (len(last) - 1))], text
    path.write_text(data)
    line = json.dumps(recs[0] if recs else {"x": 1}) + "\n"
    with open_for_append(str(path)) as f:
        f.write(line)
    assert path.read_text() == kept + line
    assert not os.path.exists(str(path) + ".unpaired")  # whole pairs and pairless records stay
    if not whole_unterminated and recs:
        assert load_records([str(path)]) == recs + [recs[0]]


@pytest.fixture(scope="module")
def three_pairs():
    """The JSON lines of a real 3-pair match (greedy vs random on 6x7), one per game."""
    from selfplay.evaluation.arena import play_match

    return [json.dumps(r) + "\n" for r in play_match("greedy", "random", 3, seed=3, sizes=[(6, 7)], forbidden=False)]


@settings(max_examples=60, deadline=None)
@given(cut=st.floats(0.0, 1.0))
def test_a_match_killed_anywhere_resumes_with_whole_pairs_only(tmp_path_factory, three_pairs, cut):
    """Whatever prefix of a games file a killed writer leaves, the next append keeps exactly
    the whole pairs in it; a pair's first game without its second goes to PATH.unpaired
    (reference: the file's lines taken two by two, a line whole when its JSON is)."""
    from selfplay.evaluation.arena import open_for_append

    full = "".join(three_pairs)
    prefix = full[:int(cut * len(full))]
    whole, pos = 0, 0
    for line in three_pairs:
        if pos + len(line) - 1 <= len(prefix):  # the JSON whole, with or without its newline
            whole += 1
        pos += len(line)
    path = tmp_path_factory.mktemp("killed") / "games.jsonl"
    path.write_text(prefix)
    with open_for_append(str(path)) as f:
        f.write(three_pairs[0])
    assert path.read_text() == "".join(three_pairs[:whole - whole % 2]) + three_pairs[0]
    side = Path(str(path) + ".unpaired")
    if whole % 2:
        assert side.read_text() == three_pairs[whole - 1]
    else:
        assert not side.exists()


def test_salvage_keeps_the_readable_games_and_the_original(tmp_path, three_pairs):
    from selfplay.evaluation.arena import records_to_resume, salvage_games_file

    path = tmp_path / "games.jsonl"
    path.write_bytes(("".join(three_pairs[:2]) + "{not\rjson\n" + three_pairs[2]).encode() + b"\xff\n"
                     + "".join(three_pairs[3:]).encode())
    original = path.read_bytes()
    with pytest.raises(ValueError, match=r"games.jsonl:3: malformed JSON line"):
        records_to_resume(str(path))
    records, aside, bad = salvage_games_file(str(path))
    assert [n for n, _ in bad] == [3, 5] and "not UTF-8" in bad[1][1]
    assert Path(aside).read_bytes() == original and Path(aside).name.startswith("games.jsonl.damaged-")
    assert path.read_text() == "".join(three_pairs)
    assert records == [json.loads(x) for x in three_pairs] == records_to_resume(str(path))
    assert salvage_games_file(str(path)) == (records, None, [])  # a healthy file is left alone


def test_arena_pairs_swap_colours_on_identical_boards(tmp_path):
    from selfplay.evaluation.arena import play_match, summarize

    out = tmp_path / "games.jsonl"
    lines_at_call = []  # on_pair runs after each pair, once its two games are written
    recs = play_match("greedy", "random", 3, workers=1, seed=5, out_path=str(out),
                      on_pair=lambda: lines_at_call.append(len(out.read_text().splitlines())))
    assert len(recs) == 6 and lines_at_call == [2, 4, 6]
    by_pair = {}
    for r in recs:
        by_pair.setdefault(r["pair"], []).append(r)
    for pair, (g1, g2) in by_pair.items():
        assert (g1["height"], g1["width"], g1["forbidden"]) == (g2["height"], g2["width"], g2["forbidden"])
        assert {g1["first"], g2["first"]} == {"greedy", "random"} and g1["first"] != g2["first"]
        assert 9 <= g1["height"] <= 12 and 9 <= g1["width"] <= 12 and g1["forbidden"] is not None
        # the record replays to its result
        g = c4fast.Game.from_moves(g1["height"], g1["width"], tuple(g1["forbidden"]), g1["moves"])
        assert g.result == g1["result"]
    lines = out.read_text().splitlines()
    assert len(lines) == 6 and json.loads(lines[0])["first"] in ("greedy", "random")
    s = summarize(recs, "greedy")
    assert s["games"] == 6 and s["wins"] + s["draws"] + s["losses"] == 6
    assert s["ci95"][0] <= s["score"] <= s["ci95"][1]


def _stone_result(rec) -> int:
    """The record's result as the moves give it: 1 if the game's first mover won."""
    g = c4fast.Game.from_moves(rec["height"], rec["width"], rec["forbidden"] and tuple(rec["forbidden"]),
                               rec["moves"])
    return g.result


@pytest.mark.parametrize("plies", [1, 4])
def test_standard_board_pairs_start_from_random_openings(tiny_model, plies):
    """Two deterministic players on 6x7 without a forbidden cell: with no opening every pair
    replays the same two games; with one, pairs differ, both games of a pair share the
    opening, and results are told from the side of the player to move after it."""
    from selfplay.evaluation.arena import default_opening_plies, play_match, setup_for_pair

    pt, npz = tiny_model
    a, b = f"net:{pt}:policy", f"net:{npz}:policy"
    same = play_match(a, b, 3, seed=1, sizes=[(6, 7)], forbidden=False, opening_plies=0)
    assert len({tuple(r["moves"]) for r in same}) <= 2  # 6 games, at most 2 distinct
    assert default_opening_plies(False) == 4 and default_opening_plies(True) == 0
    recs = play_match(a, b, 6, seed=1, sizes=[(6, 7)], forbidden=False,
                      opening_plies=None if plies == 4 else plies)
    openings = {}
    for r in recs:
        assert r["opening"] == plies and r["forbidden"] is None
        openings.setdefault(r["pair"], set()).add(tuple(r["moves"][:plies]))
        stone = _stone_result(r)
        assert r["result"] == (stone if plies % 2 == 0 or stone == 0 else 3 - stone)
    assert all(len(o) == 1 for o in openings.values())  # one opening per pair
    assert len({next(iter(o)) for o in openings.values()}) >= 3  # pairs differ
    assert len({tuple(r["moves"]) for r in recs}) > 2
    h, w, f, op = setup_for_pair(1, 0, [(6, 7)], False, plies)
    assert (h, w, f) == (6, 7, None) and op == setup_for_pair(1, 0, [(6, 7)], False, plies)[3]
    assert op == next(iter(openings[0]))


def test_opening_plies_are_validated():
    from selfplay.evaluation.arena import play_match, setup_for_pair

    with pytest.raises(ValueError, match="opening plies"):
        play_match("random", "random", 1, opening_plies=-1)
    with pytest.raises(ValueError, match="leaves a 4x4 game running"):
        setup_for_pair(0, 0, [(4, 4)], False, 16)  # a full board has ended
    h, w, f, op = setup_for_pair(3, 2, [(9, 9)], True, 6)
    g = c4fast.Game(h, w, f)
    for col in op:
        g.play(col)
    assert len(op) == 6 and g.result is None


def test_arena_cli_and_bad_spec(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "selfplay.evaluation.arena", "greedy", "random", "--pairs", "2",
                           "--workers", "2", "--json", "--out", str(tmp_path / "g.jsonl")],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    s = json.loads(proc.stdout.strip().splitlines()[-1])
    assert s["games"] == 4 and s["games_per_s"] > 0
    # the final board fill of the match, and the same from its records (c4fast fill)
    recs = [json.loads(x) for x in (tmp_path / "g.jsonl").read_text().splitlines()]
    cells = [r["height"] * r["width"] - (r["forbidden"] is not None) for r in recs]
    assert sum(s["fill_hist"]) == 4
    assert s["mean_fill"] == pytest.approx(np.mean([len(r["moves"]) / c for r, c in zip(recs, cells)]), abs=1e-4)
    fill = subprocess.run([sys.executable, "-m", "selfplay.cli", "fill", str(tmp_path / "g.jsonl")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert fill.returncode == 0, fill.stderr
    f = json.loads(fill.stdout)
    assert (f["games"], f["mean_fill"], f["fill_hist"]) == (4, s["mean_fill"], s["fill_hist"])
    bad = subprocess.run([sys.executable, "-m", "selfplay.evaluation.arena", "nonsense", "random"], cwd=ROOT,
                         capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "nonsense" in bad.stderr


def test_net_players_return_legal_moves_and_analysis(tiny_model):
    from nets.netplayer import NetPlayer

    pt, npz = tiny_model
    rng = np.random.default_rng(0)
    for path, playouts in ((str(pt), 30), (str(npz), 30), (str(npz), 0)):
        p = NetPlayer(path, playouts=playouts)
        g = c4fast.Game.random(rng)
        p.reset(g)
        while g.result is None:
            col = p.choose(g.copy())
            assert col in g.legal_moves()
            a = p.analysis()
            assert abs(sum(a["wdl"]) - 1) < 1e-5
            g.play(col)


def _positions_of_random_games(h, w, n, seed):
    """(n, C, h, w) planes of unfinished positions of uniformly random games (forbidden cell
    on 9x9 and up)."""
    rng = np.random.default_rng(seed)
    out = []
    while len(out) < n:
        g = c4fast.Game(h, w, (int(rng.integers(h)), int(rng.integers(w))) if min(h, w) >= 9 else None)
        for _ in range(int(rng.integers(0, h * w // 2))):
            if g.result is not None:
                break
            g.play(int(rng.choice(g.legal_moves())))
        if g.result is None:
            out.append(g.planes())
    return np.stack(out).astype(np.float32)


@pytest.mark.parametrize("forward", ["auto", "eager", "fused", "ort", "ort_int8", "bf16", "ov", "ov_bf16"])
def test_every_play_forward_computes_the_checkpoints_net(forward):
    """The shipped net through load_evaluator's forwards against its eager torch forward:
    policy logits (B, H, W), WDL probabilities, within the backend's tolerance."""
    from nets.backends import tolerance_of
    from nets.checkpoint import load_checkpoint
    from nets.netplayer import auto_play_forward, load_evaluator
    from nets.selfcheck import compare

    if forward in ("auto", "ort", "ort_int8"):
        pytest.importorskip("onnxruntime")
    if forward.startswith("ov"):
        pytest.importorskip("openvino")
    skip_without_instructions(forward)
    pt = ROOT / "models" / "c4fast_cpu.pt"
    model, _, _ = load_checkpoint(pt, map_location="cpu")
    ev = load_evaluator(str(pt), threads=1, forward=forward)
    assert getattr(ev, "kind", "eager") == (auto_play_forward() if forward == "auto" else forward)
    for h, w in ((6, 7), (9, 12), (12, 12)):
        x = _positions_of_random_games(h, w, 12, seed=h * w)
        logits, wdl = ev.evaluate(x, None)
        assert logits.shape == (12, h, w) and logits.dtype == np.float32 and wdl.shape == (12, 3)
        assert np.allclose(wdl.sum(1), 1, atol=1e-5)
        with torch.no_grad():
            pol, val = model.eval()(torch.from_numpy(x))
        err = compare(logits.reshape(12, -1), wdl, pol.flatten(1).numpy(), torch.softmax(val, 1).numpy())
        tol = tolerance_of(forward if forward != "auto" else auto_play_forward())
        assert err["finite"] and err["policy_rel"] <= tol.policy_rel and err["wdl_abs"] <= tol.wdl_abs, err
    assert ev.evals == 36


@pytest.mark.parametrize("name", ["c4fast_cpu", "c4fast_gpu", "c4fast_std6x7"])
def test_each_shipped_npz_is_its_checkpoints_net(name):
    """models/NAME.npz (the torch-free export) computes models/NAME.pt's net (fp32)."""
    from nets.backends import tolerance_of
    from nets.checkpoint import load_checkpoint
    from nets.netplayer import load_evaluator
    from nets.selfcheck import compare

    model, _, _ = load_checkpoint(ROOT / "models" / f"{name}.pt", map_location="cpu")
    ev = load_evaluator(str(ROOT / "models" / f"{name}.npz"), threads=1)
    tol = tolerance_of("numpy")
    for h, w in ((6, 7), (10, 11)):
        x = _positions_of_random_games(h, w, 8, seed=h + w)
        logits, wdl = ev.evaluate(x, None)
        with torch.no_grad():
            pol, val = model.eval()(torch.from_numpy(x))
        err = compare(logits.reshape(8, -1), wdl, pol.flatten(1).numpy(), torch.softmax(val, 1).numpy())
        assert err["finite"] and err["policy_rel"] <= tol.policy_rel and err["wdl_abs"] <= tol.wdl_abs, err


def test_play_forward_choices_are_checked(tiny_model):
    from nets.netplayer import load_evaluator
    from nets.players import make_player

    pt, npz = tiny_model
    with pytest.raises(ValueError, match="forward must be one of"):
        load_evaluator(str(pt), forward="tensorrt")
    with pytest.raises(ValueError, match="numpy export"):
        make_player(f"net:{npz}:10", forward="ort")
    assert type(load_evaluator(str(npz), forward="numpy")).__name__ == "NumpyEvaluator"
    assert type(load_evaluator(str(pt.parent), forward="eager")).__name__ == "TorchEvaluator"
    bad = subprocess.run([sys.executable, "-m", "selfplay.evaluation.arena", f"net:{pt}:5", "random", "--forward", "trt"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "--forward" in bad.stderr


def test_without_onnxruntime_and_openvino_auto_falls_back_to_eager_torch(tiny_model):
    pt, _ = tiny_model
    code = ("import sys; sys.modules['onnxruntime'] = None; sys.modules['openvino'] = None\n"
            "from nets.netplayer import load_evaluator\n"
            f"print(type(load_evaluator({str(pt)!r})).__name__)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.stdout.split() == ["TorchEvaluator"], out.stderr


@pytest.mark.parametrize("forward", ["eager", "ort"])
def test_arena_plays_net_players_on_each_forward(tiny_model, tmp_path, forward):
    if forward == "ort":
        pytest.importorskip("onnxruntime")
    pt, _ = tiny_model
    out = tmp_path / "g.jsonl"
    proc = subprocess.run([sys.executable, "-m", "selfplay.evaluation.arena", f"net:{pt}:20", "random", "--pairs", "1",
                           "--workers", "1", "--json", "--forward", forward, "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["games"] == 2
    for rec in map(json.loads, out.read_text().splitlines()):
        g = c4fast.Game(rec["height"], rec["width"], tuple(rec["forbidden"]) if rec["forbidden"] else None)
        for col in rec["moves"]:
            g.play(col)  # raises on an illegal move
        assert g.result is not None


def _referee(proc, h, w, forb_top, we_start, rng):
    """Drive the Saiblo player over real pipes; returns the finished game."""
    game = c4fast.Game(h, w, c4fast.from_saiblo(forb_top[0], forb_top[1], h))
    proc.stdin.write(f"{h} {w} {forb_top[0]} {forb_top[1]}\n".encode())
    last = (-1, -1)
    if not we_start:  # the referee (opponent) moves first
        col = int(rng.choice(game.legal_moves()))
        last = c4fast.to_saiblo(int(game.state[0]["top"][col]), col, h)
        game.play(col)
    proc.stdin.write(f"{last[0]} {last[1]}\n".encode())
    proc.stdin.flush()
    while game.result is None:
        n = int.from_bytes(proc.stdout.read(4), "big")
        x, y = (int(v) for v in proc.stdout.read(n).decode().split())
        row = int(game.state[0]["top"][y])
        assert c4fast.to_saiblo(row, y, h) == (x, y), "the player reported a wrong landing row"
        game.play(y)
        if game.result is not None:
            break
        col = int(rng.choice(game.legal_moves()))
        x2, y2 = c4fast.to_saiblo(int(game.state[0]["top"][col]), col, h)
        game.play(col)
        proc.stdin.write(f"{x2} {y2}\n".encode())
        proc.stdin.flush()
    proc.stdin.close()
    return game


@pytest.mark.parametrize("we_start", [True, False])
def test_saiblo_player_plays_a_full_game_over_pipes(tiny_model, we_start):
    _, npz = tiny_model
    proc = subprocess.Popen([sys.executable, "-m", "selfplay.apps.saiblo", "--model", str(npz), "--time", "0.2"],
                            cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    game = _referee(proc, 9, 10, (8, 3), we_start, np.random.default_rng(1))
    assert proc.wait(60) == 0, proc.stderr.read().decode()
    assert game.result is not None
    err = proc.stderr.read().decode()
    assert "torch" not in sys.modules or True  # (the subprocess check is below)
    assert "first move after" in err


def test_saiblo_path_does_not_import_torch(tiny_model):
    _, npz = tiny_model
    code = ("import sys, io; from selfplay.apps import saiblo;"
            "import argparse; a = argparse.Namespace(model=sys.argv[1], player=None, time=0.1, margin=0.05);"
            "inp = io.StringIO('6 7 5 3\\n-1 -1\\n'); out = io.BytesIO();"
            "saiblo.play(inp, out, a, log=io.StringIO());"
            "print('torch' in sys.modules)")
    proc = subprocess.run([sys.executable, "-c", code, str(npz)], cwd=ROOT, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"


@pytest.mark.parametrize("lines,needle", [
    ("9 9\n", "'H W noX noY'"),
    ("9 x 1 1\n", "'H W noX noY'"),
    ("13 9 1 1\n", "13x9"),
    ("9 9 9 1\n", "off the 9x9 board"),
    ("9 9 0 0\nfoo\n", "'lastX lastY'"),
    ("9 9 0 0\n8 11\n", "column 11"),
    ("9 9 0 4\n3 4\n", "lands on row"),
])
def test_saiblo_rejects_malformed_and_illegal_lines(tiny_model, lines, needle):
    _, npz = tiny_model
    proc = subprocess.run([sys.executable, "-m", "selfplay.apps.saiblo", "--model", str(npz), "--time", "0.1"],
                          cwd=ROOT, input=lines.encode(), capture_output=True, timeout=60)
    assert proc.returncode == 2
    err = proc.stderr.decode()
    assert needle in err and err.startswith("error:")


def test_human_play_session_with_scripted_input(tiny_model):
    from selfplay.apps.play import main

    pt, _ = tiny_model
    moves = "\n".join(["h", "99", *[str(c) for c in range(6)] * 8, "q"]) + "\n"
    out = io.StringIO()
    rc = main(["--engine", f"net:{pt}:20", "--size", "6x7", "--forbidden", "none", "--seed", "1"],
              inp=io.StringIO(moves), out=out)
    text = out.getvalue()
    assert rc == 0
    assert "engine plays column" in text and "not a legal move" in text and "preferred" in text
    assert re.search(r"col \d \(\d+, Q [+-]\d\.\d\d\)", text), text  # visits and the search's Q


def test_saiblo_bundle_builds_and_plays_from_the_archive(tiny_model, tmp_path):
    import time
    import zipfile

    _, npz = tiny_model
    out = tmp_path / "bundle.zip"
    proc = subprocess.run([sys.executable, "-m", "selfplay.apps.saiblo", "--bundle", str(out), "--model", str(npz),
                           "--time", "0.3"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    dest = tmp_path / "x"
    with zipfile.ZipFile(out) as z:
        names = z.namelist()
        assert "main.py" in names and "model.npz" in names
        assert any(n.startswith("c4fast/__pycache__/") and n.endswith(".nbi") for n in names)
        assert "\nimport torch" not in z.read("nets/numpy_net.py").decode()
        z.extractall(dest)
        for info in z.infolist():  # restore mtimes as unzip does
            t = time.mktime(info.date_time + (0, 0, -1))
            os.utime(dest / info.filename, (t, t))
    p = subprocess.Popen([sys.executable, "main.py"], cwd=dest, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    game = _referee(p, 10, 9, (0, 8), True, np.random.default_rng(3))
    assert p.wait(120) == 0, p.stderr.read().decode()
    assert game.result is not None
    # unpacked read-only (a read-only bind mount: even root cannot write there), the shipped
    # Numba cache is still used: nothing is compiled, every kernel is loaded from the cache
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "--bind", "-o", "ro", str(dest), str(ro)], capture_output=True).returncode != 0:
        pytest.skip("cannot make a read-only bind mount here (needs root)")
    try:
        assert subprocess.run(["touch", str(ro / "probe")], capture_output=True).returncode != 0
        p = subprocess.Popen([sys.executable, "main.py"], cwd=ro, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        game = _referee(p, 9, 9, (4, 4), True, np.random.default_rng(4))
        assert p.wait(120) == 0
        err = p.stderr.read().decode(errors="replace")
        assert game.result is not None
        copy = Path(err.split("running from a copy at ")[1].split()[0])

        def cache_files(root):
            return {str(f.relative_to(root)): (f.stat().st_size, int(f.stat().st_mtime))
                    for f in root.rglob("__pycache__/*") if f.suffix in (".nbi", ".nbc")}

        # Numba recompiling anything would add or rewrite index/data files in the copy
        assert cache_files(copy) == cache_files(dest) and cache_files(dest), err[-2000:]
    finally:
        subprocess.run(["umount", str(ro)], check=False)


def test_play_bench_reports_playouts_and_the_kept_graph():
    """`selfplay.bench.nets play` (tiny budget, numpy forward): one JSON line with the playouts of
    fresh searches and the share of root visits kept between the moves of a game."""
    proc = subprocess.run([sys.executable, "-m", "selfplay.bench.nets", "play", "--play-forwards", "numpy",
                           "--play-seconds", "0.03", "--play-positions", "3", "--play-games", "1"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    recs = [json.loads(x) for x in proc.stdout.splitlines()]
    (rec,) = [r for r in recs if r["bench"] == "play"]
    assert rec["forward"] == "numpy" and rec["model"] == "c4fast_cpu.npz" and rec["positions"] == 3
    assert rec["median_playouts"] >= 1 and rec["game_moves"] >= 4
    assert 0.0 <= rec["game_median_reused_share"] <= 1.0 and 0.0 <= rec["game_moves_with_reuse"] <= 1.0
    bad = subprocess.run([sys.executable, "-m", "selfplay.bench.nets", "play", "--play-forwards", "trt"],
                         cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "play forward" in bad.stderr


def test_net_spec_search_options_reach_the_player(tiny_model):
    """``:KEY=VALUE,...`` after the budget sets play-time SearchConfig/EndgameConfig fields;
    the spec (options included) is the player's name, so two settings of one net differ."""
    from c4fast.config import EndgameConfig, SearchConfig
    from nets.players import make_player, parse_net_spec, split_net_spec

    pt, npz = tiny_model
    p = make_player(f"net:{pt}:0.2s:c_puct=1.5,max_empty=0,proofs=off", forward="eager")
    assert (p.seconds, p.playouts, p.name) == (0.2, 0, f"net:{pt}:0.2s:c_puct=1.5,max_empty=0,proofs=off")
    assert p.config == SearchConfig(c_puct=1.5, proofs=False) and p.endgame == EndgameConfig(max_empty=0)
    q = make_player(f"net:{npz}:fpu_reduction=0,leaves_per_step=2", search=SearchConfig(c_puct=2.0),
                    endgame=EndgameConfig(share=0.25))
    assert q.playouts == 200 and q.config == SearchConfig(c_puct=2.0, fpu_reduction=0.0, leaves_per_step=2)
    assert q.endgame == EndgameConfig(share=0.25)
    assert parse_net_spec(f"net:{npz}:30:nodes=5000") == (str(npz), 30, 0.0, {"nodes": "5000"})
    assert split_net_spec(f"net:{npz}:1.5s:c_puct=2") == (str(npz), "1.5s")
    assert split_net_spec(f"net:{npz}:c_puct=2") == (str(npz), "")


@pytest.mark.parametrize("tail, match", [
    (":200:cpuct=2", "unknown search option 'cpuct'"),
    (":200:c_puct=1,c_puct=2", "given twice"),
    (":200:c_puct=high", "c_puct='high': expected float"),
    (":200:leaves_per_step=2.5", "expected int"),
    (":200:proofs=maybe", "expected true or false"),
    (":200:c_puct=-1", "SearchConfig.c_puct has an invalid value -1.0"),
    (":200:share=0", "EndgameConfig.share has an invalid value"),
    (":policy:c_puct=2", "raw-policy player does not search"),
])
def test_bad_net_spec_options_are_refused(tiny_model, tail, match):
    from nets.players import make_player

    _, npz = tiny_model
    with pytest.raises(ValueError, match=match):
        make_player(f"net:{npz}{tail}")


def root_visits(spec: str, game) -> dict:
    """The root visits {column: visits} of `spec`'s player after one move's search on `game`."""
    from nets.players import make_player

    p = make_player(spec)
    p.reset(game)
    p.choose(game.copy())
    return p.analysis()["visits"]


def test_search_options_change_the_search_and_name_arena_players(tiny_model, tmp_path):
    """c_puct 0 and 8 give different visit counts on the same position (the option is not
    ignored), and a match between two settings of one net records them apart."""
    from selfplay.evaluation.arena import play_match, summarize

    _, npz = tiny_model
    game = c4fast.Game(9, 10, (0, 4))
    assert root_visits(f"net:{npz}:64:c_puct=0", game) != root_visits(f"net:{npz}:64:c_puct=8", game)
    a, b = f"net:{npz}:16:c_puct=0.5", f"net:{npz}:16:c_puct=3"
    recs = play_match(a, b, 1, workers=1, seed=3, out_path=str(tmp_path / "g.jsonl"))
    assert sorted(r["first"] for r in recs) == sorted([a, b])
    assert summarize(recs, a)["games"] == 2
