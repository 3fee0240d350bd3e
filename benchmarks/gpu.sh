#!/usr/bin/env bash
# Everything that needs a GPU, in under 10 minutes of one, its figures written to a file:
#   1. training and inference throughput against the tutorial's code on the same GPU (target 10x);
#   2. time to accuracy of the default GPU quick run at 60 s and 120 s (targets 85% and 90%);
#   3. the matmul peak in bf16 and fp32 and the fraction vitviz reaches (printed by throughput.py).
#
#     VITVIZ_DATA=/path/to/data bash benchmarks/gpu.sh [results-file]
#
# The data sets (cifar10-jpeg.zip) must be on the machine: VITVIZ_DATA, default ../shared/data.
# Results go to the file given, else $OUT/gpu-results.txt when $OUT is set, else gpu-results.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-.}/gpu-results.txt}"
export VITVIZ_DATA="${VITVIZ_DATA:-$(cd .. && pwd)/shared/data}"
export PYTHONUNBUFFERED=1
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA GPU here: nothing to run')"
{
  echo "# vitviz GPU benchmarks, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"
  echo "## throughput (tutorial dims)"
  timeout 200 python3 benchmarks/throughput.py --device cuda --steps 200 --warmup 20 --infer-images 10000
  echo "## time to accuracy, default GPU quick run"
  timeout 330 python3 benchmarks/time_to_accuracy.py --device cuda --budgets 60 120
} 2>&1 | tee "$out"
