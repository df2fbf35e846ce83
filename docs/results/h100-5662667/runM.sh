#!/usr/bin/env bash
# Device command M (H200 only): pdl_probe.cu builds of the committed fused
# layer by rows in flight (R), prefetched rows (P) and quads (Q, 0 = the
# committed choice), alternated twice, at h = 4096 (and the committed one
# at 8192).
set -u
GPU=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)
echo "gpu: $GPU"
case "$GPU" in *H200*|*H100*) ;; *) exit 0;; esac
cd bench/probes
V="${V:-8:4:0 8:8:0 8:16:0 16:4:0 16:8:0 4:8:0 8:4:4 16:8:4}"
for v in $V; do IFS=: read R P Q <<< "$v"
  QF=""; [ "$Q" != 0 ] && QF="-DSEAM_PROBE_QUADS=${Q}u"
  nvcc -O3 -std=c++17 -arch=sm_90 -DSEAM_LAYER_PREFETCH=${P}u -DSEAM_LAYER_ROWS=${R}u $QF pdl_probe.cu -o /tmp/pdl_${R}_${P}_${Q} &
done; wait
echo "# built: $(ls /tmp/pdl_* | wc -l)"
for pass in 1 2; do for v in $V; do IFS=: read R P Q <<< "$v"
  echo "== pass $pass R=$R P=$P Q=$Q"
  /tmp/pdl_${R}_${P}_${Q} 7 4096 | grep -v "^# no error"
done; done 2>&1 | tee "$OUT/pdl-probe.txt"
for v in ${V8:-8:4:0}; do IFS=: read R P Q <<< "$v"; echo "== 8192 R=$R P=$P Q=$Q"; /tmp/pdl_${R}_${P}_${Q} 7 8192; done | tee -a "$OUT/pdl-probe.txt"
