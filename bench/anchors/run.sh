#!/usr/bin/env bash
# The benchmark's device command: every arm, one machine, one run.
#
#   bash .device-bench/run.sh [quick|smoke|decode|full]
#
# quick: tiny sizes, for checking the arms on any machine (cpu/lavapipe
# included); arms whose tools are missing (nvcc, PyTorch) are skipped with
# a line in the log, never faked. decode: every arm on the decode stack at
# H = 256, 4096, 8192 and L = 1, 32 with the chain at N = 1000 only (about
# half the full run's time).
#
# Run from the repository root on the GPU machine, with .device-bench/ as
# `cargo xtask bench` lays it out (seam-bench, raw_cuda.cu, torch_arm.py,
# kernels/) and, for the Vulkan and wgpu arms, the loader packages in .gl/.
# Builds the raw-driver arm with nvcc, then runs raw, PyTorch and seam in
# turn; CSVs and a log go to $OUT (or .device-bench/out).
set -u
MODE=${1:-full}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$HERE/out}
mkdir -p "$OUT"
LOG=$OUT/log.txt
: >"$LOG"
log() { echo "$@" | tee -a "$LOG"; }

if [ -d .gl ] && ls .gl/*.deb >/dev/null 2>&1 && ! ldconfig -p | grep -q libvulkan.so.1; then
    for f in .gl/*.deb; do dpkg -x "$f" /; done
    ldconfig
fi
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
[ -f "$ICD" ] && export VK_DRIVER_FILES=$ICD
EGL=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
[ -f "$EGL" ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$EGL

case "$MODE" in
quick) BUDGET=1 NS=1,100 ELEMS=1 HID=64 LAY=1,2 ROUNDS=3 COPY_MIB=4 ;;
smoke) BUDGET=2 NS=1,1000 ELEMS=1,1048576 HID=256,8192 LAY=1,32 ROUNDS=5 COPY_MIB=256 ;;
decode) BUDGET=${BUDGET_MS:-40} NS=1000 ELEMS=1 HID=256,4096,8192 LAY=1,32 ROUNDS=${ROUNDS:-5} COPY_MIB=${COPY_MIB:-256} ;;
full) BUDGET=${BUDGET_MS:-40} NS=1,10,100,1000 ELEMS=1,1048576 HID=256,512,1024,2048,4096,8192 LAY=1,8,32 ROUNDS=${ROUNDS:-15} COPY_MIB=${COPY_MIB:-256} ;;
*) echo "usage: run.sh [quick|smoke|decode|full]" >&2; exit 2 ;;
esac
log "# mode $MODE, budget ${BUDGET} ms per measurement, $ROUNDS interleaved rounds per graph-update case"
{
    nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,temperature.gpu,power.draw,utilization.gpu --format=csv 2>&1
    uname -r; nproc
} >>"$LOG"

t0=$(date +%s)
RAW=1
if [ "$MODE" = quick ] && ! command -v nvcc >/dev/null; then
    log "# raw (nvcc arm): not measured: no nvcc on this machine"
    RAW=0
else
    nvcc -O2 -std=c++17 "$HERE/raw_cuda.cu" -o /tmp/raw_cuda -L/usr/local/cuda/lib64/stubs -lcuda -lnvrtc -lcublas >>"$LOG" 2>&1 \
        || { log "nvcc failed"; tail -20 "$LOG"; exit 1; }
    log "# nvcc: $(( $(date +%s) - t0 )) s"
fi
TORCH=1
if [ "$MODE" = quick ] && ! python3 -c 'import torch' >/dev/null 2>&1; then
    log "# torch: not measured: no PyTorch on this machine"
    TORCH=0
fi

clocks() {
    command -v nvidia-smi >/dev/null &&
        log "# clocks $1: $(nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader 2>&1)"
}
arm() {
    local name=$1; shift
    local t
    t=$(date +%s)
    "$@" >"$OUT/$name.csv" 2>>"$LOG"
    local rc=$?
    log "# $name: rc $rc, $(( $(date +%s) - t )) s, $(grep -vc '^#' "$OUT/$name.csv") lines"
    clocks "after $name"
}
clocks "before the arms"
[ "$RAW" = 1 ] && arm raw /tmp/raw_cuda "$HERE/kernels" "$BUDGET" "$NS" "$HID" "$LAY" "$ELEMS" "$ROUNDS"
[ "$TORCH" = 1 ] && PYTHONUNBUFFERED=1 arm torch python3 "$HERE/torch_arm.py" "$BUDGET" "$NS" "$HID" "$LAY" "$ELEMS" "$ROUNDS"
# Both seam builds also run the in-process raw anchors (raw CUDA driver via
# cudarc, raw ash) interleaved with seam, and measure each backend's
# device-to-device copy bandwidth (the decode floor).
# The seam build with only the cuda backend: no Vulkan driver in the process.
SEAM_ARGS=(--budget-ms "$BUDGET" --ns "$NS" --elems "$ELEMS" --hiddens "$HID" --layers "$LAY" --rounds "$ROUNDS" --copy-mib "$COPY_MIB" --profile)
arm seam_cuda "$HERE/seam-bench-cuda" run --arm seam-cudaonly "${SEAM_ARGS[@]}"
arm seam "$HERE/seam-bench" run "${SEAM_ARGS[@]}"
# The nvcc raw arm's chain once more, last: whether a per-node figure that
# differs between the first process and the later ones is the arms' or the
# machine's (clocks, power state) at that point of the run. Its CSV stays
# out of the report (after/raw.csv); the per-node lines go to the log.
if [ "$RAW" = 1 ] && [ "$MODE" = full ]; then
    mkdir -p "$OUT/after"
    /tmp/raw_cuda "$HERE/kernels" "$BUDGET" 1000 256 1 1 3 >"$OUT/after/raw.csv" 2>>"$LOG"
    log "# raw chain again after every arm (rc $?): $(grep -E '^raw,cuda,(graph|eager),chain,1,0,0,1000,e2e_us' "$OUT/after/raw.csv" | cut -d, -f3,10 | tr '\n' ' ')"
    clocks "after raw again"
fi
grep -h '^#' "$OUT"/*.csv | tee -a "$LOG"
log "# total $(( $(date +%s) - t0 )) s"
