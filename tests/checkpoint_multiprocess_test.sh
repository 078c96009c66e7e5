#!/usr/bin/env bash
# checkpoint_multiprocess as 2 processes meeting over TCP at a coordinator, then under
# `mpirun -np 2` (skipped without mpirun, or with a build without MPI).
# Usage: checkpoint_multiprocess_test.sh CHECKPOINT_MULTIPROCESS
set -uo pipefail
bin="$1"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])' 2>/dev/null) ||
  port=$((20000 + $$ % 20000))
echo "== 2 processes over TCP"
mkdir "$work/tcp"
pids=()
for i in 0 1; do
  CUJAX_COLLECTIVE_TIMEOUT=60 timeout 120 "$bin" "$work/tcp" --coordinator 127.0.0.1:$port \
    --num-processes 2 --process-id $i & pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
[ $rc -eq 0 ] || { echo "the TCP run failed"; exit 1; }

if ! command -v mpirun >/dev/null; then echo "no mpirun: MPI run skipped"; exit 0; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_plm_rsh_agent=""  # one machine: no ssh
echo "== 2 processes under mpirun"
mkdir "$work/mpi"
CUJAX_COLLECTIVE_TIMEOUT=60 timeout 120 mpirun -np 2 --oversubscribe --mca btl self,tcp \
  -x CUJAX_COLLECTIVE_TIMEOUT "$bin" "$work/mpi"
rc=$?
if [ $rc -eq 77 ]; then echo "built without MPI: MPI run skipped"; exit 0; fi
[ $rc -eq 0 ] || { echo "the mpirun run failed with status $rc"; exit 1; }
echo "checkpoint_multiprocess_test: all checks passed"
