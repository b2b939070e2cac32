# Builds examples/consumer against the installed package (MODE find_package: its CMakeLists.txt with
# find_package(posenc); MODE pkg_config: one compiler call with `pkg-config --cflags --libs posenc`), runs it on
# Llama 3.1's config and checks what it prints: the config's rope type, rotary_dim and layout, and |q| of every
# rotated token, which a rotation keeps (16 for ones in 2 heads x 128 channels; the attention factor is 1).
# MODE c builds examples/c, a C-only project, with find_package(posenc) and runs it (|x| kept by the rotation).
# Usage: cmake -DMODE=find_package|c|pkg_config -DPREFIX=<install prefix> -DCXX=<c++> -DCC=<cc> -DGENERATOR=<gen>
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

file(REMOVE_RECURSE "${OUT}")
file(MAKE_DIRECTORY "${OUT}")
set(consumer "${SOURCE_DIR}/examples/consumer")
if(MODE STREQUAL "find_package")
  run("${CMAKE_COMMAND}" -S "${consumer}" -B "${OUT}" -G "${GENERATOR}" -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}
      -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${PREFIX})
  run("${CMAKE_COMMAND}" --build "${OUT}")
elseif(MODE STREQUAL "c")
  # A C-only project (examples/c, LANGUAGES C) through find_package and the C API.
  run("${CMAKE_COMMAND}" -S "${SOURCE_DIR}/examples/c" -B "${OUT}" -G "${GENERATOR}"
      -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM} -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=${CC}
      -DCMAKE_CXX_COMPILER=${CXX} -DCMAKE_PREFIX_PATH=${PREFIX})
  run("${CMAKE_COMMAND}" --build "${OUT}")
  # It links posenc::rope: the RoPE core without the model and tokenizer libraries.
  file(READ "${OUT}/build.ninja" ninja)
  string(REGEX MATCH "LINK_LIBRARIES = [^\n]*" link_line "${ninja}")
  if(NOT link_line MATCHES "libposenc_rope" OR link_line MATCHES "openblas|dnnl|pcre2|sentencepiece|libposenc\\.a")
    message(FATAL_ERROR "posenc::rope should link the RoPE core without BLAS, oneDNN or tokenizers: ${link_line}")
  endif()
  run("${OUT}/posenc_c_example" "${SOURCE_DIR}/examples/configs/llama3.1-8b.json")
  message(STATUS "posenc_c_example printed:\n${run_output}")
  if(NOT run_output MATCHES "rope_type llama3, rotary_dim 128, head_dim 128\n")
    message(FATAL_ERROR "the C example did not report llama3.1-8b's rope_type llama3, rotary_dim 128, head_dim 128")
  endif()
  # A rotation keeps |x|: sqrt(128) for a head of 128 ones.
  string(REGEX MATCHALL "\\|x\\| = [0-9.]+" norms "${run_output}")
  list(LENGTH norms n_norms)
  if(NOT n_norms EQUAL 4)
    message(FATAL_ERROR "expected |x| of 4 positions, got ${n_norms}")
  endif()
  foreach(norm IN LISTS norms)
    if(NOT norm STREQUAL "|x| = 11.3137")
      message(FATAL_ERROR "a rotation changed |x|: ${norm}, expected 11.3137")
    endif()
  endforeach()
  return()
elseif(MODE STREQUAL "pkg_config")
  find_program(PKG_CONFIG pkg-config REQUIRED)
  set(ENV{PKG_CONFIG_PATH} "${PREFIX}/${LIBDIR}/pkgconfig")
  run("${PKG_CONFIG}" --cflags --libs posenc)
  separate_arguments(flags UNIX_COMMAND "${run_output}")
  run("${CXX}" -std=c++20 -O2 "${consumer}/main.cc" -o "${OUT}/posenc_consumer" ${flags})
else()
  message(FATAL_ERROR "MODE must be find_package, c or pkg_config, got '${MODE}'")
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
