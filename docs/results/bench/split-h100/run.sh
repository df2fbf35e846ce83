#!/usr/bin/env bash
# The decode layer in two dispatches (split over rows) against one, on vulkan and wgpu; cuda fused as the anchor.
set -u
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
R=$OUT/split; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/driver.txt
t0=$(date +%s)
for n in 1 2; do
  ./.gpu/split/seam-bench run --backend cuda,vulkan,wgpu --hiddens 256,2048,4096,8192 --layers 32 --ns 1 --elems 1 --copy-mib 0 --rounds 1 --budget-ms 40 > $R/run-$n.csv 2>>$R/err.txt
  echo "run-$n rc $? $(( $(date +%s) - t0 )) s" | tee -a $R/log.txt
  grep -E ",graph,(decode|read),[0-9]+,(256|2048|4096|8192),32,[0-9]+,e2e_us" $R/run-$n.csv | grep -E "fused|split|read" | cut -d, -f1-10 | tee -a $R/log.txt
  grep -E "skipped|not measured" $R/run-$n.csv | head -5
done
