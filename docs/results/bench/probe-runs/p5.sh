#!/usr/bin/env bash
# Probe command 5: the GEMV over 32 weights (8 GiB at H = 8192)
# with the weights' memory allocated plain (as the backend), dedicated, or
# pooled in one allocation: whether the 8 GiB slowdown is the allocations.
set -u
for f in .gl/libvulkan1*.deb .gl/libegl1*.deb .gl/libglvnd0*.deb .gl/libopengl0*.deb .gl/libgl1*.deb .gl/libglx0*.deb .gl/libgles2*.deb; do dpkg -x "$f" /; done; ldconfig
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f "$ICD" ] && export VK_DRIVER_FILES=$ICD
EGL=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json; [ -f "$EGL" ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$EGL
B=.device-bench
t=$(date +%s)
for a in plain dedicated pooled; do
  echo "== $a"; timeout 120 $B/seam-bench-probe probe gemv --hiddens 4096,8192 --weights 32 --alloc $a > $OUT/gemv-$a.txt 2>&1; grep -E "seam-bench|^#|prod|32x64|16x128|16x16" $OUT/gemv-$a.txt; echo "($(( $(date +%s) - t )) s)"
done
