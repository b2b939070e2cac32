# Installs the build tree into a fresh PREFIX (the fixture of the package.* tests).
# Usage: cmake -DBUILD_DIR=<build> -DPREFIX=<dir> -P install.cmake
file(REMOVE_RECURSE "${PREFIX}")
execute_process(COMMAND "${CMAKE_COMMAND}" --install "${BUILD_DIR}" --prefix "${PREFIX}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} --prefix ${PREFIX} failed (${rc})")
endif()
# The installed CLI runs, and finds the bundled data it runs on by default under <prefix>/share/posenc/data.
execute_process(COMMAND "${PREFIX}/bin/posenc" --version RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 0 OR NOT out MATCHES "^posenc [0-9]+\\.[0-9]+\\.[0-9]+ \\(commit ")
  message(FATAL_ERROR "the installed ${PREFIX}/bin/posenc --version failed (${rc}):\n${out}\n${err}")
endif()
foreach(f stories260K.bin tok512.bin)
  if(NOT EXISTS "${PREFIX}/share/posenc/data/${f}")
    message(FATAL_ERROR "cmake --install did not install the bundled ${f} under ${PREFIX}/share/posenc/data")
  endif()
endforeach()
