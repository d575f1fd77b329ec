# CHOLMOD (SuiteSparse) and TetGen as imported targets xpd::cholmod and xpd::tetgen.
# Debian 12's SuiteSparse 5.x and libtet1.5-dev ship no CMake package files, so they are found by
# hand. Included by cmake/xpd_dependencies.cmake for the build and installed next to xpdConfig.cmake,
# so that a project linking the installed static library finds the same libraries again.
#
# XPD_CHOLMOD_LGPL_ONLY (set by the build, recorded in the installed package): the library calls
# only CHOLMOD's LGPL modules (Core, Cholesky: simplicial factorization). Debian links all modules
# into one libcholmod.so, so the option is about which code a binary executes and carries when
# CHOLMOD is built without its GPL modules (see README, "Licence").
if(NOT TARGET xpd::cholmod)
  find_package(BLAS REQUIRED)
  find_package(LAPACK REQUIRED)
  find_path(CHOLMOD_INCLUDE_DIR cholmod.h PATH_SUFFIXES suitesparse REQUIRED)
  set(_xpd_cholmod_libraries "")
  foreach(lib cholmod amd camd colamd ccolamd suitesparseconfig metis)
    find_library(XPD_LIB_${lib} ${lib} REQUIRED)
    list(APPEND _xpd_cholmod_libraries ${XPD_LIB_${lib}})
  endforeach()
  add_library(xpd::cholmod INTERFACE IMPORTED)
  target_include_directories(xpd::cholmod INTERFACE ${CHOLMOD_INCLUDE_DIR})
  target_link_libraries(xpd::cholmod INTERFACE ${_xpd_cholmod_libraries} LAPACK::LAPACK BLAS::BLAS)
  unset(_xpd_cholmod_libraries)
endif()

# TetGen 1.5 library: conforming tetrahedralization of closed surfaces.
if(NOT TARGET xpd::tetgen)
  find_path(TETGEN_INCLUDE_DIR tetgen.h REQUIRED)
  find_library(TETGEN_LIBRARY tet REQUIRED)
  add_library(xpd::tetgen INTERFACE IMPORTED)
  target_include_directories(xpd::tetgen INTERFACE ${TETGEN_INCLUDE_DIR})
  target_compile_definitions(xpd::tetgen INTERFACE TETLIBRARY)
  target_link_libraries(xpd::tetgen INTERFACE ${TETGEN_LIBRARY})
endif()
