# Third-party dependencies, all from Debian 12 packages (scripts/setup.sh installs them).
include_guard(GLOBAL)

if(MPIGAN_SMPI)
  # --- MPI: SimGrid's SMPI. Its mpi.h and libsimgrid stand in for MPICH; the normal compiler is
  # kept (smpicxx's -include smpi_helpers.h turns exit/sleep/malloc into macros: not wanted).
  find_path(MPIGAN_SMPI_INCLUDE_DIR smpi/mpi.h REQUIRED)
  find_library(MPIGAN_SIMGRID_LIBRARY simgrid REQUIRED)
  foreach(lang C CXX)
    add_library(MPI::MPI_${lang} INTERFACE IMPORTED)
    set_target_properties(MPI::MPI_${lang} PROPERTIES
      INTERFACE_INCLUDE_DIRECTORIES "${MPIGAN_SMPI_INCLUDE_DIR}/smpi"
      INTERFACE_LINK_LIBRARIES "${MPIGAN_SIMGRID_LIBRARY}"
      INTERFACE_COMPILE_DEFINITIONS MPIGAN_SMPI)
  endforeach()
  message(STATUS "MPI: SimGrid SMPI (${MPIGAN_SIMGRID_LIBRARY})")
else()
  # --- MPI: MPICH, selected explicitly. Debian's alternatives may point mpicxx/mpiexec at Open MPI
  # when both are installed (python3-mpi4py pulls Open MPI in); FindMPI would then pick it up.
  if(NOT MPI_HOME AND NOT MPI_CXX_COMPILER)
    find_program(MPIGAN_MPICXX_MPICH NAMES mpicxx.mpich)
    if(MPIGAN_MPICXX_MPICH)
      set(MPI_CXX_COMPILER "${MPIGAN_MPICXX_MPICH}" CACHE FILEPATH "MPICH C++ wrapper")
      find_program(MPIGAN_MPICC_MPICH NAMES mpicc.mpich)
      set(MPI_C_COMPILER "${MPIGAN_MPICC_MPICH}" CACHE FILEPATH "MPICH C wrapper")
    endif()
  endif()
  if(NOT MPIEXEC_EXECUTABLE)
    find_program(MPIGAN_MPIEXEC_MPICH NAMES mpiexec.mpich)
    if(MPIGAN_MPIEXEC_MPICH)
      set(MPIEXEC_EXECUTABLE "${MPIGAN_MPIEXEC_MPICH}" CACHE FILEPATH "MPICH launcher")
    endif()
  endif()
  set(MPI_DETERMINE_LIBRARY_VERSION TRUE)
  find_package(MPI REQUIRED COMPONENTS C CXX)
  if(NOT MPI_C_LIBRARY_VERSION_STRING MATCHES "MPICH")
    message(WARNING "mpigan is tested with MPICH; FindMPI found: ${MPI_C_LIBRARY_VERSION_STRING}. "
                    "Pass -DMPI_HOME=... or -DMPI_CXX_COMPILER=mpicxx.mpich to select MPICH.")
  endif()
endif()

find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(Threads REQUIRED)
find_package(dnnl CONFIG REQUIRED)
find_package(Eigen3 3.4 CONFIG REQUIRED)
find_package(HDF5 REQUIRED COMPONENTS C)
find_package(yaml-cpp CONFIG REQUIRED)
find_package(fmt CONFIG REQUIRED)
find_package(spdlog CONFIG REQUIRED)
find_package(CLI11 CONFIG REQUIRED)
find_package(nlohmann_json 3.10 CONFIG REQUIRED)
find_package(NLopt CONFIG REQUIRED)  # hpo/: the Gaussian process fit and the acquisition maximisation
if(MPIGAN_BUILD_TESTS)
  find_package(doctest CONFIG REQUIRED)
endif()
if(MPIGAN_BUILD_BENCH)
  find_package(benchmark CONFIG REQUIRED)
endif()

# yaml-cpp 0.7 on Debian exports the target as 'yaml-cpp' (no namespace).
if(TARGET yaml-cpp AND NOT TARGET yaml-cpp::yaml-cpp)
  add_library(yaml-cpp::yaml-cpp ALIAS yaml-cpp)
endif()

# HDF5's FindModule gives variables; wrap them in one imported target.
if(NOT TARGET mpigan_hdf5)
  add_library(mpigan_hdf5 INTERFACE)
  target_include_directories(mpigan_hdf5 SYSTEM INTERFACE ${HDF5_C_INCLUDE_DIRS})
  target_compile_definitions(mpigan_hdf5 INTERFACE ${HDF5_C_DEFINITIONS})
  target_link_libraries(mpigan_hdf5 INTERFACE ${HDF5_C_LIBRARIES})
endif()

# --- CUDA (cuDNN, cuBLAS, NCCL): optional, three-way (style: flashlight fl/tensor/CMakeLists.txt).
set(MPIGAN_HAVE_CUDA OFF)
if(NOT MPIGAN_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Default architectures: Pascal (P100, Piz Daint), Volta, Ampere, Hopper -- "60;70;80;90" with
    # CUDA <= 12. CUDA 13 dropped everything below sm_75, so there the default is "75;80;90" and
    # P100/V100 need a CUDA 12 toolkit. K20 (sm_35, Titan-class) needs CUDA <= 11.8 and
    # -DCMAKE_CUDA_ARCHITECTURES=35 (docs/cuda.md).
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      execute_process(COMMAND "${CMAKE_CUDA_COMPILER}" --version OUTPUT_VARIABLE _mpigan_nvcc_version ERROR_QUIET)
      if(_mpigan_nvcc_version MATCHES "release ([0-9]+)\\." AND CMAKE_MATCH_1 GREATER_EQUAL 13)
        set(_mpigan_archs "75;80;90")
      else()
        set(_mpigan_archs "60;70;80;90")
      endif()
      set(CMAKE_CUDA_ARCHITECTURES "${_mpigan_archs}" CACHE STRING "CUDA architectures to build for")
    endif()
    enable_language(CUDA)
    set(CMAKE_CUDA_STANDARD 20)
    find_package(CUDAToolkit REQUIRED)
    find_package(CUDNN)
    find_package(NCCL)
    if(CUDNN_FOUND AND NCCL_FOUND)
      set(MPIGAN_HAVE_CUDA ON)
    elseif(MPIGAN_CUDA STREQUAL "ON")
      message(FATAL_ERROR "MPIGAN_CUDA=ON but cuDNN (found: ${CUDNN_FOUND}) or NCCL (found: ${NCCL_FOUND}) "
                          "is missing: set -DCUDNN_ROOT=... / -DNCCL_ROOT=..., or -DMPIGAN_CUDA=OFF")
    else()
      message(STATUS "mpigan: CUDA compiler found but cuDNN or NCCL missing; CUDA backend off")
    endif()
  elseif(MPIGAN_CUDA STREQUAL "ON")
    message(FATAL_ERROR "MPIGAN_CUDA=ON but no CUDA compiler was found: set -DCMAKE_CUDA_COMPILER=/path/to/nvcc "
                        "or -DMPIGAN_CUDA=OFF")
  endif()
endif()
message(STATUS "mpigan: CUDA backend ${MPIGAN_HAVE_CUDA}")
