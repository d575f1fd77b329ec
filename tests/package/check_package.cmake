# The installed package, checked as its users meet it (docs/library.md):
#   1. cmake --install BUILD --prefix WORK/prefix
#   2. examples/ configured and built as a separate CMake project against that prefix only
#   3. hello_pd and run_scene (on SCENE, MAX_FRAMES frames) run and print their results;
#      the installed `xpd` runs too.
# Variables: VIEWER (the build bundled the viewer), BUILD, SOURCE, WORK, SCENE, MAX_FRAMES, CXX (the compiler of the build), GENERATOR.
foreach(v BUILD SOURCE WORK SCENE MAX_FRAMES CXX GENERATOR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "check_package.cmake: -D${v}=... is required")
  endif()
endforeach()

function(run_step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "package check, ${name} failed (exit ${rc}):\n${out}\n${err}")
  endif()
  set(STEP_OUTPUT "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK})
set(prefix ${WORK}/prefix)
run_step("install" ${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix})
if(VIEWER AND NOT EXISTS ${prefix}/share/xpd/viewer/index.html)
  message(FATAL_ERROR "package check: the viewer bundle was built but not installed into share/xpd/viewer")
endif()
foreach(f include/xpd/config.hpp include/xpd/scene/run_writer.hpp lib/libxpd.a bin/xpd lib/cmake/xpd/xpdConfig.cmake
          lib/cmake/xpd/xpdConfigVersion.cmake lib/cmake/xpd/xpdTargets.cmake lib/cmake/xpd/xpd_native_deps.cmake)
  if(NOT EXISTS ${prefix}/${f})
    message(FATAL_ERROR "package check: ${prefix}/${f} was not installed")
  endif()
endforeach()

# Only the prefix: no package registry, no build tree.
run_step("configure examples" ${CMAKE_COMMAND} -S ${SOURCE}/examples -B ${WORK}/examples -G ${GENERATOR}
         -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${prefix}
         -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON)
run_step("build examples" ${CMAKE_COMMAND} --build ${WORK}/examples)

run_step("hello_pd" ${WORK}/examples/hello_pd)
message(STATUS "${STEP_OUTPUT}")
if(NOT STEP_OUTPUT MATCHES "tip displacement z = -[0-9]")
  message(FATAL_ERROR "hello_pd printed no downward tip displacement:\n${STEP_OUTPUT}")
endif()

run_step("run_scene" ${WORK}/examples/run_scene ${SCENE} ${WORK}/run ${MAX_FRAMES})
message(STATUS "${STEP_OUTPUT}")
foreach(f stats.json scene.json frames/0000.vtu)
  if(NOT EXISTS ${WORK}/run/${f})
    message(FATAL_ERROR "run_scene wrote no ${f}")
  endif()
endforeach()

run_step("installed xpd --version" ${prefix}/bin/xpd --version)
message(STATUS "${STEP_OUTPUT}")
run_step("installed xpd" ${prefix}/bin/xpd info box:3)
message(STATUS "${STEP_OUTPUT}")
message(STATUS "package check passed: installed into ${prefix}, examples built and run")
