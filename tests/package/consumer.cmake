# Builds examples/consumer against the installed package (MODE find_package: its CMakeLists.txt with
# find_package(posenc); MODE pkg_config: one compiler call with `pkg-config --cflags --libs posenc`), runs it on
# Llama 3.1's config and checks what it prints: the config's rope type, rotary_dim and layout, and |q| of every
# rotated token, which a rotation keeps (16 for ones in 2 heads x 128 channels; the attention factor is 1).
# MODE c builds examples/c, a C-only project, with find_package(posenc) and runs it (|x| kept by the rotation);
# MODE c_shared does so against libposenc.so (posenc::c, then pkg-config's posenc-c) and checks that the library
# exports the C API alone.
# Usage: cmake -DMODE=find_package|c|c_shared|pkg_config -DPREFIX=<install prefix> -DCXX=<c++> -DCC=<cc> -DGENERATOR=<gen>
#              -DMAKE_PROGRAM=<ninja> -DLIBDIR=<lib dir under PREFIX> -DSOURCE_DIR=<repo> -DOUT=<dir>
#              -P consumer.cmake
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    list(JOIN ARGN " " cmd)
    message(FATAL_ERROR "`${cmd}` failed (${rc}):\n${out}\n${err}")
  endif()
  set(run_output "${out}" PARENT_SCOPE)
endfunction()

# What examples/c prints for llama3.1-8b: its rope type and dims, and |x| of 4 rotated positions, which a rotation
# keeps (sqrt(128) for a head of 128 ones).
function(check_c_output output)
  if(NOT output MATCHES "rope_type llama3, rotary_dim 128, head_dim 128\n")
    message(FATAL_ERROR "the C example did not report llama3.1-8b's rope_type llama3, rotary_dim 128, head_dim 128")
  endif()
  string(REGEX MATCHALL "\\|x\\| = [0-9.]+" norms "${output}")
  list(LENGTH norms n_norms)
  if(NOT n_norms EQUAL 4)
    message(FATAL_ERROR "expected |x| of 4 positions, got ${n_norms}")
  endif()
  foreach(norm IN LISTS norms)
    if(NOT norm STREQUAL "|x| = 11.3137")
      message(FATAL_ERROR "a rotation changed |x|: ${norm}, expected 11.3137")
    endif()
  endforeach()
endfunction()

file(REMOVE_RECURSE "${OUT}")
file(MAKE_DIRECTORY "${OUT}")
set(consumer "${SOURCE_DIR}/examples/consumer")
if(MODE STREQUAL "find_package")
  run("${CMAKE_COMMAND}" -S "${consumer}" -B "${OUT}" -G "${GENERATOR}" -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${PREFIX})
  run("${CMAKE_COMMAND}" --build "${OUT}")
elseif(MODE STREQUAL "c" OR MODE STREQUAL "c_shared")
  # A C-only project (examples/c, LANGUAGES C) through find_package and the C API: posenc::rope (static) for
  # MODE c, posenc::c (libposenc.so) for MODE c_shared.
  if(MODE STREQUAL "c")
    set(target posenc::rope)
  else()
    set(target posenc::c)
  endif()
  run("${CMAKE_COMMAND}" -S "${SOURCE_DIR}/examples/c" -B "${OUT}" -G "${GENERATOR}"
      -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM} -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=${CC}
      -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${PREFIX} -DPOSENC_TARGET=${target})
  run("${CMAKE_COMMAND}" --build "${OUT}")
  file(READ "${OUT}/build.ninja" ninja)
  string(REGEX MATCH "LINK_LIBRARIES = [^\n]*" link_line "${ninja}")
  if(MODE STREQUAL "c")
    # posenc::rope: the RoPE core without the model and tokenizer libraries.
    if(NOT link_line MATCHES "libposenc_rope" OR link_line MATCHES "openblas|dnnl|pcre2|sentencepiece|libposenc\\.a")
      message(FATAL_ERROR "posenc::rope should link the RoPE core without BLAS, oneDNN or tokenizers: ${link_line}")
    endif()
  else()
    # posenc::c: libposenc.so alone (its own dependencies are its DT_NEEDED entries), no static archive.
    if(NOT link_line MATCHES "libposenc\\.so" OR link_line MATCHES "\\.a( |$)|openblas|fmt|hwy|gomp")
      message(FATAL_ERROR "posenc::c should link libposenc.so alone: ${link_line}")
    endif()
    # The library exports the C API and nothing else, every function under the version node POSENC_0.
    find_program(NM NAMES nm llvm-nm REQUIRED)
    set(lib "${PREFIX}/${LIBDIR}/libposenc.so")
    run("${NM}" -D --defined-only "${lib}")
    string(REGEX REPLACE "\n$" "" symbols "${run_output}")
    string(REPLACE "\n" ";" symbols "${symbols}")
    set(n_api 0)
    foreach(line IN LISTS symbols)
      string(REGEX REPLACE "^[0-9a-f]* *[A-Za-z] " "" name "${line}")
      if(name STREQUAL "POSENC_0")
        continue()
      endif()
      if(NOT name MATCHES "^posenc_[a-z_]+@@POSENC_0$")
        message(FATAL_ERROR "${lib} exports ${name}: only the C API (posenc_*@@POSENC_0) may be exported")
      endif()
      math(EXPR n_api "${n_api} + 1")
    endforeach()
    file(STRINGS "${SOURCE_DIR}/src/posenc/c_api.h" declared REGEX "^[a-z0-9_ ]+[ *]+posenc_[a-z_]+\\(")
    list(LENGTH declared n_declared)
    if(NOT n_api EQUAL n_declared)
      message(FATAL_ERROR "${lib} exports ${n_api} functions; posenc/c_api.h declares ${n_declared}")
    endif()
    # The same program through pkg-config's posenc-c: one compiler call, -lposenc finds the shared library.
    find_program(PKG_CONFIG pkg-config REQUIRED)
    set(ENV{PKG_CONFIG_PATH} "${PREFIX}/${LIBDIR}/pkgconfig")
    run("${PKG_CONFIG}" --cflags --libs posenc-c)
    separate_arguments(flags UNIX_COMMAND "${run_output}")
    run("${CC}" -std=c11 -O2 "${SOURCE_DIR}/examples/c/main.c" -o "${OUT}/posenc_c_pkg_config" ${flags} -lm
        "-Wl,-rpath,${PREFIX}/${LIBDIR}")
    run("${OUT}/posenc_c_pkg_config" "${SOURCE_DIR}/examples/configs/llama3.1-8b.json")
    check_c_output("${run_output}")
  endif()
  run("${OUT}/posenc_c_example" "${SOURCE_DIR}/examples/configs/llama3.1-8b.json")
  message(STATUS "posenc_c_example printed:\n${run_output}")
  check_c_output("${run_output}")
  return()
elseif(MODE STREQUAL "pkg_config")
  find_program(PKG_CONFIG pkg-config REQUIRED)
  set(ENV{PKG_CONFIG_PATH} "${PREFIX}/${LIBDIR}/pkgconfig")
  run("${PKG_CONFIG}" --cflags --libs posenc)
  separate_arguments(flags UNIX_COMMAND "${run_output}")
  run("${CXX}" -std=c++20 -O2 "${consumer}/main.cc" -o "${OUT}/posenc_consumer" ${flags})
else()
  message(FATAL_ERROR "MODE must be find_package, c, c_shared or pkg_config, got '${MODE}'")
endif()

run("${OUT}/posenc_consumer" "${SOURCE_DIR}/examples/configs/llama3.1-8b.json")
message(STATUS "posenc_consumer printed:\n${run_output}")
if(NOT run_output MATCHES "rope_type llama3, rotary_dim 128, half-split\n")
  message(FATAL_ERROR "the consumer did not report llama3.1-8b's rope_type llama3, rotary_dim 128, half-split")
endif()
string(REGEX MATCHALL "\\|q\\| = [0-9.]+" norms "${run_output}")
list(LENGTH norms n_norms)
if(NOT n_norms EQUAL 4)
  message(FATAL_ERROR "expected |q| of 4 tokens, got ${n_norms}")
endif()
foreach(norm IN LISTS norms)
  if(NOT norm STREQUAL "|q| = 16.0000")
    message(FATAL_ERROR "a rotation changed |q|: ${norm}, expected 16.0000")
  endif()
endforeach()
