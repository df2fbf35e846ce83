#!/usr/bin/env bash
# Probe command 3: the GEMV variants and two candidate gemm.wgsl
# over 8 and over 32 distinct weights (32 at H = 8192 is the decode stack's
# 8 GiB, where the catalogue's wide strips ran slower than in the 8-weight
# probe).
set -u
for f in .gl/libvulkan1*.deb .gl/libegl1*.deb .gl/libglvnd0*.deb .gl/libopengl0*.deb .gl/libgl1*.deb .gl/libglx0*.deb .gl/libgles2*.deb; do dpkg -x "$f" /; done; ldconfig
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f "$ICD" ] && export VK_DRIVER_FILES=$ICD
B=.device-bench
C=$B/cand/constS.wgsl,$B/cand/constS_narrow.wgsl
t=$(date +%s)
for w in 8 32; do
  echo "== gemv probe, $w weights"; timeout 200 $B/seam-bench-probe probe gemv --hiddens 4096,8192 --weights $w --candidates $C 2>&1 | grep -v "^copy" | tee $OUT/gemv-w$w.txt; echo "($(( $(date +%s) - t )) s)"
done
