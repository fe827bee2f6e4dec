#!/bin/bash
# Session 52 device check (issue 33): one command, each step under its own timeout, all output under $OUT.
export PYTHONUNBUFFERED=1
L=$OUT/log.txt
s() { echo "=== $1 t=$(( $(date +%s) - T0 )) s ===" | tee -a $L; }
T0=$(date +%s)
s install
python3 -m pip install -q --no-build-isolation --no-deps -e . >>$L 2>&1 || tail -20 $L
git log --oneline -1 >>$L 2>&1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >>$L 2>&1
lscpu | grep -E "Model name|^CPU\(s\)" >>$L
python3 -c "import torch,sys;print('torch',torch.__version__,torch.version.cuda,sys.version.split()[0])" >>$L 2>&1
s loop_gpu_4min
( while sleep 5; do echo "$(( $(date +%s) - T0 )) $(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader)"; done ) >$OUT/smi.txt 2>&1 &
SMI=$!
( while sleep 15; do tar czf /tmp/l.tgz -C /tmp/gl logs 2>/dev/null && mv /tmp/l.tgz $OUT/gl_logs.tgz; done ) &
TARL=$!
( sleep 170; top -bn1 -w 200 | head -30 >$OUT/top.txt ) &
LT0=$(date +%s)
timeout -s INT -k 25 285 python3 -m selfplay.generation.loop --preset gpu --minutes 4 --dir /tmp/gl --seed 17 >$OUT/loop.txt 2>&1
echo "loop rc=$? ran $(( $(date +%s) - LT0 )) s" | tee -a $L
kill $SMI $TARL 2>/dev/null
pkill -f "selfplay.generation" ; pkill -f "nets.train"; sleep 2; pkill -9 -f "selfplay.generation"; pkill -9 -f "nets.train"
ps aux | grep -c python >>$L
(cd /tmp/gl && find . -maxdepth 3 \( -name "*.json" -o -name "*.log" \) -size -4M | tar czf $OUT/gl_logs.tgz -T -) 2>>$L
tail -c 2500 $OUT/loop.txt >>$L
s train_bench_padded_compiled_ownership_64
timeout 110 python3 -m nets.train --bench --device cuda --preset b3c128nbt --padded --compile --ownership-weight 1.5 --per-size 64 --steps 30 >>$L 2>&1
echo "rc=$?" >>$L
s cuda_tests_new
timeout 120 python3 -m pytest -v -p no:cacheprovider tests/test_cuda.py -k "warm_up or synchronises" >>$L 2>&1
echo "pytest rc=$?" >>$L
s end
# ---- part 2 (a second command, 269 s) ----
# Session 52 second device check: where the padded compiled trainer step's time goes, with and without the ownership head.
export PYTHONUNBUFFERED=1 PYTHONPATH=.
L=$OUT/log.txt
s() { echo "=== $1 t=$(( $(date +%s) - T0 )) s ===" | tee -a $L; }
T0=$(date +%s)
s install
python3 -m pip install -q --no-build-isolation --no-deps -e . >>$L 2>&1 || tail -20 $L
s prof_own0_64
timeout 100 python3 docs/benchmarks/gpu_h200_2026-12-04_prof.py cuda 0 64 >$OUT/prof_own0_64.txt 2>&1; echo "rc=$?" >>$L
s prof_own15_64
timeout 100 python3 docs/benchmarks/gpu_h200_2026-12-04_prof.py cuda 1.5 64 >$OUT/prof_own15_64.txt 2>&1; echo "rc=$?" >>$L
s prof_own15_256
timeout 105 python3 docs/benchmarks/gpu_h200_2026-12-04_prof.py cuda 1.5 256 >$OUT/prof_own15_256.txt 2>&1; echo "rc=$?" >>$L
s end
grep -h step_ms $OUT/prof_*.txt
