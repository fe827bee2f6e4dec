"""selfplay.generation.run end to end: real processes, a real CPU inference server, real HDF5 files."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import c4fast
from nets.shards import (
    SCHEMA_VERSION,
    ShardError,
    ShardWriter,
    list_shards,
    planes_of,
    read_shard,
    rebuild_positions,
    validate_shard,
)

from selfplay.generation.worker import first_size_index

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--preset", "tiny", "--games-per-worker", "4", "--full-playouts", "24",
         "--fast-playouts", "8", "--leaves-per-step", "4", "--status-every", "1"]


def run_selfplay(out, *extra, timeout=240):
    cmd = [sys.executable, "-m", "selfplay.generation.run", "--out", str(out), *SMALL, *extra]
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout)


def summary_of(proc):
    return json.loads(proc.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("populations", [1, 2])
def test_small_cpu_run_writes_valid_shards(tmp_path, populations):
    """With 2 populations each worker searches one half of its games while the server
    evaluates the other's leaves (two request slots): the games and shards are as valid."""
    proc = run_selfplay(tmp_path / "d", "--max-games", "6", "--sizes", "6x7,9x10", "--full-probability", "0.5",
                        "--populations", str(populations))
    assert proc.returncode == 0, proc.stderr
    summ = summary_of(proc)
    assert summ["games"] >= 6 and summ["samples"] > 0 and summ["evals_per_s"] > 0
    assert summ["populations"] == populations
    hist = summ["batch_hist"]  # forward batches by size: each at most one population's leaves per worker
    assert sum(hist) > 0 and len(hist) == 14 and sum(hist[5:]) == 0  # 2 workers x 4 games x 4 leaves < 32
    assert "selfplay.generation.run:" in proc.stderr and " games " in proc.stderr  # periodic status line (logging)
    assert summ["config"]["search"]["full_probability"] == 0.5  # the complete config is recorded
    assert summ["config"]["sizes"] == "6x7,9x10"
    shards = list_shards([tmp_path / "d"])
    assert shards and sorted(shards) == sorted(summ["shards"])
    total = 0
    weights = []
    for p in shards:
        info = validate_shard(p)  # schema, policy over legal cells, replayed outcomes
        total += info["samples"]
        with h5py.File(p) as f:
            assert f.attrs["schema_version"] == SCHEMA_VERSION
            assert f.attrs["encoding_version"] == c4fast.ENCODING_VERSION
        data = read_shard(p)
        for key, g in data.items():
            if key == "games":
                continue
            h, w = key
            assert key in [(6, 7), (9, 10)]
            weights.extend(g["policy_weight"].tolist())
            planes = planes_of(g, h, w)
            assert planes.shape == (len(g["ply"]), c4fast.NUM_PLANES, h, w)
            # the stored state rebuilds the exact position that was played
            games = data["games"]
            for i in range(min(5, len(g["ply"]))):
                j = int(np.flatnonzero(games["game_id"] == g["game_id"][i])[0])
                fr, fc = (int(x) for x in games["forbidden"][j])
                moves = [int(c) for c in games["moves"][j, : int(g["ply"][i])]]
                ref = c4fast.Game.from_moves(h, w, None if fr < 0 else (fr, fc), moves)
                np.testing.assert_array_equal(planes[i], ref.planes())
    assert total == summ["samples"]
    assert 0.0 in weights and 1.0 in weights


def test_a_run_with_forks_and_solver_labels_reports_them(tmp_path):
    # The games differ from run to run even with a fixed seed (which game a batched evaluation
    # serves first depends on timing), and the tiny random net's games often end early: each
    # reaches 20 empty cells (fill >= 0.52) with probability ~0.6, so 16 games all missing them
    # has odds ~0.4**16 < 1e-6. (8 games and 16 empty cells, fill >= 0.62, missed once in a
    # suite run.) fp32 `fused`, not `auto`, keeps the forward itself fixed.
    status = tmp_path / "status.json"
    proc = run_selfplay(tmp_path, "--max-games", "16", "--sizes", "6x7", "--workers", "1", "--no-forbidden-cell",
                        "--fork-probability", "1", "--fork-max-fill", "0.8", "--solve-max-empty", "20",
                        "--solve-rescore", "--forward", "fused", "--status-file", str(status))
    assert proc.returncode == 0, proc.stderr
    summ = summary_of(proc)
    last = json.loads(status.read_text())  # the status file's last write holds the final counts
    assert last["final"] is True and last["games"] == summ["games_played"]
    assert [last[k] for k in ("solved_samples", "solve_tries", "rescored_samples")] == \
        [summ[k] for k in ("solved_samples", "solve_tries", "rescored_samples")]
    assert summ["forked_games"] == summ["games_played"] >= 16
    assert 0 < summ["solved_samples"] <= summ["solve_tries"] and summ["solve_nodes"] >= 0
    assert sum(summ["fill_hist"]) == summ["games_played"] and 0 < summ["mean_fill"] <= 1
    solved = 0
    for p in list_shards([tmp_path]):
        validate_shard(p)
        solved += int((read_shard(p)[(6, 7)]["solved_plies"] >= 0).sum())
    # every game played was written (one worker, flushed); rescored samples carry a distance too
    assert solved == summ["solved_samples"] + summ["rescored_samples"]


def test_an_unwritable_status_file_is_warned_about_and_loses_nothing(tmp_path):
    """A status path that cannot be written (here a directory) costs the status, not the run:
    a warning, every game in a valid shard, the summary, no temporary left behind."""
    out, status = tmp_path / "out", tmp_path / "status"
    status.mkdir()
    proc = run_selfplay(out, "--max-games", "4", "--sizes", "6x7", "--workers", "1", "--status-every", "0.2",
                        "--status-file", str(status))
    assert proc.returncode == 0, proc.stderr
    assert f"could not write the final status to {status}" in proc.stderr
    assert proc.stderr.count("could not write the status to") <= 1  # periodic writes (if any ran): once
    summ = summary_of(proc)
    assert summ["games"] == summ["games_played"] >= 4
    assert sum(len(read_shard(p)["games"]["game_id"]) for p in list_shards([out])) == summ["games"]
    assert status.is_dir() and not list(status.iterdir()) and not list(tmp_path.glob("*.tmp"))


@pytest.mark.parametrize("prob,weight,extra", [("0", 0.0, ()), ("1", 1.0, ()),
                                               ("0", 1.0, ("--root-search", "gumbel"))])
def test_fast_searches_carry_zero_policy_weight(tmp_path, prob, weight, extra):
    """... except under Gumbel root search, whose every move has a completed-Q target."""
    proc = run_selfplay(tmp_path, "--max-games", "2", "--sizes", "6x7", "--full-probability", prob,
                        "--workers", "1", *extra)
    assert proc.returncode == 0, proc.stderr
    for p in list_shards([tmp_path]):
        validate_shard(p)
        for key, g in read_shard(p).items():
            if key != "games":
                assert (g["policy_weight"] == weight).all()


def test_killed_worker_keeps_finished_shards_and_the_run_goes_on(tmp_path):
    out = tmp_path / "d"
    status = tmp_path / "status.json"
    cmd = [sys.executable, "-m", "selfplay.generation.run", "--out", str(out), *SMALL, "--sizes", "6x7",
           "--samples-per-shard", "15", "--status-file", str(status)]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    victim = None
    deadline = time.monotonic() + 300
    while victim is None and time.monotonic() < deadline:
        time.sleep(0.2)
        shard_done = out.is_dir() and any(n.endswith(".h5") for n in os.listdir(out))
        if shard_done and status.exists():  # a shard is finished: kill a worker process
            victim = json.loads(status.read_text())["worker_pids"][0]
    assert victim is not None, "no shard appeared"
    os.kill(victim, signal.SIGKILL)
    restarted = False  # no game limit: the run can't finish before it restarts the worker
    while not restarted and time.monotonic() < deadline + 300 and proc.poll() is None:
        time.sleep(0.2)
        try:
            restarted = json.loads(status.read_text())["worker_restarts"] >= 1
        except (OSError, ValueError):
            pass
    proc.send_signal(signal.SIGTERM)  # then a clean stop
    try:
        stdout, stderr = proc.communicate(timeout=600)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the run and its servers and workers
        stdout, stderr = proc.communicate()
        pytest.fail(f"the run did not stop within 600 s of SIGTERM; its log ends:\n{stderr[-4000:]}")
    assert proc.returncode == 0, stderr
    assert f"worker 0 (pid {victim}, incarnation 0) died" in stderr
    summ = json.loads(stdout.strip().splitlines()[-1])
    assert summ["worker_restarts"] >= 1
    shards = list_shards([out])
    assert shards
    for p in shards:
        validate_shard(p)
    assert all(not n.endswith(".tmp") for n in map(str, shards))


SIGNALLED_SUPERVISOR = """
import json, multiprocessing as mp, os, signal, sys, threading, time, types
sys.path[:0] = [sys.argv[1], os.path.dirname(sys.argv[1])]  # tests/ and the checkout
import _server_workers
from c4fast.runtime import ignore_interrupts, raise_on_interrupt
from selfplay.generation.run import WorkerSupervisor

armed = False  # the storm's signals reach the run's handler only inside the guarded receive below


def main():
    global armed
    ctx = mp.get_context("spawn")
    gate = sys.argv[2]
    specs = [types.SimpleNamespace(index=w, restart=0, messages=150, size=300_000, gate=gate) for w in range(2)]
    sup = WorkerSupervisor(ctx, specs, lambda w: None, ctx.Event(), max_restarts=0)
    sup._target = _server_workers.chatty_worker
    raise_on_interrupt()  # the run's handler: KeyboardInterrupt, or held back inside deferred_interrupts
    run_handler = signal.getsignal(signal.SIGINT)

    def handler(signum, frame):  # one signal per arming: none can land outside the try below
        global armed
        if armed:
            armed = False
            run_handler(signum, frame)

    sup.start()
    while not all(sup.inc_stats.get((w, 0), {}).get("games") for w in range(2)):
        sup.receive(0.2)  # both workers started and reporting: no signal can hit a start-up
    signal.signal(signal.SIGINT, handler)
    done = threading.Event()

    def pester():  # SIGINT every 0.7 ms to this process (handled in the main thread)
        while not done.is_set():
            time.sleep(0.0007)
            os.kill(os.getpid(), signal.SIGINT)

    pests = threading.Thread(target=pester)
    pests.start()
    open(gate, "w").close()  # the workers send the rest now
    interrupts = 0
    while sup.channels:
        try:
            armed = True
            sup.receive(0.2)
            armed = False
        except KeyboardInterrupt:
            armed = False
            interrupts += 1
    ignore_interrupts()
    done.set()
    pests.join()
    sup.join(10)
    print(json.dumps({"interrupts": interrupts, "games": [sup.inc_stats[(w, 0)]["games"] for w in range(2)],
                      "exitcodes": [p.exitcode for p in sup.procs]}))


if __name__ == "__main__":
    main()
"""


def test_signals_during_worker_reports_lose_no_message(tmp_path):
    """A signal (made a KeyboardInterrupt) between a report's length and its body used to
    leave the shared queue out of step: the clean-up after SIGTERM raised, and the run then
    hung at exit waiting for its servers. Reports are now read with signals held back, each
    worker on its own pipe: hundreds of interrupts while reading lose no message. (The
    storm starts once both workers report, and reaches the run's handler only inside the
    supervisor's receive, so the script itself and the workers' start-up are never hit.)"""
    script = tmp_path / "sup.py"
    script.write_text(SIGNALLED_SUPERVISOR)
    proc = subprocess.run([sys.executable, str(script), str(ROOT / "tests"), str(tmp_path / "gate")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["games"] == [150, 150] and out["exitcodes"] == [0, 0]
    assert out["interrupts"] > 0  # the signals did arrive while it read


def test_a_writer_killed_mid_write_leaves_no_shard(tmp_path):
    code = (
        "import os, sys, numpy as np, h5py\n"
        "f = h5py.File(sys.argv[1] + '/x.h5.tmp', 'w')\n"
        "f.create_dataset('a', data=np.zeros(100000))\n"
        "os._exit(9)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], check=False)
    assert (tmp_path / "x.h5.tmp").exists()
    assert list_shards([tmp_path]) == []
    # a truncated/corrupt .h5 is reported clearly
    bad = tmp_path / "bad.h5"
    bad.write_bytes(b"\x89HDF\r\n\x1a\n" + b"\0" * 100)
    with pytest.raises(ShardError, match="bad.h5"):
        validate_shard(str(bad))


def test_writer_roundtrip_and_schema_checks(tmp_path):
    g = c4fast.Game.from_moves(6, 7, None, [3, 3, 4, 4, 5, 5, 6])
    rec = c4fast.Game.from_moves(6, 7, None, [3, 3]).state[0]
    pol = np.zeros((6, 7), np.float32)
    pol[0, 2] = 1.0
    sample = {"stones": rec["stones"], "forbidden": rec["forbidden"], "last": rec["last"],
              "ply": 2, "policy": pol, "policy_weight": 1.0, "outcome": 0,
              "root_wdl": np.array([0.5, 0.2, 0.3], np.float32), "game_id": 7, "model_version": 3}
    w = ShardWriter(str(tmp_path), "t", samples_per_shard=100)
    w.add_game({"game_id": 7, "height": 6, "width": 7, "forbidden": (-1, -1), "moves": g.moves,
                "num_moves": len(g.moves), "result": 1, "model_version": 3}, [sample])
    path = w.flush()
    assert path.endswith("t_00000.h5") and not os.path.exists(path + ".tmp")
    info = validate_shard(path)
    assert info["samples"] == 1 and info["games"] == 1
    recs = rebuild_positions(read_shard(path)[(6, 7)], 6, 7)
    assert recs[0]["hash"] == rec["hash"]
    # a shard written under encoding version 1 reads the same (positions are stored, the
    # planes are rebuilt in the newest encoding); an unknown encoding version is refused
    with h5py.File(path, "a") as f:
        f.attrs["encoding_version"] = 1
    assert rebuild_positions(read_shard(path)[(6, 7)], 6, 7)[0]["hash"] == rec["hash"]
    with h5py.File(path, "a") as f:
        f.attrs["encoding_version"] = 7
    with pytest.raises(ShardError, match="encoding version 7.*reads \\[1, 2\\]"):
        read_shard(path)
    # another schema version is an error naming the version
    with h5py.File(path, "a") as f:
        f.attrs["encoding_version"] = c4fast.ENCODING_VERSION
        f.attrs["schema_version"] = 99
    with pytest.raises(ShardError, match="99"):
        read_shard(path)


@pytest.mark.parametrize("flags,needle", [
    (["--max-games", "-1"], "--max-games"),
    (["--workers", "-1"], "--workers"),
    (["--games-per-worker", "-3"], "--games-per-worker"),
    (["--preset", "nope"], "nope"),
    (["--model", "/nonexistent/model.pt"], "does not exist"),
    (["--sizes", "3x7"], "3x7"),
    (["--full-playouts", "10", "--fast-playouts", "20"], "fast_playouts"),
    (["--gpus", "1"], "CUDA"),
])
def test_bad_flags_exit_2_and_write_nothing(tmp_path, flags, needle):
    if flags[:2] == ["--gpus", "1"]:
        import torch

        if torch.cuda.is_available():
            pytest.skip("a GPU is present")
    out = tmp_path / "out"
    proc = subprocess.run([sys.executable, "-m", "selfplay.generation.run", "--out", str(out), *flags],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0]
    assert not out.exists()


def test_incompatible_model_and_unwritable_out(tmp_path):
    bad = tmp_path / "model.pt"
    bad.write_bytes(b"not a checkpoint")
    proc = subprocess.run([sys.executable, "-m", "selfplay.generation.run", "--out", str(tmp_path / "o"),
                           "--model", str(bad)], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "model.pt" in proc.stderr
    afile = tmp_path / "file"
    afile.write_text("x")
    proc = subprocess.run([sys.executable, "-m", "selfplay.generation.run", "--out", str(afile / "sub")],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "not writable" in proc.stderr


def test_help_lists_every_flag():
    proc = subprocess.run([sys.executable, "-m", "selfplay.generation.run", "--help"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0
    for flag in ("--gpus", "--workers", "--games-per-worker", "--model", "--out", "--max-games",
                 "--max-samples", "--time", "--preset", "--seed", "--sizes"):
        assert flag in proc.stdout


@settings(deadline=None, max_examples=200)
@given(workers=st.integers(1, 40), num_sizes=st.integers(1, 16), tag=st.text(max_size=8))
def test_workers_start_spread_over_the_sizes(workers, num_sizes, tag):
    """Every size is the first of floor or ceil(workers / sizes) workers, and workers that
    start on neighbouring sizes are as far apart as the counts allow."""
    starts = [first_size_index(i, workers, num_sizes, tag) for i in range(workers)]
    assert all(0 <= k < num_sizes for k in starts)
    counts = [starts.count(k) for k in range(num_sizes)]
    assert max(counts) - min(counts) <= 1 and sum(counts) == workers
    if workers <= num_sizes:  # distinct, and cyclic gaps of floor or ceil(num_sizes / workers)
        ring = sorted(starts)
        gaps = [(ring[(j + 1) % workers] - ring[j]) % num_sizes or num_sizes for j in range(workers)]
        assert set(gaps) <= {num_sizes // workers, -(-num_sizes // workers)}


def test_first_size_index_rejects_bad_arguments():
    for args in ((8, 8, 16), (-1, 8, 16), (0, 1, 0)):
        with pytest.raises(ValueError):
            first_size_index(*args)


def test_forward_auto_measures_serves_and_reports_the_engine_and_its_share_of_the_peak(tmp_path):
    """`--forward auto` on the CPU: the server times the engines this CPU has, serves the
    fastest that passes its self-check (the choice is logged and cached per machine), and
    the summary says which, its precision, the machine's peaks and the fractions of them."""
    from nets.precision import AUTO_CANDIDATES, AUTO_MAX_STARTS, PRECISION_OF, cpu_info

    env = dict(os.environ, C4FAST_CACHE_DIR=str(tmp_path / "cache"))
    cmd = [sys.executable, "-m", "selfplay.generation.run", "--out", str(tmp_path / "d"), *SMALL,
           "--max-games", "2", "--sizes", "9x9", "--forward", "auto"]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summ = summary_of(proc)
    assert summ["forward"] in AUTO_CANDIDATES and summ["precision"] == PRECISION_OF[summ["forward"]]
    assert summ["precision"] in cpu_info().precisions
    assert set(summ["peak_gflops"]) == set(cpu_info().precisions) and summ["net_gflops"] > 0
    peak = summ["peak_gflops"][summ["precision"]]
    assert summ["of_peak"] == pytest.approx(summ["net_gflops"] / peak, abs=1e-3)
    assert summ["of_best_peak"] == pytest.approx(summ["net_gflops"] / max(summ["peak_gflops"].values()), abs=1e-3)
    assert "CPU forward auto: " + summ["forward"] in proc.stderr
    # a loaded machine may cut the 5 s choice short: then each later start goes on from the
    # cached, unfinished entry (logged with its start's number) until it is complete or has
    # had AUTO_MAX_STARTS starts; from then on every start reuses the cached choice
    for start in range(2, AUTO_MAX_STARTS + 2):
        cache = json.loads((tmp_path / "cache" / "forward.json").read_text())
        [entry] = cache.values()
        assert entry["kind"] == summ["forward"] and entry["starts"] == start - 1
        final = entry["complete"] or entry["starts"] >= AUTO_MAX_STARTS
        assert ("cut short by the budget; start %d)" % (start - 1) in proc.stderr) == (not entry["complete"])
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=300, env=env)
        assert proc.returncode == 0, proc.stderr[-3000:]
        summ = summary_of(proc)
        assert summ["forward"] in AUTO_CANDIDATES and "CPU forward auto: " + summ["forward"] in proc.stderr
        if final:
            assert "from the cache" in proc.stderr and summ["forward"] == entry["kind"]
            break
        assert "from the cache" not in proc.stderr
