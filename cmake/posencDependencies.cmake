# The link dependencies of the posenc library, in one place. The build includes this file to find them
# (find_package); the installed posencConfig.cmake includes the installed copy, where the same lines become
# find_dependency calls, so a consumer's `find_package(posenc)` finds exactly what the library was built with.
#
# A new dependency of the library (a new room's) is one line:
#   posenc_dependency(<find_package arguments> [PKG_CONFIG <module>...] [PKG_CONFIG_LIBS <flag>...])
# PKG_CONFIG names the pkg-config modules posenc.pc requires for it; PKG_CONFIG_LIBS puts linker flags into
# posenc.pc instead (a package without a .pc file, or one whose compile flags must not reach consumers).
# Anything else this file does (setting a find variable, pkg_check_modules(... IMPORTED_TARGET ...) after
# posenc_dependency(PkgConfig)) runs in both places too.
# Link a dependency whose headers the public headers do not include PRIVATE (it is then exported as link-only).

if(POSENC_DEPENDENCIES_FOR_CONFIG)  # set by posencConfig.cmake
  include(CMakeFindDependencyMacro)
  macro(posenc_dependency)
    cmake_parse_arguments(_posenc_dep "" "" "PKG_CONFIG;PKG_CONFIG_LIBS" ${ARGN})
    find_dependency(${_posenc_dep_UNPARSED_ARGUMENTS})
  endmacro()
else()
  set(POSENC_PC_REQUIRES "")
  set(POSENC_PC_LIBS "")
  macro(posenc_dependency)
    cmake_parse_arguments(_posenc_dep "" "" "PKG_CONFIG;PKG_CONFIG_LIBS" ${ARGN})
    find_package(${_posenc_dep_UNPARSED_ARGUMENTS} REQUIRED)
    list(APPEND POSENC_PC_REQUIRES ${_posenc_dep_PKG_CONFIG})
    list(APPEND POSENC_PC_LIBS ${_posenc_dep_PKG_CONFIG_LIBS})
  endmacro()
endif()

posenc_dependency(nlohmann_json 3.10 PKG_CONFIG nlohmann_json)  # public: rope/hf_config.h takes nlohmann::json
posenc_dependency(fmt PKG_CONFIG fmt)
posenc_dependency(OpenMP PKG_CONFIG_LIBS -fopenmp)
set(_posenc_saved_bla_vendor "${BLA_VENDOR}")
set(BLA_VENDOR OpenBLAS)
posenc_dependency(BLAS PKG_CONFIG openblas)
set(BLA_VENDOR "${_posenc_saved_bla_vendor}")
posenc_dependency(hwy 1.0.3 PKG_CONFIG_LIBS -lhwy)  # -lhwy, not libhwy.pc: no Highway compile flags for consumers
# Tokenizers: PCRE2 (8-bit, UTF + Unicode properties, JIT) for the byte-level BPE pre-tokenizer regexes;
# sentencepiece for tokenizer.model files; utf8proc for the NFC normalizer of tokenizer.json files.
posenc_dependency(PkgConfig)
pkg_check_modules(PCRE2 REQUIRED IMPORTED_TARGET libpcre2-8)
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)
list(APPEND POSENC_PC_REQUIRES libpcre2-8 sentencepiece libutf8proc)
# oneDNN (libdnnl-dev): the bf16 weight products on the matrix units (blas/bf16_matmul). Found by path: Debian's
# dnnl-config.cmake also requires OpenCL, which posenc does not use.
find_path(POSENC_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.hpp REQUIRED)
find_library(POSENC_DNNL_LIBRARY dnnl REQUIRED)
if(NOT TARGET posenc::dnnl)
  add_library(posenc::dnnl UNKNOWN IMPORTED)
  set_target_properties(posenc::dnnl PROPERTIES IMPORTED_LOCATION "${POSENC_DNNL_LIBRARY}"
                        INTERFACE_INCLUDE_DIRECTORIES "${POSENC_DNNL_INCLUDE_DIR}")
endif()
if(NOT POSENC_DEPENDENCIES_FOR_CONFIG)
  list(APPEND POSENC_PC_LIBS -ldnnl)
endif()
