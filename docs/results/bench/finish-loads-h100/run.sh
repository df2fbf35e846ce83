#!/usr/bin/env bash
# Device command H: the finish and fold kernels with their sums' loads
# issued eight at a time (6d500b5) against one at a time (5430ef5),
# alternated ABBA; then the user-kernel cases on every device and on
# Vulkan under sync validation (6d500b5).
set -u
T0=$(date +%s)
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
mkdir -p /tmp/vvl && dpkg -x .gpu/vvl/*.deb /tmp/vvl
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
export SEAM_GIT_COMMIT=$(cat .gpu/commit)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/driver.txt"
L=$OUT/ab.txt
for v in old new new old; do
  if [ $v = old ]; then bin=.gpu/benchF/seam-bench; else bin=.device-bench/seam-bench; fi
  $bin run --backend cuda,vulkan,wgpu --hiddens 4096,8192 --layers 32 --ns 1 --elems 1 --copy-mib 0 --rounds 1 --budget-ms 40 --arm seam-$v > /tmp/run.csv 2>>/tmp/err.txt
  echo "$v rc $? +$(( $(date +%s) - T0 )) s" | tee -a $L
  grep -E ",graph,(decode|read|partial|partial-chain),[0-9]+,(4096|8192),32,[0-9]+,(e2e_us|x_free)" /tmp/run.csv | grep -E "fused|split|fold|read|partial" | cut -d, -f1-11 >> $L
  grep -E "skipped|not measured" /tmp/run.csv | grep -v "hip\|metal" | head -5 | tee -a $L
done
grep -E "fold|split,.*decode" $L | cut -d, -f1,2,6,10
echo "## +$(( $(date +%s) - T0 )) s: user-kernel cases"
SEAM_REQUIRE_DEVICES=cpu:0,cuda:0,vulkan:0,wgpu:0 timeout 120 .gpu/bin/seam-conformance --backend cpu,cuda,vulkan,wgpu --case user_kernel > "$OUT/uk.txt" 2>&1; echo "suite rc $?"
grep -E "^conformance:|FAIL" "$OUT/uk.txt" | head -5
VK_LAYER_PATH=/tmp/vvl/usr/share/vulkan/explicit_layer.d LD_LIBRARY_PATH=/tmp/vvl/usr/lib/x86_64-linux-gnu SEAM_VULKAN_VALIDATION=sync SEAM_REQUIRE_DEVICES=vulkan:0 timeout 100 .gpu/bin/seam-conformance --backend vulkan --case user_kernel > "$OUT/uk-sync.txt" 2>&1; echo "sync rc $?"
grep -E "^conformance:|FAIL" "$OUT/uk-sync.txt" | head -5
echo "## +$(( $(date +%s) - T0 )) s: done"
