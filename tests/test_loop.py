"""The dummy run: self-play -> HDF5 -> train -> checkpoint -> reload -> arena, in seconds."""

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nets.shards import list_shards, read_shard, shard_totals, validate_shard

ROOT = Path(__file__).resolve().parents[1]


def loop_cmd(run_dir, evaluations, minutes=30):
    """The dummy loop, ended by a count of evaluated checkpoints (not by the clock, so a
    slow or loaded machine gives the same outcome)."""
    return [sys.executable, "-m", "selfplay.generation.loop", "--preset", "dummy", "--dir", str(run_dir),
            "--minutes", str(minutes), "--max-evaluations", str(evaluations), "--sizes", "6x7"]


def test_dummy_loop_runs_end_to_end_and_resumes(tmp_path):
    run = tmp_path / "run"
    # a trainer knob, through the loop's flags; the roles at 0 are sized from measured speeds
    knob = ["--train.value-mix", "0.25", "--selfplay.workers", "0", "--selfplay.threads", "0", "--train.threads", "0"]
    env = dict(os.environ, C4FAST_CACHE_DIR=str(tmp_path / "cache"))
    proc = subprocess.run(loop_cmd(run, 1) + knob, cwd=ROOT, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["samples"] > 0 and summary["latest_checkpoint"]
    plan = summary["core_split"]
    assert plan == json.loads((run / "loop.json").read_text())["core_split"]
    assert plan["cores"] == len(os.sched_getaffinity(0)) and sum(plan["shares"].values()) == pytest.approx(plan["cores"], abs=0.01)
    sp_conf = json.loads((run / "config" / "selfplay.json").read_text())
    tr_conf = json.loads((run / "config" / "train.json").read_text())
    assert (sp_conf["workers"], sp_conf["threads"], tr_conf["threads"]) == tuple(plan["used"].values())
    assert min(plan["used"].values()) >= 1 and plan["costs"]["evals_per_sample"] >= 1
    shards = list_shards([run / "data"])
    assert shards
    for p in shards[-3:]:
        validate_shard(p)
    assert list((run / "train" / "models").glob("model_*.pt"))
    games = (run / "arena" / "games.jsonl").read_text().splitlines()
    assert games and json.loads(games[0])["result"] in (0, 1, 2)
    ratings = json.loads((run / "ratings.json").read_text())
    assert "random" in json.dumps(ratings)
    with open(run / "elo_curve.csv") as f:
        rows = list(csv.DictReader(f))
    assert rows and float(rows[0]["elo_lo"]) <= float(rows[0]["elo"]) <= float(rows[0]["elo_hi"])
    assert list((run / "train" / "tb").iterdir())  # TensorBoard event files
    state = json.loads((run / "loop.json").read_text())
    first_elapsed = state["elapsed"]
    step_before = int(Path(summary["latest_checkpoint"]).stem.split("_")[1])
    games_before, samples_before = shard_totals([run / "data"])
    assert samples_before == summary["samples"] and games_before > 0
    # the same command with a larger budget resumes: it rates the checkpoint saved at the stop,
    # then needs a newer one, which only a resumed trainer can write. Status lines (and the
    # self-play status they read) every half second: each counts the run's games and samples,
    # the first start's included, not the new self-play process's alone
    # This start also labels with the solver: the status lines and the summary report its counts.
    fast_status = ["--status-every", "0.5", "--selfplay.status-every", "0.5"]
    solver = ["--selfplay.solve-max-empty", "16", "--selfplay.solve-rescore"]
    proc2 = subprocess.run(loop_cmd(run, 3) + knob + fast_status + solver, cwd=ROOT, capture_output=True,
                           text=True, timeout=600, env=env)
    assert proc2.returncode == 0, proc2.stdout + proc2.stderr
    status = [(int(m[1]), int(m[2])) for m in re.finditer(r" min  games (\d+)  samples (\d+) ", proc2.stderr)]
    assert status, proc2.stderr
    assert all(g >= games_before and n >= samples_before for g, n in status), (games_before, samples_before, status)
    s2 = json.loads(proc2.stdout.strip().splitlines()[-1])
    sp_conf = json.loads((run / "config" / "selfplay.json").read_text())["selfplay"]
    assert sp_conf["solve_max_empty"] == 16 and sp_conf["solve_rescore"] is True
    # this start's self-play from its final status; none when the evaluations ended the start
    # before self-play had started (its status lines then show no solver counts either)
    sp = s2.get("selfplay")
    if sp is not None:
        assert sp["final"] is True and 0 <= sp["samples"] <= s2["samples"] - samples_before
        assert 0 <= sp["solved_samples"] <= sp["solve_tries"]
    for m in re.finditer(r"solved (\d+) of (\d+) tried, rescored (\d+)", proc2.stderr):
        assert sp is not None, f"a status line shows solver counts ({m[0]!r}) but the summary has no selfplay"
        final = (sp["solved_samples"], sp["solve_tries"], sp["rescored_samples"])
        assert all(int(x) <= f for x, f in zip(m.groups(), final)), (m[0], final)
    assert s2["elapsed_s"] > first_elapsed and s2["evaluated"] == 3
    assert int(Path(s2["latest_checkpoint"]).stem.split("_")[1]) > step_before
    assert f"resumed at step {step_before}" in (run / "logs" / "train.log").read_text()
    assert json.loads((run / "loop.json").read_text())["config"]["preset"] == "dummy"
    train_conf = json.loads((run / "config" / "train.json").read_text())
    assert train_conf["resume"] is True and train_conf["train"]["value_mix"] == 0.25
    assert train_conf["sizes"] == state["config"]["sizes"]  # the trainer knows the run's sizes

    def trained_versions():
        versions = {0}
        for p in list_shards([run / "data"]):
            for k, g in read_shard(p).items():
                if k != "games":
                    versions.update(int(v) for v in g["model_version"])
        return max(versions)

    if trained_versions() == 0:
        # self-play may not have reloaded a checkpoint before the evaluations ended the runs (a
        # loaded machine starts its server late): a third run, stopped once it has
        p = subprocess.Popen(loop_cmd(run, 0) + knob, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True, env=env)
        try:
            deadline = time.monotonic() + 300  # a wait, not a speed check
            while trained_versions() == 0 and time.monotonic() < deadline and p.poll() is None:
                time.sleep(1)
        finally:
            p.send_signal(signal.SIGINT)
            out, err = p.communicate(timeout=180)
        assert p.returncode == 0, out + err
    assert trained_versions() > 0, "self-play never played with a trained checkpoint"


def test_the_status_line_shows_the_solver_counts_only_when_it_labels():
    from selfplay.generation.loop import _selfplay_note

    assert _selfplay_note({"forward": "x", "solve_tries": 5, "solved_samples": 3, "rescored_samples": 2}) == \
        "forward x  solved 3 of 5 tried, rescored 2"
    assert _selfplay_note({"forward": "x", "solve_tries": 0, "solved_samples": 0}) == "forward x"
    assert _selfplay_note({}) == ""


def test_ctrl_c_stops_everything_cleanly(tmp_path):
    run = tmp_path / "run"
    p = subprocess.Popen(loop_cmd(run, 0), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 600
        models = run / "train" / "models"
        while time.monotonic() < deadline and not (models.exists() and list(models.glob("model_*.pt"))):
            time.sleep(0.5)
        assert list(models.glob("model_*.pt")), "no checkpoint appeared"
        # let an evaluation start: Ctrl-C must also work in the middle of one
        arena = run / "arena" / "games.jsonl"
        while time.monotonic() < deadline and not arena.exists():
            time.sleep(0.2)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:  # a failed wait must not leave the loop running (its children die with it)
            p.kill()
            p.communicate(timeout=60)
    assert p.returncode == 0, out + err
    assert "interrupted" in err
    state = json.loads((run / "loop.json").read_text())
    assert state["elapsed"] > 0
    assert (run / "train" / "train_state.pt").exists()
    assert not [n for n in (run / "data").iterdir() if n.name.endswith(".tmp")]
    for s in list_shards([run / "data"]):
        validate_shard(s)


def test_a_signal_cuts_the_final_evaluation_short_and_the_same_command_finishes_it(tmp_path):
    """After its budget the loop rates its newest checkpoint; a SIGTERM then (a scheduler's,
    `timeout`'s) ends the loop at once, not after the whole evaluation, and the same command
    plays only the pairs that are missing (an H200 loop ignored SIGINT in its final evaluation
    and was killed 63 s after its budget)."""
    from selfplay.evaluation.elo import games_between, load_records

    run = tmp_path / "run"
    env = dict(os.environ, C4FAST_CACHE_DIR=str(tmp_path / "cache"))
    no_periodic = ["--eval.every-min", "1000"]
    models, arena = run / "train" / "models", run / "arena" / "games.jsonl"
    # 1. a start stopped by Ctrl-C once a checkpoint exists: no evaluation has run, so the
    #    newest checkpoint is unrated whatever the machine's speed
    p = subprocess.Popen(loop_cmd(run, 0) + no_periodic, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, env=env)
    try:
        deadline = time.monotonic() + 600  # a wait, not a speed check
        while time.monotonic() < deadline and p.poll() is None and not list(models.glob("model_*.pt")):
            time.sleep(0.5)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=300)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate(timeout=60)
    assert p.returncode == 0 and list(models.glob("model_*.pt")), out + err
    elapsed = json.loads((run / "loop.json").read_text())["elapsed"]
    # 2. a few more seconds of budget, then a final evaluation far longer than the wait below
    minutes = str(elapsed / 60 + 0.05)
    long_eval = ["--eval.pairs", "2000", "--eval.playouts", "400"]
    cmd = loop_cmd(run, 0, minutes=minutes) + no_periodic
    p = subprocess.Popen(cmd + long_eval, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=env)
    try:
        deadline = time.monotonic() + 600
        while (time.monotonic() < deadline and p.poll() is None
               and not (arena.exists() and len(arena.read_text().splitlines()) >= 2)):
            time.sleep(0.2)
        assert p.poll() is None, "the loop ended before its final evaluation played a pair"
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=120)  # the old loop ignored it for the whole evaluation
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate(timeout=60)
    assert p.returncode == 0, out + err
    assert "final evaluation of" in err and "cut short" in err, err
    state = json.loads((run / "loop.json").read_text())
    assert state["evaluated"] == [] and state["elapsed"] >= 60 * float(minutes) - 1
    newest = max(models.glob("model_*.pt"))
    spec = f"net:{newest}:400"
    done = games_between(load_records([arena]), spec, "random") // 2
    assert done >= 1
    # 3. the same command, its budget used: it rates the checkpoint, playing only the missing pair
    proc = subprocess.run(cmd + ["--eval.pairs", str(done + 1), "--eval.playouts", "400"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "not rated yet" in proc.stderr and "pairs were played by an evaluation cut short" in proc.stderr
    assert json.loads((run / "loop.json").read_text())["evaluated"] == [str(newest)]
    assert games_between(load_records([arena]), spec, "random") == 2 * (done + 1)
    assert json.loads(proc.stdout.strip().splitlines()[-1])["evaluated"] == 1
