#!/usr/bin/env bash
# Runs mpi_data_parallel as several processes: over TCP through a coordinator address, then
# as 2 under mpirun with 1 and with 2 devices per process (those skipped without mpirun or MPI).
set -uo pipefail
bin="$1"

# N processes x L devices meeting at a coordinator on localhost (3 processes: relayed by 0).
tcp_run() {
  local n=$1 local_devices=$2 pids=() rc=0 port
  # A port the kernel says is free, else one derived from our pid.
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null) ||
    port=$((20000 + ($$ * 7 + n) % 20000))
  echo "== $n processes x $local_devices device(s) over TCP"
  for ((i = 0; i < n; i++)); do
    CUJAX_NUM_CPU_DEVICES=$local_devices CUJAX_COLLECTIVE_TIMEOUT=60 timeout 120 "$bin" \
      --coordinator 127.0.0.1:$port --num-processes $n --process-id $i & pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=1; done
  if [ $rc -ne 0 ]; then echo "TCP run of $n processes failed"; exit 1; fi
}
tcp_run 2 1
tcp_run 3 2

if ! command -v mpirun >/dev/null; then echo "no mpirun: MPI runs skipped"; exit 0; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_plm_rsh_agent=""  # one machine: no ssh
for local in 1 2; do
  echo "== 2 processes x $local device(s) under mpirun"
  CUJAX_NUM_CPU_DEVICES=$local CUJAX_COLLECTIVE_TIMEOUT=60 \
    timeout 120 mpirun -np 2 --oversubscribe --mca btl self,tcp -x CUJAX_NUM_CPU_DEVICES \
    -x CUJAX_COLLECTIVE_TIMEOUT "$bin"
  rc=$?
  if [ $rc -eq 77 ]; then echo "built without MPI: MPI runs skipped"; exit 0; fi
  if [ $rc -ne 0 ]; then echo "failed with status $rc"; exit 1; fi
done
