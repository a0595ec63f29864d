#!/usr/bin/env bash
# The prepared call on a lent GPU machine (../shared/GPU.md): every part under a deadline, each
# writing its results under $OUT as it goes, so a part cut short keeps what it measured.
#
#   bash benchmarks/gpu_call.sh 570        # seconds the whole call may take (default 585)
#
# Run from the repository root with `.whl/` (keras, keras-hub and their missing dependencies as
# wheels) and benchmarks/accelerator_inputs.npz (`accelerator.py --prepare`) carried.
# The parts, most wanted first: the cuDNN attention forms, the fine-tuning call paths (with and
# without XLA's command buffers), the training works with dropout on beside the fastest peers
# (transformers eager is never the fastest there: benchmarks/README.md), then long context.
set -u
budget=${1:-585}
out=${OUT:-/tmp/gpu_out}
mkdir -p "$out"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=$PWD:/tmp/site KERAS_BACKEND=jax PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$out/facts.txt" 2>&1

left() { echo $((budget - SECONDS)); }
part() {  # part NAME SECONDS COMMAND...: at most SECONDS, never past the budget
    local name=$1 limit=$2
    shift 2
    ((limit > $(left) - 5)) && limit=$(($(left) - 5))
    if ((limit < 20)); then
        echo "== $name: skipped (${limit}s left)" | tee -a "$out/log.txt"
        return
    fi
    echo "== $name (at ${SECONDS}s, up to ${limit}s)" | tee -a "$out/log.txt"
    timeout "$limit" "$@" 2>&1 | grep -v "^W0000\|^I0000" | tee -a "$out/log.txt" | tail -40
}

part cudnn_attention 80 python3 benchmarks/cudnn_attention.py --output "$out/cudnn_attention.json"
part device_profile 100 python3 benchmarks/device_profile.py --no_trace --libraries bertlayers --part finetune \
    --output "$out/device_profile.json"
part accelerator_training 330 python3 benchmarks/accelerator.py --work mlm finetune_real finetune \
    --library bertlayers keras_hub transformers_compile --timeout 150 --output "$out/accelerator.json"
XLA_FLAGS=--xla_gpu_enable_command_buffer= part device_profile_no_command_buffer 100 python3 \
    benchmarks/device_profile.py --no_trace --libraries bertlayers --part finetune \
    --output "$out/device_profile_no_command_buffer.json"
part accelerator_long_context 200 python3 benchmarks/accelerator.py --work long_context \
    --library bertlayers transformers_compile --timeout 120 --output "$out/accelerator_long_context.json"
echo "== done at ${SECONDS}s" | tee -a "$out/log.txt"
