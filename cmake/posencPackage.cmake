# posenc as an installable package: `cmake --install build --prefix P` installs the public headers, the library,
# posencConfig.cmake (+ version file) exporting posenc::posenc, and posenc.pc. Included from CMakeLists.txt.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Public headers: the top-level headers of these rooms, plus src/posenc/*.h (the C API). Subfolders of a room
# (rope/scaling/) are its implementation; kernels/, blas/ and the application rooms (model/, eval/, demo/) are
# private. Making a room public is one word in this list; no public header may include a private one or
# Highway (the package.public_headers test compiles each installed header alone and checks both).
set(POSENC_PUBLIC_ROOMS core rope pe attention io dist)

set_target_properties(posenc_lib PROPERTIES EXPORT_NAME posenc
                                            POSITION_INDEPENDENT_CODE ON)  # also linked into the Python module
target_compile_features(posenc_lib PUBLIC cxx_std_20)

# Headers of the public rooms that are test doubles or the CLI's internals, not API: left out of the install.
set(POSENC_INTERNAL_HEADERS
    attention/ring_simulation.h  # context-parallel ring on threads in one process (tests' double of MPI ranks)
    attention/flash_tile.h       # the tile loop's blocking constants and scratch (the kernels' own)
    core/huge_page_buffer.h      # storage of weights packed at load
    dist/in_process.h            # communicator over threads (the ring's test double)
    io/output_file.h             # the CLI's output checks and atomic writes
    io/input_file.h)             # the CLI's whole-file reads
file(GLOB _posenc_top_headers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/posenc/*.h)
install(FILES ${_posenc_top_headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/posenc)
foreach(_room IN LISTS POSENC_PUBLIC_ROOMS)
  file(GLOB _posenc_room_headers CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/posenc/${_room}/*.h)
  foreach(_internal IN LISTS POSENC_INTERNAL_HEADERS)
    list(REMOVE_ITEM _posenc_room_headers ${CMAKE_SOURCE_DIR}/src/posenc/${_internal})
  endforeach()
  install(FILES ${_posenc_room_headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/posenc/${_room})
endforeach()

install(TARGETS posenc_lib posenc_rope EXPORT posencTargets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
if(TARGET posenc_c_shared)  # libposenc.so.0 (the C API), posenc::c
  install(TARGETS posenc_c_shared EXPORT posencTargets LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
# The CLI, and the bundled model, tokenizer and texts it runs on by default (found at <prefix>/share/posenc/data).
install(TARGETS posenc RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${CMAKE_SOURCE_DIR}/data/ DESTINATION ${CMAKE_INSTALL_DATADIR}/posenc/data)
set(POSENC_CMAKE_INSTALL_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/posenc)
install(EXPORT posencTargets NAMESPACE posenc:: DESTINATION ${POSENC_CMAKE_INSTALL_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/posencConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/package/posencConfig.cmake
                              INSTALL_DESTINATION ${POSENC_CMAKE_INSTALL_DIR})
# 0.x: a minor version may change the API, so only the same major.minor is compatible.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/package/posencConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/package/posencConfig.cmake ${CMAKE_BINARY_DIR}/package/posencConfigVersion.cmake
              ${CMAKE_SOURCE_DIR}/cmake/posencDependencies.cmake
        DESTINATION ${POSENC_CMAKE_INSTALL_DIR})

# pkg-config: a static library, so its dependencies go into Requires/Libs (plain `pkg-config --libs` must link);
# -lstdc++ -lm let a C program link the C API. The archives are named by path: -lposenc would find libposenc.so,
# the C API alone.
list(JOIN POSENC_PC_REQUIRES " " POSENC_PC_REQUIRES_STRING)
list(APPEND POSENC_PC_LIBS -lstdc++ -lm)
list(JOIN POSENC_PC_LIBS " " POSENC_PC_LIBS_STRING)
file(RELATIVE_PATH POSENC_PC_PREFIX_FROM_PCFILEDIR "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
configure_file(${CMAKE_SOURCE_DIR}/cmake/posenc.pc.in ${CMAKE_BINARY_DIR}/package/posenc.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/package/posenc.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(TARGET posenc_c_shared)  # posenc-c.pc: the C API through libposenc.so, no other library on the link line
  configure_file(${CMAKE_SOURCE_DIR}/cmake/posenc-c.pc.in ${CMAKE_BINARY_DIR}/package/posenc-c.pc @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/package/posenc-c.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
endif()

# ---- tests: the C API from C, the install, the public headers alone, two consumers of the installed tree ----
if(NOT POSENC_BUILD_TESTS)
  return()
endif()
enable_language(C)
add_executable(posenc_c_api_test ${CMAKE_SOURCE_DIR}/tests/c_api_test.c)
set_target_properties(posenc_c_api_test PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF
                                                   LINKER_LANGUAGE CXX)
target_compile_options(posenc_c_api_test PRIVATE -Wall -Wextra -pedantic)
target_link_libraries(posenc_c_api_test PRIVATE posenc_rope m)  # the C API needs the RoPE core alone
add_test(NAME c_api.from_c COMMAND posenc_c_api_test)

# The install and consumer tests link a plain program against the installed library: a sanitizer build turns them
# off (-DPOSENC_PACKAGE_TESTS=OFF), since its instrumented library needs the sanitizer runtime.
if(POSENC_SANITIZE)
  set(_posenc_package_tests_default OFF)
else()
  set(_posenc_package_tests_default ON)
endif()
option(POSENC_PACKAGE_TESTS "Test the install: public headers alone, consumers via find_package and pkg-config"
       ${_posenc_package_tests_default})
if(NOT POSENC_PACKAGE_TESTS)
  return()
endif()
set(POSENC_PACKAGE_TEST_DIR ${CMAKE_BINARY_DIR}/package-test)
set(POSENC_PACKAGE_PREFIX ${POSENC_PACKAGE_TEST_DIR}/prefix)
add_test(NAME package.install
         COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR} -DPREFIX=${POSENC_PACKAGE_PREFIX}
                 -P ${CMAKE_SOURCE_DIR}/tests/package/install.cmake)
set_tests_properties(package.install PROPERTIES FIXTURES_SETUP posenc_installed)
string(REPLACE ";" "," _posenc_rooms_arg "${POSENC_PUBLIC_ROOMS}")
string(REPLACE ";" "," _posenc_internal_arg "${POSENC_INTERNAL_HEADERS}")
add_test(NAME package.public_headers
         COMMAND ${CMAKE_COMMAND} -DPREFIX=${POSENC_PACKAGE_PREFIX} -DCXX=${CMAKE_CXX_COMPILER}
                 -DCC=${CMAKE_C_COMPILER} -DROOMS=${_posenc_rooms_arg} -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
                 -DINTERNAL=${_posenc_internal_arg}
                 -DWORK_DIR=${POSENC_PACKAGE_TEST_DIR}/headers
                 -P ${CMAKE_SOURCE_DIR}/tests/package/check_headers.cmake)
set(_posenc_consumer_modes find_package c pkg_config)
if(TARGET posenc_c_shared)
  list(APPEND _posenc_consumer_modes c_shared)
endif()
foreach(_mode IN LISTS _posenc_consumer_modes)
  add_test(NAME package.consumer_${_mode}
           COMMAND ${CMAKE_COMMAND} -DMODE=${_mode} -DPREFIX=${POSENC_PACKAGE_PREFIX} -DCXX=${CMAKE_CXX_COMPILER}
                   -DCC=${CMAKE_C_COMPILER}
                   -DGENERATOR=${CMAKE_GENERATOR} -DMAKE_PROGRAM=${CMAKE_MAKE_PROGRAM}
                   -DLIBDIR=${CMAKE_INSTALL_LIBDIR} -DSOURCE_DIR=${CMAKE_SOURCE_DIR}
                   -DOUT=${POSENC_PACKAGE_TEST_DIR}/consumer-${_mode}
                   -P ${CMAKE_SOURCE_DIR}/tests/package/consumer.cmake)
endforeach()
list(TRANSFORM _posenc_consumer_modes PREPEND package.consumer_ OUTPUT_VARIABLE _posenc_consumer_tests)
set_tests_properties(package.public_headers ${_posenc_consumer_tests} PROPERTIES FIXTURES_REQUIRED posenc_installed)
