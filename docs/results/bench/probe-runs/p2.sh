#!/usr/bin/env bash
# Probe command 2: the new catalogue GEMV against the variants,
# the CUDA per-node figure on fresh buffers and streams, and the decode step
# on Vulkan and wgpu with the new GEMV.
set -u
for f in .gl/libvulkan1*.deb .gl/libegl1*.deb .gl/libglvnd0*.deb .gl/libopengl0*.deb .gl/libgl1*.deb .gl/libglx0*.deb .gl/libgles2*.deb; do dpkg -x "$f" /; done; ldconfig
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f "$ICD" ] && export VK_DRIVER_FILES=$ICD
EGL=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json; [ -f "$EGL" ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$EGL
B=.device-bench
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader
t=$(date +%s)
echo "== gemv probe"; timeout 150 $B/seam-bench probe gemv --hiddens 4096,8192 2>&1 | tee $OUT/gemv.txt | grep -E "prod|v4 16x64 u8|v4 32x32 u8|copy"; echo "($(( $(date +%s) - t )) s)"
echo "== cuda-process"; timeout 90 $B/seam-bench probe cuda-process 2>&1 | tee $OUT/cuda-process.txt
echo "== decode vulkan,wgpu,cuda"; timeout 200 $B/seam-bench run --budget-ms 20 --ns 1 --elems 1 --hiddens 4096,8192 --layers 32 --backend vulkan,wgpu,cuda --copy-mib 256 --rounds 3 > $OUT/decode.csv 2>&1; grep -E ",(graph|eager),decode,(4096|8192),.*,e2e_us|copy,.*gbps" $OUT/decode.csv
echo "($(( $(date +%s) - t )) s)"
