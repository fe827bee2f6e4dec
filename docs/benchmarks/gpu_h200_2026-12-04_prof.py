"""Profile the padded trainer step (session 52 device check): where a step's time goes."""
import sys, tempfile, time, json
import torch
from c4fast.game import parse_sizes
from nets.train import Trainer, TrainConfig, synthetic_window
from nets.canvas import canvas_batch

dev, own, per = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
comp = dev.startswith("cuda")
sizes = list(parse_sizes("saiblo"))
win = synthetic_window(sizes, 0, ownership=own > 0)
cfg = TrainConfig(preset="b3c128nbt", per_size=per, seed=0, device=dev, padded=True, compile=comp, ownership_weight=own)
with tempfile.TemporaryDirectory() as tmp:
    tr = Trainer(cfg, tmp)
    t = time.perf_counter()
    for _ in range(3):
        tr.train_step(win)
    print("warm", round(time.perf_counter() - t, 1), flush=True)
    t = time.perf_counter()
    for _ in range(10):
        tr.train_step(win)
    print(json.dumps({"own": own, "per": per, "step_ms": round((time.perf_counter() - t) * 100, 1)}), flush=True)
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if comp else [])
    with torch.profiler.profile(activities=acts) as p:
        for _ in range(5):
            tr.train_step(win)
    ka = p.key_averages()
    print(ka.table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=60))
    if comp:
        try:
            print(ka.table(sort_by="self_device_time_total", row_limit=20, max_name_column_width=60))
        except Exception as e:
            print(ka.table(sort_by="self_cuda_time_total", row_limit=20, max_name_column_width=60))
