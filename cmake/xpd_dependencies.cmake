# One recipe per dependency. Everything comes from Debian packages (scripts/setup).
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(TBB REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)
find_package(ZLIB REQUIRED)
find_package(Threads REQUIRED)
find_package(BLAS REQUIRED)
find_package(LAPACK REQUIRED)

# SuiteSparse 5.x (Debian 12) ships no CMake config: find CHOLMOD and its companions by hand.
find_path(CHOLMOD_INCLUDE_DIR cholmod.h PATH_SUFFIXES suitesparse REQUIRED)
foreach(lib cholmod amd camd colamd ccolamd suitesparseconfig metis)
  find_library(XPD_LIB_${lib} ${lib} REQUIRED)
  list(APPEND CHOLMOD_LIBRARIES ${XPD_LIB_${lib}})
endforeach()
add_library(xpd::cholmod INTERFACE IMPORTED)
target_include_directories(xpd::cholmod INTERFACE ${CHOLMOD_INCLUDE_DIR})
target_link_libraries(xpd::cholmod INTERFACE ${CHOLMOD_LIBRARIES} LAPACK::LAPACK BLAS::BLAS)

# TetGen 1.5 library (libtet1.5-dev): conforming tetrahedralization of closed surfaces.
find_path(TETGEN_INCLUDE_DIR tetgen.h REQUIRED)
find_library(TETGEN_LIBRARY tet REQUIRED)
add_library(xpd::tetgen INTERFACE IMPORTED)
target_include_directories(xpd::tetgen INTERFACE ${TETGEN_INCLUDE_DIR})
target_compile_definitions(xpd::tetgen INTERFACE TETLIBRARY)
target_link_libraries(xpd::tetgen INTERFACE ${TETGEN_LIBRARY})
