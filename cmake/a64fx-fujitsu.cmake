# CMake toolchain file: the course built with Fujitsu's compilers for the A64FX nodes of Odyssey
# (Wisteria/BDEC-01). One file for both ways of building (after `module load fj`, at every login):
#
#   on the login node (not an A64FX: Fujitsu's cross compilers fccpx and frtpx)
#     python -m course build --toolchain cmake/a64fx-fujitsu.cmake
#   on a compute node, in an interactive job (the native compilers fcc and frt)
#     pjsub --interact -g GROUP -L "rscgrp=interactive-o,node=1"
#     python -m course build --toolchain cmake/a64fx-fujitsu.cmake
#
# Either way the programs land in build/native/release-a64fx-fujitsu/bin, apart from the
# machine's own build in build/native/release (a cross build does not overwrite it).
#
# C is compiled in clang mode (-Nclang, the Clang/LLVM front end; CMake's id FujitsuClang), the
# mode of the lecture's makefile `makec`: it was the faster one for the small case, trad mode (the
# default, K computer heritage) equal or faster for larger optimised ones. For trad mode, remove
# -Nclang and -msve-vector-bits=512 below (the lecture's `makec-org` uses -Kfast,openmp alone).
# OpenMP's flag (-Kopenmp or -fopenmp) is found by CMake's FindOpenMP, MPI's wrappers (mpifccpx,
# mpifrtpx, or mpifcc, mpifrt) by FindMPI.

if(CMAKE_HOST_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64)$")
  set(_course_fj_suffix "")           # on the A64FX itself: fcc, frt
else()
  set(_course_fj_suffix "px")         # elsewhere: fccpx, frtpx make A64FX code
  set(CMAKE_SYSTEM_NAME Linux)        # setting it marks the build as a cross build
  set(CMAKE_SYSTEM_PROCESSOR aarch64)
endif()

# The list form puts -Nclang on every call of the compiler, CMake's identification included.
set(CMAKE_C_COMPILER fcc${_course_fj_suffix} -Nclang)
set(CMAKE_Fortran_COMPILER frt${_course_fj_suffix})

# SVE: Fortran fixes the vector length at 512 bits (the A64FX's); clang mode makes
# length-agnostic code unless told, and fixing 512 made the lecture's SpMV faster.
set(CMAKE_C_FLAGS_INIT "-msve-vector-bits=512")
# -Kfast: Fujitsu's optimisation set, in both compilers (the lecture's makefiles)
set(CMAKE_C_FLAGS_RELEASE_INIT "-Kfast")
set(CMAKE_Fortran_FLAGS_RELEASE_INIT "-Kfast")
