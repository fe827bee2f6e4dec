"""python -m selfplay.evaluation.rate: real checkpoints, real games, a real Elo fit; resume; bad inputs."""

import csv
import json
import subprocess
import sys
from pathlib import Path

from nets.checkpoint import checkpoint_name, save_checkpoint
from selfplay.bench.gpucheck import perturbed_model

ROOT = Path(__file__).resolve().parents[1]


def rate(*args):
    cmd = [sys.executable, "-m", "selfplay.evaluation.rate", *map(str, args)]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=600)


def test_rates_every_checkpoint_of_a_directory_with_intervals_and_resumes(tmp_path):
    models = tmp_path / "models"
    models.mkdir()
    for step in (100, 200, 300):
        m = perturbed_model("tiny", step)
        save_checkpoint(models / checkpoint_name(step), m, m.config, step)
    out = tmp_path / "rating"
    args = [models, "--out", out, "--every", "2", "--anchors", "random,greedy", "--pairs", "2",
            "--playouts", "4", "--sizes", "6x7", "--forbidden", "none", "--workers", "1", "--chain"]
    proc = rate(*args)
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    steps = [c["step"] for c in summary["checkpoints"]]
    assert steps == [100, 300]  # every 2nd from the first, and the newest
    # 2 checkpoints x 2 anchors x 2 pairs x 2 games, plus the chain match (2 pairs)
    assert summary["games"] == 2 * 2 * 2 * 2 + 4 and summary["anchors"]["random"] == 0.0
    for c in summary["checkpoints"]:
        assert c["lo"] <= c["elo"] <= c["hi"] and c["games"] == 2 * 2 * 2 + 4
    with open(out / "ratings.csv") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["step"]) for r in rows] == steps
    games = (out / "games.jsonl").read_text().splitlines()
    assert len(games) == summary["games"] and all(json.loads(g)["height"] == 6 for g in games)
    again = rate(*args)  # everything is played already: nothing is added
    assert again.returncode == 0, again.stderr
    assert len((out / "games.jsonl").read_text().splitlines()) == len(games)
    # killed mid-write: the last pair's first game whole, its second cut off; the resume
    # drops the cut line, moves the lone first game aside and plays that pair again
    (out / "games.jsonl").write_text("\n".join(games[:-1]) + "\n" + games[-1][: len(games[-1]) // 2])
    resumed = rate(*args)
    assert resumed.returncode == 0, resumed.stderr
    after = (out / "games.jsonl").read_text().splitlines()
    assert after[:-2] == games[:-2] and len(after) == len(games)
    assert (out / "games.jsonl.unpaired").read_text() == games[-2] + "\n"
    assert json.loads(resumed.stdout.strip().splitlines()[-1])["games"] == len(after)
    damaged = "\n".join(after[:5] + ["{not json"] + after[6:]) + "\n"
    (out / "games.jsonl").write_text(damaged)
    refused = rate(*args)
    assert refused.returncode == 2 and "games.jsonl:6: malformed JSON line" in refused.stderr
    assert "--salvage" in refused.stderr and (out / "games.jsonl").read_text() == damaged
    # --salvage: the original copied aside, the readable games kept, the broken pair played again
    salvaged = rate(*args, "--salvage")
    assert salvaged.returncode == 0, salvaged.stderr
    (aside,) = out.glob("games.jsonl.damaged-*")
    assert aside.read_text() == damaged and "line 6: malformed JSON line" in salvaged.stderr
    final = (out / "games.jsonl").read_text().splitlines()
    assert final[:len(after) - 1] == after[:5] + after[6:] and len(final) == len(after) + 1
    assert json.loads(salvaged.stdout.strip().splitlines()[-1])["games"] == len(final)


def test_bad_inputs_are_refused_clearly(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = rate(empty, "--out", tmp_path / "o")
    assert proc.returncode == 2 and "holds no model_XXXXXXXX.pt" in proc.stderr
    proc = rate(tmp_path / "missing.pt", "--out", tmp_path / "o")
    assert proc.returncode == 2 and "neither a checkpoint file nor a directory" in proc.stderr
    m = perturbed_model("tiny", 1)
    save_checkpoint(tmp_path / checkpoint_name(1), m, m.config, 1)
    proc = rate(tmp_path / checkpoint_name(1), "--out", tmp_path / "o", "--anchors", "random,nonsense")
    assert proc.returncode == 2 and "nonsense" in proc.stderr
    proc = rate(tmp_path / checkpoint_name(1), "--out", tmp_path / "o", "--anchor", "greedy", "--anchors", "random")
    assert proc.returncode == 2 and "--anchor" in proc.stderr
    (tmp_path / "file").write_text("x")
    proc = rate(tmp_path / checkpoint_name(1), "--out", tmp_path / "file")
    assert proc.returncode == 2 and "not a directory" in proc.stderr


def test_rate_checkpoint_calls_back_after_every_pair(tmp_path):
    """The loop keeps its status lines going through an evaluation with this callback."""
    from selfplay.evaluation.periodic import EvalConfig, rate_checkpoint

    m = perturbed_model("tiny", 7)
    path = tmp_path / checkpoint_name(7)
    save_checkpoint(path, m, m.config, 7)
    calls = []
    games = tmp_path / "arena" / "games.jsonl"
    ev = EvalConfig(pairs=2, playouts=4, anchors=("random", "greedy"))
    elo = rate_checkpoint(str(path), ev, [(6, 7)], False, 0, str(tmp_path), samples=0, run_seconds=0.0,
                          on_pair=lambda: calls.append(len(games.read_text().splitlines())))
    assert calls == [2, 4, 6, 8]  # 2 anchors x 2 pairs, each call after its pair's 2 games are written
    assert elo is not None and elo["step"] == 7 and elo["lo"] <= elo["elo"] <= elo["hi"]


def test_in_loop_fit_is_anchored_at_the_first_anchor_without_random(tmp_path):
    """The cpu preset's anchors have no 'random': the first anchor reads 0 Elo, and the
    preset's depth-capped alpha-beta anchor parses (a playable spec, not a timed one)."""
    import json

    from nets.players import make_player
    from selfplay.evaluation.periodic import EvalConfig, rate_checkpoint
    from selfplay.generation.loop import CPU_ANCHORS, PRESETS

    assert PRESETS["cpu"].eval.anchors == CPU_ANCHORS and all(make_player(a) for a in CPU_ANCHORS)
    m = perturbed_model("tiny", 9)
    path = tmp_path / checkpoint_name(9)
    save_checkpoint(path, m, m.config, 9)
    ev = EvalConfig(pairs=2, playouts=4, anchors=("uct:30", "greedy"))
    assert rate_checkpoint(str(path), ev, [(6, 7)], False, 0, str(tmp_path), samples=0, run_seconds=0.0)
    ratings = json.loads((tmp_path / "ratings.json").read_text())
    assert ratings["anchor"] == "uct:30" and ratings["elo"]["uct:30"] == 0.0


def test_rate_checkpoint_resumes_past_a_line_cut_off_mid_write_and_salvages_a_damaged_file(tmp_path):
    """An evaluation killed mid-write leaves a cut-off last line: the next start drops it,
    plays only the missing pair and fits every game in the file; a line damaged elsewhere
    is dropped with the original kept aside, and the checkpoint is rated on the rest."""
    from selfplay.evaluation.elo import fit_ratings, load_records
    from selfplay.evaluation.periodic import EvalConfig, rate_checkpoint

    m = perturbed_model("tiny", 5)
    path = tmp_path / checkpoint_name(5)
    save_checkpoint(path, m, m.config, 5)
    games = tmp_path / "arena" / "games.jsonl"
    ev = EvalConfig(pairs=2, playouts=4, anchors=("random", "greedy"))
    assert rate_checkpoint(str(path), ev, [(6, 7)], False, 0, str(tmp_path), samples=0, run_seconds=0.0)
    lines = games.read_text().splitlines(keepends=True)
    assert len(lines) == 8
    games.write_text("".join(lines[:6]) + lines[6][: len(lines[6]) // 2])  # the last pair: one game cut off
    (tmp_path / "ratings.json").unlink()
    calls = []
    elo = rate_checkpoint(str(path), ev, [(6, 7)], False, 0, str(tmp_path), samples=0, run_seconds=0.0,
                          on_pair=lambda: calls.append(1))
    assert calls == [1] and elo is not None
    records = load_records([games])
    assert len(records) == 8 and records[:6] == [json.loads(x) for x in lines[:6]]
    expected = fit_ratings(records, anchor="random", prior_games=1.0).to_dict()
    assert json.loads((tmp_path / "ratings.json").read_text()) == json.loads(json.dumps(expected))

    # a line damaged inside the file and the last pair's second game missing: the lone game
    # is moved aside, the damaged file copied aside, and the readable games rate on
    damaged = "".join(lines[:3]) + "{not json\n" + "".join(lines[4:7])
    games.write_text(damaged)
    calls.clear()
    elo = rate_checkpoint(str(path), ev, [(6, 7)], False, 0, str(tmp_path), samples=0, run_seconds=0.0,
                          on_pair=lambda: calls.append(1))
    assert elo is not None and calls == [1, 1]  # one pair again per anchor
    assert (tmp_path / "arena" / "games.jsonl.unpaired").read_text() == lines[6]
    (aside,) = (tmp_path / "arena").glob("games.jsonl.damaged-*")
    assert aside.read_text() == "".join(lines[:3]) + "{not json\n" + "".join(lines[4:6])
    records = load_records([games])
    assert len(records) == 9 and records[:5] == [json.loads(x) for x in lines[:3] + lines[4:6]]
    expected = fit_ratings(records, anchor="random", prior_games=1.0).to_dict()
    assert json.loads((tmp_path / "ratings.json").read_text()) == json.loads(json.dumps(expected))
