# Build options, validated up front (style: oneDNN cmake/options.cmake).
include_guard(GLOBAL)

set(CMAKE_CXX_STANDARD 20)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CXX_EXTENSIONS OFF)
set(CMAKE_EXPORT_COMPILE_COMMANDS ON)
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type" FORCE)
endif()

set(MPIGAN_CUDA "AUTO" CACHE STRING "Build the CUDA backend: AUTO (if a CUDA compiler is found), ON, OFF")
set_property(CACHE MPIGAN_CUDA PROPERTY STRINGS AUTO ON OFF)
string(TOUPPER "${MPIGAN_CUDA}" MPIGAN_CUDA)
if(NOT MPIGAN_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "MPIGAN_CUDA='${MPIGAN_CUDA}' is not one of AUTO, ON, OFF")
endif()

option(MPIGAN_BUILD_TESTS "Build the doctest suites (tests/)" ON)
option(MPIGAN_BUILD_BENCH "Build the benchmarks (bench/)" ON)
option(MPIGAN_NATIVE "Compile for the build machine's CPU (-march=native)" OFF)
# SimGrid's SMPI (docs/sandbox.md, "Scale"): the real masters and virtual workers at up to
# thousands of simulated ranks on a simulated platform, run with smpirun. Not the default: the
# executable is a shared object for smpimain, no CUDA, no tests or benchmarks.
option(MPIGAN_SMPI "Build against SimGrid's SMPI instead of MPICH (run the binary with smpirun)" OFF)
if(MPIGAN_SMPI)
  set(MPIGAN_CUDA "OFF")
  set(MPIGAN_BUILD_TESTS OFF CACHE BOOL "" FORCE)
  set(MPIGAN_BUILD_BENCH OFF CACHE BOOL "" FORCE)
  set(CMAKE_POSITION_INDEPENDENT_CODE ON)  # everything ends in the shared object smpimain loads
endif()
option(MPIGAN_WERROR "Treat compiler warnings as errors (CI: scripts/sanitize.sh, setup.sh --werror)" OFF)

# Warnings and per-target flags go through this interface target, never CMAKE_CXX_FLAGS.
add_library(mpigan_build_flags INTERFACE)
target_compile_options(mpigan_build_flags INTERFACE
  # -Wno-restrict: GCC 12 false positives on std::string concatenation (GCC bug 105329).
  $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wno-missing-field-initializers -Wno-restrict>
  # No code reads errno after a math call; without it sqrt and friends vectorise.
  $<$<COMPILE_LANGUAGE:CXX>:-fno-math-errno>
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${MPIGAN_NATIVE}>>:-march=native>
  # MPIGAN_WERROR (CI): every warning fails the build; for .cu files nvcc's own warnings and the
  # host compiler's (-Xcompiler=-Wall,-Wextra in core/backend/cuda).
  $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${MPIGAN_WERROR}>>:-Werror>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${MPIGAN_WERROR}>>:--Werror=all-warnings>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${MPIGAN_WERROR}>>:-Xcompiler=-Werror>)
