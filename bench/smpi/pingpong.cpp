// Ping-pong between ranks 0 and 1: one-way latency (8 B) and bandwidth (6 MB) on the platform.
#include <mpi.h>
#include <smpi/smpi.h>
#include <cstdio>
int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  char name[MPI_MAX_PROCESSOR_NAME];
  int len;
  MPI_Get_processor_name(name, &len);
  const int sizes[2] = {8, 6000000};
  char* buf = static_cast<char*>(SMPI_SHARED_MALLOC(6000000));
  for (int s : sizes) {
    MPI_Barrier(MPI_COMM_WORLD);
    const double t0 = MPI_Wtime();
    for (int i = 0; i < 10; ++i) {
      if (rank == 0) {
        MPI_Send(buf, s, MPI_CHAR, 1, 0, MPI_COMM_WORLD);
        MPI_Recv(buf, s, MPI_CHAR, 1, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      } else if (rank == 1) {
        MPI_Recv(buf, s, MPI_CHAR, 0, 0, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(buf, s, MPI_CHAR, 0, 0, MPI_COMM_WORLD);
      }
    }
    const double one_way = (MPI_Wtime() - t0) / 20;
    if (rank == 1)
      std::printf("PINGPONG %s %d B: one-way %.3f us, %.2f GB/s\n", name, s, one_way * 1e6, s / one_way / 1e9);
  }
  SMPI_SHARED_FREE(buf);
  MPI_Finalize();
}
