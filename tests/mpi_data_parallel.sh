#!/usr/bin/env bash
# Runs mpi_data_parallel on 2 MPI processes, with 1 and with 2 devices per process. Exit 77
# (skipped) without mpirun or without MPI in the build.
set -uo pipefail
bin="$1"
if ! command -v mpirun >/dev/null; then echo "no mpirun: skipped"; exit 77; fi
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_plm_rsh_agent=""  # one machine: no ssh
for local in 1 2; do
  echo "== 2 processes x $local device(s)"
  CUJAX_NUM_CPU_DEVICES=$local CUJAX_COLLECTIVE_TIMEOUT=60 \
    timeout 120 mpirun -np 2 --oversubscribe --mca btl self,tcp -x CUJAX_NUM_CPU_DEVICES \
    -x CUJAX_COLLECTIVE_TIMEOUT "$bin"
  rc=$?
  if [ $rc -eq 77 ]; then exit 77; fi
  if [ $rc -ne 0 ]; then echo "failed with status $rc"; exit 1; fi
done
