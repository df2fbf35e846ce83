#!/usr/bin/env bash
# Device command J: four builds of layer_fold_f32, alternated three times:
# O = 6d500b5 (no prefetch), A = 22ec50c (next step's loads held in a
# let array), L = the same held in eight lets, F = only the first step's
# loads issued before the finish.
set -u
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/driver.txt"
L=$OUT/ab.txt; mkdir -p /tmp/ab
n=0
for v in O A L F F L A O O A L F; do
  n=$((n+1))
  case $v in O) bin=.gpu/benchO/seam-bench ;; A) bin=.device-bench/seam-bench ;; L) bin=.gpu/benchL/seam-bench ;; F) bin=.gpu/benchF1/seam-bench ;; esac
  $bin run --backend cuda,vulkan,wgpu --hiddens 4096,8192 --layers 32 --ns 1 --elems 1 --copy-mib 0 --rounds 1 --budget-ms 40 --arm seam-$v > /tmp/ab/$v-$n.csv 2>>/tmp/ab/err.txt
  echo "$v-$n rc $? +$(( $(date +%s) - T0 )) s" | tee -a $L
  grep -E ",graph,(decode|read|partial|partial-chain),[0-9]+,(4096|8192),32,[0-9]+,(e2e_us|x_free)" /tmp/ab/$v-$n.csv | grep -E "fused|split|fold|read|partial" | cut -d, -f1-11 >> $L
  grep -E "skipped|not measured" /tmp/ab/$v-$n.csv | grep -v "hip\|metal" | head -5 | tee -a $L
done
grep -E "fold,.*decode|fused,cuda,.*decode" $L | cut -d, -f1,2,6,10,11 | sort
tar -C /tmp -czf "$OUT/ab.tgz" ab
echo "+$(( $(date +%s) - T0 )) s done"
