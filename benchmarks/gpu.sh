#!/usr/bin/env bash
# Everything that needs a GPU, in under 10 minutes of one, every figure in one file:
#   1. training and inference throughput against the tutorial's code on the same GPU (target 10x), with the
#      matmul peak in bf16 and fp32 and the fraction vitviz reaches (printed by throughput.py);
#   2. time to accuracy of the default GPU quick run at 60 s and 120 s (targets 85% and 90%), with data;
#   3. `vitviz faithfulness` on 2,000 CIFAR-10 test images, sharded over every GPU by torchrun (NCCL), with data.
#
#     bash benchmarks/gpu.sh [--data FILE_OR_FOLDER] [--synthetic] [results-file]
#
# Where CIFAR-10 comes from, first that applies:
#   --synthetic         no data set: throughput alone, on random CIFAR-sized images (section 2 is skipped);
#   --data PATH         cifar10-jpeg.zip (or a folder with train/<class>/ and test/<class>/) carried to the machine;
#   VITVIZ_DATA         a folder holding cifar10-jpeg.zip (default ../shared/data, where it exists);
#   otherwise           torchvision downloads CIFAR-10 (needs internet); without internet the script says so
#                       and falls back to --synthetic.
# Results go to the file given, else $OUT/gpu-results.txt when $OUT is set, else ./gpu-results.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
data="" synthetic=0 out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --data) data="$2"; shift 2 ;;
    --synthetic) synthetic=1; shift ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) out="$1"; shift ;;
  esac
done
out="${out:-${OUT:-.}/gpu-results.txt}"
export PYTHONUNBUFFERED=1 GRADIO_ANALYTICS_ENABLED=False
python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 'no CUDA GPU here: nothing to run')"

if [ "$synthetic" = 0 ] && [ -z "$data" ]; then
  shared="${VITVIZ_DATA:-$(cd .. && pwd)/shared/data}"
  if [ -e "$shared/cifar10-jpeg.zip" ] || [ -d "$shared/cifar10" ]; then
    data="$shared"
  elif ! timeout 240 python3 -c "from vitviz.data.datasets import load_dataset; load_dataset('cifar10')" >/dev/null 2>&1; then
    echo "CIFAR-10 could not be found or downloaded here: throughput alone, on random images" | tee "$out"
    synthetic=1
  fi
fi
if [ -n "$data" ]; then
  export VITVIZ_DATA="$data"  # a folder, or the zip itself: vitviz reads either
fi

{
  echo "# vitviz GPU benchmarks, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  python3 -c "import torch; print('torch', torch.__version__, 'CUDA', torch.version.cuda)"
  echo "## throughput (tutorial dims)"
  if [ "$synthetic" = 1 ]; then
    timeout 200 python3 benchmarks/throughput.py --device cuda --steps 50 --rounds 4 --warmup 20 --synthetic 20000 --infer-images 10000
  else
    timeout 200 python3 benchmarks/throughput.py --device cuda --steps 50 --rounds 4 --warmup 20 --infer-images 10000
    echo "## time to accuracy, default GPU quick run"
    timeout 330 python3 benchmarks/time_to_accuracy.py --device cuda --budgets 60 120
    echo "## faithfulness, 2000 CIFAR-10 test images, every map, $(nvidia-smi -L | wc -l) GPU(s)"
    start=$(date +%s)
    timeout 240 torchrun --nproc_per_node "$(nvidia-smi -L | wc -l)" -m vitviz faithfulness --model cifar10 \
      --dataset cifar10 --images 2000 --batch 250 --out "$(dirname "$out")/faithfulness-gpu" || echo "(stopped: see above)"
    echo "faithfulness: $(( $(date +%s) - start )) s, start-up included"
  fi
} 2>&1 | tee -a "$out"
