# One recipe per dependency. Everything comes from Debian packages (scripts/setup).
find_package(Eigen3 3.4 REQUIRED NO_MODULE)
find_package(TBB REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(CLI11 REQUIRED)
find_package(fmt REQUIRED)
find_package(ZLIB REQUIRED)
find_package(Threads REQUIRED)

# CHOLMOD and TetGen (no CMake package files on Debian 12): the same recipe the installed
# xpdConfig.cmake uses.
include(${CMAKE_CURRENT_LIST_DIR}/xpd_native_deps.cmake)
