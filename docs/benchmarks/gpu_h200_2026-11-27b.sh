#!/bin/bash
# Session 12 device check (issue 33): one command, each step under its own timeout, all output under $OUT.
export PYTHONUNBUFFERED=1
L=$OUT/log.txt
s() { echo "=== $1 t=$(( $(date +%s) - T0 )) s ===" | tee -a $L; }
T0=$(date +%s)
s install
python3 -m pip install -q --no-build-isolation --no-deps -e . >>$L 2>&1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >>$L 2>&1
lscpu | grep -E "Model name|^CPU\(s\)" >>$L
python3 -c "import torch,sys;print('torch',torch.__version__,torch.version.cuda,sys.version.split()[0])" >>$L 2>&1
s selfplay_compiled_populations
timeout 190 python3 -m selfplay.bench.gpucheck --only selfplay --forward compiled --selfplay-seconds 120 >>$L 2>$OUT/selfplay_err.txt
s servers_warm_cache_and_hot_reload
timeout 100 python3 -m selfplay.bench.gpucheck --only servers >>$L 2>&1
s train_padded_compiled_grouped_bn
timeout 110 python3 -m selfplay.bench.gpucheck --only train --train-per-size 64,256 --train-kinds padded_compiled >>$L 2>&1
s loop_gpu_3min
timeout 215 python3 -m selfplay.generation.loop --preset gpu --minutes 3 --dir /tmp/gl --seed 17 >$OUT/loop.txt 2>&1
echo "loop rc=$?" >>$L
tail -c 3000 $OUT/loop.txt >>$L
find /tmp/gl -maxdepth 3 -name "*.json" -size -2M | head -20 | tar czf $OUT/loop_json.tgz -T - 2>/dev/null
s cuda_tests_rest
timeout 90 python3 -m pytest -v -p no:cacheprovider tests/test_cuda.py -k "not canvas and not padded and not hot_reload" >>$L 2>&1
echo "pytest rc=$?" >>$L
s end
