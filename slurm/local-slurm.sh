#!/usr/bin/env bash
# A single-node Slurm on this machine, for the integration test and for trying the batch scripts:
# munged, slurmctld and slurmd with a private configuration and state under one directory.
#
#   slurm/local-slurm.sh start DIR     # prints the SLURM_CONF to export
#   slurm/local-slurm.sh stop DIR
#
# Needs root (the daemons run as root here) and Debian's slurm-wlm and munge packages. The node
# advertises 8 CPUs whatever the machine has (config_overrides), so small jobs of several tasks
# run on a 2-core machine too.
set -euo pipefail
cmd=${1:?start|stop}
dir=${2:?state directory}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
conf="$dir/slurm.conf"
host=$(hostname -s)

stop() {
  # Jobs first (a test that failed half-way leaves some running): with the daemons gone, their
  # slurmstepd and srun processes would stay behind.
  if [[ -f $conf && -f $dir/slurmctld.pid ]] && kill -0 "$(cat "$dir/slurmctld.pid")" 2>/dev/null; then
    SLURM_CONF=$conf scancel --quiet --user="$(id -un)" 2>/dev/null || true
    for _ in $(seq 100); do
      [[ -z $(SLURM_CONF=$conf squeue -h 2>/dev/null) ]] && break
      sleep 0.1
    done
  fi
  for pidfile in "$dir/slurmd.pid" "$dir/slurmctld.pid" "$dir/munged.pid"; do
    [[ -f $pidfile ]] && kill "$(cat "$pidfile")" 2>/dev/null || true
  done
  sleep 1
}

if [[ $cmd == stop ]]; then
  stop
  exit 0
fi
[[ $cmd == start ]] || { echo "usage: $0 start|stop DIR" >&2; exit 2; }
[[ $(id -u) -eq 0 ]] || { echo "local-slurm.sh: needs root to run the Slurm daemons" >&2; exit 3; }
command -v slurmctld >/dev/null && command -v munged >/dev/null ||
  { echo "local-slurm.sh: install slurm-wlm and munge (scripts/setup.sh --with-slurm)" >&2; exit 3; }
stop

mkdir -p "$dir/state" "$dir/spool" "$dir/munge"
# munge: a key of our own, its own socket.
if [[ ! -f $dir/munge/munge.key ]]; then
  dd if=/dev/urandom bs=1 count=1024 of="$dir/munge/munge.key" status=none
  chmod 400 "$dir/munge/munge.key"
fi
munged --force --key-file="$dir/munge/munge.key" --socket="$dir/munge/socket" \
  --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/seed"

mem=$(awk '/MemTotal/ {print int($2/1024/2)}' /proc/meminfo)
cat >"$conf" <<CONF
ClusterName=mpigan-local
SlurmctldHost=$host(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
AuthInfo=socket=$dir/munge/socket
CredType=cred/munge
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=pmi2
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SlurmdParameters=config_overrides
ReturnToService=2
InactiveLimit=0
KillWait=5
MinJobAge=30
NodeName=$host NodeAddr=127.0.0.1 CPUs=8 Sockets=1 CoresPerSocket=8 ThreadsPerCore=1 RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES
CONF
export SLURM_CONF=$conf
slurmctld -f "$conf"
slurmd -f "$conf"
for _ in $(seq 1 60); do
  sinfo -h -o "%T" 2>/dev/null | grep -qE "idle|mixed|allocated" && break
  sleep 0.5
done
sinfo -h -o "%T" | grep -qE "idle|mixed|allocated" || { echo "local-slurm.sh: the node did not come up; see $dir/*.log" >&2; exit 1; }
echo "export SLURM_CONF=$conf"
