#!/usr/bin/env bash
# The fused layer's rows in flight per warp: 4 (0ca65c1) against 8, interleaved.
set -u
R=$OUT/rows; mkdir -p $R
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $R/driver.txt
t0=$(date +%s)
for v in r4 r8 r8 r4 r4 r8; do
  n=1; [ -f $R/$v-1.csv ] && n=2; [ -f $R/$v-2.csv ] && n=3
  ./.gpu/rows/seam-bench-$v run --arm seam-$v --backend cuda --hiddens 4096,8192 --layers 32 --ns 1 --elems 1 --copy-mib 0 --rounds 1 --budget-ms 60 > $R/$v-$n.csv 2>>$R/err.txt
  echo "$v-$n rc $? $(( $(date +%s) - t0 )) s" | tee -a $R/log.txt
  grep -E ",graph,(decode|decode_fused|read|fused)[a-z_]*,[0-9]+,(4096|8192),32,[0-9]+,e2e_us" $R/$v-$n.csv | cut -d, -f1-10 | tee -a $R/log.txt
done
