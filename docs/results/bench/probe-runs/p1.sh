#!/usr/bin/env bash
# Probe command: GEMV/copy variants on the raw Vulkan device,
# the CUDA process probe in both seam builds, the nvcc raw chain, and the
# Vulkan/wgpu decode step at L = 32 with wgpu's trusted catalogue modules.
set -u
for f in .gl/libvulkan1*.deb .gl/libegl1*.deb .gl/libglvnd0*.deb .gl/libopengl0*.deb .gl/libgl1*.deb .gl/libglx0*.deb .gl/libgles2*.deb; do dpkg -x "$f" /; done; ldconfig
ICD=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json; [ -f "$ICD" ] && export VK_DRIVER_FILES=$ICD
EGL=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json; [ -f "$EGL" ] && export __EGL_VENDOR_LIBRARY_FILENAMES=$EGL
B=.device-bench
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv,noheader
t=$(date +%s)
echo "== gemv probe"; timeout 150 $B/seam-bench probe gemv --hiddens 4096,8192 2>&1 | tee $OUT/gemv.txt; echo "($(( $(date +%s) - t )) s)"
echo "== cuda-process, every backend"; timeout 60 $B/seam-bench probe cuda-process 2>&1 | tee $OUT/cuda-process.txt
echo "== cuda-process, cuda only"; timeout 60 $B/seam-bench-cuda probe cuda-process 2>&1 | tee -a $OUT/cuda-process.txt
echo "== nvcc raw chain"; nvcc -O2 -std=c++17 $B/raw_cuda.cu -o /tmp/raw_cuda -L/usr/local/cuda/lib64/stubs -lcuda -lnvrtc -lcublas && timeout 60 /tmp/raw_cuda $B/kernels 20 1000 256 1 1 3 > $OUT/rawcpp.csv 2>&1; grep -E "graph,chain,1,0,0,1000,(e2e|pipe)_us" $OUT/rawcpp.csv
echo "($(( $(date +%s) - t )) s)"
echo "== decode vulkan,wgpu"; timeout 200 $B/seam-bench run --budget-ms 20 --ns 1 --elems 1 --hiddens 4096,8192 --layers 32 --backend vulkan,wgpu --copy-mib 0 --rounds 3 > $OUT/decode.csv 2>&1; grep -E "decode,4096|decode,8192" $OUT/decode.csv | grep -E ",(graph|eager),decode,.*,e2e_us"
echo "($(( $(date +%s) - t )) s)"
