#!/usr/bin/env bash
# Device command P (N without sync validation and node timing, which the change does not reach): at 5662667 (4 rows in flight, 2 prefetched) the suite on every device, Vulkan under
# sync validation, the full benchmark, node timing with the decode-step
# traces, the model.
set -u
GPU=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)
echo "gpu: $GPU"
case "$GPU" in
  *H200*) ;;
  *H100*) echo "an H100: the probe's rows and prefetch first"
    V="8:4:0 4:2:0 8:2:0" V8="8:4:0 4:2:0 8:2:0" bash .gpu/scripts/runM.sh 2>&1 | grep -E "^==|early start" ;;
  *) echo "neither: nothing run"; exit 0;;
esac
T0=$(date +%s)
stamp() { echo "## $(date -u +%H:%M:%SZ) +$(( $(date +%s) - T0 )) s: $*"; }
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
mkdir -p /tmp/vvl && dpkg -x .gpu/vvl/*.deb /tmp/vvl
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json __EGL_VENDOR_LIBRARY_FILENAMES=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
export SEAM_GIT_COMMIT=$(cat .gpu/commit)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/driver.txt"
echo "binaries: $(cat .gpu/commit) bench $(cat .device-bench/commit)"
B=.gpu/bin
stamp "suite cpu,cuda,vulkan,wgpu"
SEAM_REQUIRE_DEVICES=cpu:0,cuda:0,vulkan:0,wgpu:0 timeout 150 $B/seam-conformance --backend cpu,cuda,vulkan,wgpu --json "$OUT/suite.json" > "$OUT/suite.txt" 2>&1; echo "suite rc $?"
grep -E "^conformance:|FAIL" "$OUT/suite.txt" | head -8
stamp "bench full"
mkdir -p "$OUT/bench"
OUT=$OUT/bench timeout 300 bash .device-bench/run.sh full > "$OUT/bench-stdout.txt" 2>&1; echo "bench rc $?"
tail -1 "$OUT/bench/log.txt"
cp "$OUT/bench/log.txt" "$OUT/bench-log.txt"
tar -C "$OUT" -czf "$OUT/bench.tgz" bench && rm -rf "$OUT/bench"
stamp "the fused step, 37fc583's kernel (O) against this one (N), alternated"
A=$OUT/alt; mkdir -p $A; t0=$(date +%s)
for v in O N N O O N; do
  n=1; [ -f $A/$v-1.csv ] && n=2; [ -f $A/$v-2.csv ] && n=3
  if [ $v = O ]; then BIN=.gpu/benchO/seam-bench; else BIN=.device-bench/seam-bench; fi
  $BIN run --arm seam-$v --backend cuda --hiddens 4096,8192 --layers 32 --ns 1 --elems 1 --copy-mib 0 --rounds 1 --budget-ms 60 > $A/$v-$n.csv 2>>$A/err.txt
  echo "$v-$n rc $? $(( $(date +%s) - t0 )) s" | tee -a $A/log.txt
  grep -E ",graph,(decode|read)[a-z_]*,[0-9]+,(4096|8192),32,[0-9]+,e2e_us" $A/$v-$n.csv | cut -d, -f1-10 | tee -a $A/log.txt
done
tar -C "$OUT" -czf "$OUT/alt.tgz" alt && rm -rf "$A"
stamp "llama check"
timeout 60 $B/seam-llama check --model .gpu/stories/stories260K.bin --reference .gpu/stories/reference-greedy-from-bos.txt --device cpu:0,cuda:0,vulkan:0,wgpu:0 > "$OUT/llama.txt" 2>&1; echo "llama rc $?"
tail -1 "$OUT/llama.txt"
tar -C "$OUT" -czf "$OUT/text.tgz" suite.txt llama.txt bench-stdout.txt driver.txt bench-log.txt && rm -f "$OUT/suite.txt" "$OUT/llama.txt" "$OUT/bench-stdout.txt" "$OUT/bench-log.txt"
stamp done
