#!/usr/bin/env bash
# Probe command 4: the 512-invocation catalogue GEMV over 8 and
# 32 weights against the probe's variants, and the decode step (L = 32) on
# vulkan, wgpu and cuda in one process.
set -u
for f in .gl/libvulkan1*.deb .gl/libegl1*.deb .gl/libglvnd0*.deb .gl/libopengl0*.deb .gl/libgl1*.deb .gl/libglx0*.deb .gl/libgles2*.deb; do dpkg -x "$f" /; done; ldconfig
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f "$ICD" ] && export VK_DRIVER_FILES=$ICD
EGL=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json; [ -f "$EGL" ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$EGL
B=.device-bench
t=$(date +%s)
for w in 32 8; do
  echo "== gemv probe, $w weights"; timeout 200 $B/seam-bench-probe probe gemv --hiddens 4096,8192 --weights $w 2>&1 | grep -E "prod|32x64|16x128|16x16|^copy" | tee $OUT/gemv-w$w.txt; echo "($(( $(date +%s) - t )) s)"
done
echo "== decode"; timeout 200 $B/seam-bench-probe run --budget-ms 20 --ns 1 --elems 1 --hiddens 4096,8192 --layers 32 --backend vulkan,wgpu,cuda --copy-mib 256 --rounds 3 > $OUT/decode.csv 2>&1; grep -E ",(graph|eager),decode,(4096|8192),.*,e2e_us|copy,.*gbps" $OUT/decode.csv
echo "($(( $(date +%s) - t )) s)"
