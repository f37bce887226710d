# Sourced by the MPI script tests: find a job's ranks among the descendants of its own launcher,
# never a process of another job running beside the test (ctest -j2, the Slurm test).

# descendants PID: every process below PID in the process tree.
descendants() {
  local c
  for c in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
    echo "$c"
    descendants "$c"
  done
}

# rank_pid LAUNCHER_PID RANK [COMMAND]: the pid of rank RANK ("mpigan COMMAND", train by default,
# with PMI_RANK=RANK) below the launcher.
rank_pid() {
  local pid
  for pid in $(descendants "$1"); do
    if { tr '\0' '\n' <"/proc/$pid/environ" | grep -qx "PMI_RANK=$2" &&
         tr '\0' ' ' <"/proc/$pid/cmdline" | grep -q "mpigan ${3:-train}"; } 2>/dev/null; then
      echo "$pid"
      return
    fi
  done
}
