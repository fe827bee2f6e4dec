"""Crash and signal tests with real processes: nothing orphaned, leaked, lost or duplicated.

Every test waits for conditions (a shard, a status file, a process gone), never for a
fixed time, so it passes on a slow or loaded machine.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from nets.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from nets.config import get_preset
from nets.model import build_model
from _procs import alive, leaked_shm, shm_snapshot, wait_for
from nets.shards import ShardValueError, ShardWriter, list_shards, read_shard, validate_shard

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--preset", "tiny", "--games-per-worker", "4", "--full-playouts", "16", "--fast-playouts", "4",
         "--leaves-per-step", "4", "--sizes", "6x7", "--status-every", "0.5", "--samples-per-shard", "10"]


_STARTED: list[subprocess.Popen] = []


@pytest.fixture(autouse=True)
def no_leftover_runs():
    """Whatever a test does (or fails to do), its runs end with it."""
    yield
    while _STARTED:
        p = _STARTED.pop()
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.communicate(timeout=60)


def start_run(tmp_path, *extra):
    """selfplay.generation.run in its own process group, capped at 15 minutes in any case."""
    status = tmp_path / "status.json"
    cmd = [sys.executable, "-m", "selfplay.generation.run", "--out", str(tmp_path / "d"), *SMALL,
           "--status-file", str(status), "--time", "900", *extra]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    _STARTED.append(proc)
    return proc, status


def first_shard(d: Path) -> bool:
    return d.is_dir() and any(n.endswith(".h5") for n in os.listdir(d))


def pids_of(status: Path) -> list[int]:
    st = json.loads(status.read_text())
    return st["worker_pids"] + st["server_pids"]


def game_ids(out: Path) -> list[int]:
    ids = []
    for p in list_shards([out]):
        ids.extend(int(x) for x in read_shard(p)["games"]["game_id"])
    return ids


def samples_on_disk(out: Path) -> int:
    return sum(validate_shard(p)["samples"] for p in list_shards([out]))


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_a_signal_to_the_group_is_a_clean_stop(tmp_path, sig):
    """SIGTERM (timeout, systemd), SIGHUP (a closed terminal) and SIGINT to the whole
    process group: every finished game reaches disk, nothing leaks."""
    before = shm_snapshot()
    proc, status = start_run(tmp_path)
    wait_for(lambda: first_shard(tmp_path / "d") and status.exists(), what="a first shard")
    pids = pids_of(status)
    os.killpg(proc.pid, sig)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["samples"] == samples_on_disk(tmp_path / "d")  # no finished game lost
    ids = game_ids(tmp_path / "d")
    assert len(ids) == len(set(ids)) == summary["games"]
    wait_for(lambda: not any(alive(p) for p in pids), 60, "the children to exit")
    wait_for(lambda: not leaked_shm(before), 60, "the shared memory to be released")
    assert not [n for n in os.listdir(tmp_path / "d") if n.endswith(".tmp")]


def test_kill9_of_the_run_leaves_no_orphan_and_no_shared_memory(tmp_path):
    before = shm_snapshot()
    proc, status = start_run(tmp_path)
    wait_for(lambda: first_shard(tmp_path / "d") and status.exists(), what="a first shard")
    pids = pids_of(status)
    proc.kill()
    proc.communicate(timeout=60)
    wait_for(lambda: not any(alive(p) for p in pids), 120, "server and workers to die with their parent")
    wait_for(lambda: not leaked_shm(before), 60, "the shared memory to be released")
    for p in list_shards([tmp_path / "d"]):
        validate_shard(p)
    # the directory is free again, and a resumed run adds games without duplicating any
    n_before = len(game_ids(tmp_path / "d"))
    proc2, _ = start_run(tmp_path, "--max-games", "4")
    out, err = proc2.communicate(timeout=300)
    assert proc2.returncode == 0, err
    ids = game_ids(tmp_path / "d")
    assert len(ids) >= n_before + 4 and len(ids) == len(set(ids))


def test_kill9_of_the_server_ends_the_run_with_an_error(tmp_path):
    before = shm_snapshot()
    proc, status = start_run(tmp_path)
    wait_for(lambda: status.exists(), what="the first status")
    st = json.loads(status.read_text())
    os.kill(st["server_pids"][0], signal.SIGKILL)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1
    summary = json.loads(out.strip().splitlines()[-1])
    assert "server" in summary["error"]
    wait_for(lambda: not any(alive(p) for p in st["worker_pids"]), 60, "workers to exit")
    wait_for(lambda: not leaked_shm(before), 60, "the shared memory to be released")
    for p in list_shards([tmp_path / "d"]):
        validate_shard(p)


def test_a_worker_that_keeps_failing_ends_the_run(tmp_path):
    """The shard directory disappears under the run (a lost disk): workers fail on every
    write; restarts are bounded and the run exits 1 with the reason."""
    proc, status = start_run(tmp_path, "--max-restarts", "2", "--samples-per-shard", "1")
    d = tmp_path / "d"
    wait_for(lambda: d.is_dir() and any(n.endswith(".h5") for n in os.listdir(d)), what="a first shard")
    os.rename(tmp_path / "d", tmp_path / "gone")  # atomic, unlike deleting while workers write
    (tmp_path / "d").write_text("not a directory any more")
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    summary = json.loads(out.strip().splitlines()[-1])
    # the worker that gave up was restarted exactly --max-restarts times; the other one may have
    # been between restarts when the run stopped, so only a lower bound holds for the total
    assert "died 3 times" in summary["error"] and "--max-restarts 2" in summary["error"]
    assert summary["worker_restarts"] >= 2


def test_a_run_whose_writes_failed_once_ends_with_the_error_and_counts_what_the_shards_hold(tmp_path):
    """The shard directory is replaced by a file for a moment (a failed write, as root too):
    a worker fails, is restarted and the run goes on once the directory is back; it still
    ends non-zero with the worker's error, and its game count is what its shards hold."""
    proc, status = start_run(tmp_path, "--samples-per-shard", "1")
    d = tmp_path / "d"
    wait_for(lambda: first_shard(d) and status.exists(), what="a first shard")
    os.rename(d, tmp_path / "away")
    d.write_text("not a directory for a moment")
    wait_for(lambda: json.loads(status.read_text())["worker_restarts"] >= 1, what="a failed worker's restart")
    d.unlink()
    os.rename(tmp_path / "away", d)
    before = set(list_shards([d]))
    wait_for(lambda: set(list_shards([d])) - before, what="a shard written after the failure")
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    summary = json.loads(out.strip().splitlines()[-1])
    # the first incarnation fails; on a loaded machine its restart may fail too before the
    # directory is back (the summary names the last failure)
    failed = re.compile(r"worker \d \(restart \d+\) failed: (FileExistsError|NotADirectoryError)")
    assert failed.search(summary["error"]), summary["error"]
    assert failed.search(err)  # logged when it happened
    shards = list_shards([d])
    assert sorted(summary["shards"]) == sorted(map(str, shards))
    assert summary["games"] == sum(len(read_shard(p)["games"]["game_id"]) for p in shards)
    assert summary["samples"] == samples_on_disk(d)
    assert summary["games_played"] >= summary["games"]


def test_a_second_run_on_the_same_directory_is_refused(tmp_path):
    proc, status = start_run(tmp_path)
    try:
        wait_for(lambda: status.exists(), what="the first run to start")
        other = subprocess.run([sys.executable, "-m", "selfplay.generation.run", "--out", str(tmp_path / "d"), *SMALL],
                               cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert other.returncode == 2 and "in use by pid" in other.stderr
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.communicate(timeout=300)


def test_kill9_of_the_loop_takes_its_children_and_the_same_command_resumes(tmp_path):
    run = tmp_path / "run"
    cmd = [sys.executable, "-m", "selfplay.generation.loop", "--preset", "dummy", "--dir", str(run), "--sizes", "6x7",
           "--minutes", "30"]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    _STARTED.append(proc)
    status = run / "logs" / "selfplay_status.json"
    wait_for(lambda: list((run / "train" / "models").glob("model_*.pt")) and status.exists(),
             what="a first checkpoint")
    children = pids_of(status)
    with open(run / "logs" / "loop.log") as f:
        started = [int(line.split("(pid ")[1].split(")")[0]) for line in f if "started " in line]
    proc.kill()
    proc.communicate(timeout=60)
    wait_for(lambda: not any(alive(p) for p in started + children), 180, "the loop's children to stop")
    again = subprocess.run([*cmd[:-2], "--minutes", "30", "--max-evaluations", "1"], cwd=ROOT,
                           capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout.strip().splitlines()[-1])
    assert summary["evaluated"] >= 1
    ids = game_ids(run / "data")
    assert len(ids) == len(set(ids))


def test_poisoned_shards_are_rejected_and_skipped_by_name(tmp_path):
    import c4fast

    rec = c4fast.Game.from_moves(6, 7, None, [3, 3]).state[0]
    g = c4fast.Game.from_moves(6, 7, None, [3, 3, 4, 4, 5, 5, 6])

    def write(name, policy_value, outcome=0):
        pol = np.zeros((6, 7), np.float32)
        pol[0, 2] = policy_value
        w = ShardWriter(str(tmp_path), name, samples_per_shard=100)
        w.add_game({"game_id": 1, "height": 6, "width": 7, "forbidden": (-1, -1), "moves": g.moves,
                    "num_moves": len(g.moves), "result": 1, "model_version": 0},
                   [{"stones": rec["stones"], "forbidden": rec["forbidden"], "last": rec["last"], "ply": 2,
                     "policy": pol, "policy_weight": 1.0, "outcome": outcome,
                     "root_wdl": np.array([0.5, 0.2, 0.3], np.float32), "game_id": 1, "model_version": 0}])
        return w.flush()

    nan = write("nan", np.nan)
    with pytest.raises(ShardValueError, match="nan_00000.h5.*NaN"):
        validate_shard(nan)
    with pytest.raises(ShardValueError):
        read_shard(nan)
    bad_outcome = write("outcome", 1.0, outcome=7)
    with pytest.raises(ShardValueError, match="outcome"):
        read_shard(bad_outcome)
    good = write("good", 1.0)
    from nets.replay import ReplayWindow

    warnings = []
    window = ReplayWindow()
    window.warn = warnings.append
    window.update(list_shards([tmp_path]))
    assert window.total_samples == 1  # only the good shard
    assert any("nan_00000.h5" in w for w in warnings) and any("outcome_00000.h5" in w for w in warnings)
    assert read_shard(good)[(6, 7)]["policy_weight"].tolist() == [1.0]


def test_a_shard_with_the_removed_surprise_field_still_reads(tmp_path):
    """Shards written while policy-surprise weighting existed (d99ce20..0f5c532) hold an
    extra ``surprise`` dataset; schema 1 readers and the validator ignore it, so old runs
    keep training. New shards do not write it."""
    import c4fast

    g = c4fast.Game.from_moves(6, 7, None, [3, 3, 4, 4, 5, 5, 6])
    w = ShardWriter(str(tmp_path), "old", samples_per_shard=100)
    samples = []
    replay = c4fast.Game(6, 7)
    for col in g.moves:
        rec = replay.state[0]
        pol = np.zeros((6, 7), np.float32)
        pol[int(rec["top"][col]), col] = 1.0
        samples.append({"stones": rec["stones"].copy(), "forbidden": rec["forbidden"].copy(),
                        "last": rec["last"].copy(), "ply": int(rec["ply"]), "policy": pol, "policy_weight": 1.0,
                        "outcome": 0 if rec["ply"] % 2 == 0 else 2, "root_wdl": np.ones(3, np.float32) / 3,
                        "game_id": 1, "model_version": 0})
        replay.play(col)
    w.add_game({"game_id": 1, "height": 6, "width": 7, "forbidden": (-1, -1), "moves": g.moves,
                "num_moves": len(g.moves), "result": 1, "model_version": 0}, samples)
    path = w.flush()
    with h5py.File(path, "a") as f:
        assert "surprise" not in f["samples/h6w7"]
        f["samples/h6w7"].create_dataset("surprise", data=np.full(7, 0.5, np.float32))  # as written then
    data = read_shard(path)[(6, 7)]
    assert "surprise" not in data and len(data["ply"]) == 7
    assert validate_shard(path)["samples"] == 7


def test_the_trainer_never_saves_a_non_finite_net(tmp_path):
    from nets.train import NonFiniteLossError, TrainConfig, Trainer

    tr = Trainer(TrainConfig(preset="tiny"), str(tmp_path))
    with torch.no_grad():
        next(tr.model.parameters()).fill_(float("nan"))
    with pytest.raises(NonFiniteLossError, match="non-finite"):
        tr.save()
    assert not (tmp_path / "train_state.pt").exists() and not list(tmp_path.glob("models/*.pt"))


def test_a_nan_checkpoint_is_refused_at_load(tmp_path):
    model = build_model(get_preset("tiny"))
    with torch.no_grad():
        next(model.parameters()).fill_(float("nan"))
    path = tmp_path / "model_00000001.pt"
    save_checkpoint(path, model, get_preset("tiny"), 1)
    with pytest.raises(CheckpointError, match="non-finite"):
        load_checkpoint(path)
    proc = subprocess.run([sys.executable, "-m", "selfplay.generation.run", "--out", str(tmp_path / "o"),
                           "--model", str(path), "--preset", "tiny"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2 and "non-finite" in proc.stderr


def test_a_second_trainer_on_the_same_directory_is_refused(tmp_path):
    from c4fast.runtime import DirLock

    lock = DirLock(tmp_path / "t", "nets.train")
    proc = subprocess.run([sys.executable, "-m", "nets.train", "--follow", str(tmp_path / "f"), "--out",
                           str(tmp_path / "t"), "--preset", "tiny", "--max-wait", "1"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    lock.release()
    assert proc.returncode == 1 and "in use by pid" in proc.stderr


SWALLOWED = """
import ctypes, os, signal, sys, threading
from c4fast.runtime import check_interrupt, forget_handled_interrupt, raise_on_interrupt
from selfplay.evaluation.arena import play_match

raise_on_interrupt()

@ctypes.CFUNCTYPE(None)
def callback():  # like Numba's LLVM cache hook: C calls Python, and drops its exceptions
    os.kill(os.getpid(), signal.SIGINT)
    for _ in range(1000):
        pass

callback()
print("went on", flush=True)
raised = []
def other_thread():  # signals belong to the main thread: an evaluation thread runs on
    try:
        check_interrupt()
    except KeyboardInterrupt:
        raised.append(True)
t = threading.Thread(target=other_thread)
t.start()
t.join()
assert not raised, "check_interrupt raised outside the main thread"
try:
    play_match("random", "random", pairs=3, sizes=[(6, 7)], forbidden=False)
except KeyboardInterrupt as e:
    print("stopped by", e, flush=True)
forget_handled_interrupt()
check_interrupt()  # handled: no longer raises
print("clean", flush=True)
"""


def test_a_signal_swallowed_by_a_c_callback_still_stops_the_match():
    """A SIGINT that lands inside a ctypes callback (Numba compiling, in the loop's CI failure)
    is dropped by C with "Exception ignored"; the pending flag stops the next game anyway."""
    p = subprocess.run([sys.executable, "-c", SWALLOWED], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert p.stdout.split() == ["went", "on", "stopped", "by", "SIGINT", "clean"], p.stdout + p.stderr
    assert "Exception ignored" in p.stderr


MID_WRITE = """
import os, signal, sys
import torch
from c4fast.runtime import atomic_write, check_interrupt, deferred_interrupts, raise_on_interrupt

raise_on_interrupt()
path = sys.argv[1]
state = {"w": torch.arange(300_000, dtype=torch.float32)}

class Signalling:  # torch.save's C++ writer calls write(): SIGINT arrives inside that callback
    def __init__(self, f):
        self.f, self.sent = f, False
    def write(self, b):
        if not self.sent:
            self.sent = True
            os.kill(os.getpid(), signal.SIGTERM)
        return self.f.write(b)
    def flush(self):
        self.f.flush()

try:
    atomic_write(path, lambda f: torch.save(state, Signalling(f)))
    print("not interrupted", flush=True)
except KeyboardInterrupt as e:
    print("interrupted after the write by", e, flush=True)
assert torch.equal(torch.load(path)["w"], state["w"])
try:  # a block that fails keeps its own error; the signal is still pending for check_interrupt
    with deferred_interrupts():
        os.kill(os.getpid(), signal.SIGINT)
        raise ValueError("the block's own error")
except ValueError as e:
    print("kept", e, flush=True)
try:
    check_interrupt()
except KeyboardInterrupt as e:
    print("pending", e, flush=True)
"""


def test_a_signal_during_an_atomic_write_is_raised_once_the_file_is_complete(tmp_path):
    """SIGTERM inside torch.save's writer callback (what aborted a trainer stopped by the
    loop mid-checkpoint): the checkpoint is written whole, then the interrupt is raised."""
    path = tmp_path / "model.pt"
    proc = subprocess.run([sys.executable, "-c", MID_WRITE, str(path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.splitlines() == ["interrupted after the write by SIGTERM", "kept the block's own error",
                                        "pending SIGINT"], proc.stdout + proc.stderr
    assert [p.name for p in tmp_path.iterdir()] == ["model.pt"]  # no temp file left
