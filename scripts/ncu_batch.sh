#!/usr/bin/env bash
# The Nsight Compute counters the READMEs of days 1-20 quote (results/ncu/dayNN.json, read by
# the <!--m:ncu;VERSION;METRIC--> markers). Run on the GPU machine from the repo root:
#   bash scripts/ncu_batch.sh
set -uo pipefail
run() {  # day version size metrics
  timeout 240 python3 run_day.py "$1" --ncu --version "$2" --size "$3" --metrics "$4" --save 2>&1 \
    | grep -E "saved|rror" | cut -c1-300
}
BANK=l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
SECT=l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sector_hit_rate.pct,lts__t_sector_hit_rate.pct
run 14 v1 2^28 $BANK
run 14 v2 2^28 $BANK
run 14 v3 2^28 $BANK
run 7 v1 2048x2048x2048 $SECT
run 7 v2 2048x2048x2048 $SECT,l1tex__throughput.avg.pct_of_peak_sustained_active
run 8 v5 2048x2048x2048 l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum
run 8 v6 2048x2048x2048 l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum
run 8 v7 2048x2048x2048 dram__bytes_read.sum
run 4 v2 8192x8192 l1tex__t_sector_hit_rate.pct
run 9 v3 8192x768 dram__bytes_read.sum
run 12 v1 16384x3072 smsp__issue_active.avg.pct_of_peak_sustained_active
run 15 v4 4096x256x50257 dram__bytes_read.sum
run 16 v2 2^28x256x10 l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_atom.sum
run 16 v6 2^28x256x10 smsp__issue_active.avg.pct_of_peak_sustained_active
run 19 v2 8192x8192 dram__bytes_read.sum,lts__t_sector_hit_rate.pct
