# The installed public headers: exactly the top-level headers of the public rooms (plus posenc/*.h) less the
# internal ones (test doubles, the CLI's I/O helpers: INTERNAL, relative to src/posenc), each of
# which compiles on its own against the installed tree only (so it includes no private header) and pulls in no
# Highway header; the C API header also compiles as C99.
# Usage: cmake -DPREFIX=<install prefix> -DCXX=<c++> -DCC=<cc> -DROOMS=core,rope,... -DSOURCE_DIR=<repo>
#              -DINTERNAL=io/input_file.h,... -DWORK_DIR=<scratch dir> -P check_headers.cmake
string(REPLACE "," ";" ROOMS "${ROOMS}")
string(REPLACE "," ";" INTERNAL "${INTERNAL}")
set(include_dir "${PREFIX}/include")
set(failures "")

# The installed set equals the declared one.
file(GLOB_RECURSE installed RELATIVE "${include_dir}" "${include_dir}/posenc/*")
set(expected "")
foreach(dir IN ITEMS "" ${ROOMS})
  if(dir STREQUAL "")
    file(GLOB headers RELATIVE "${SOURCE_DIR}/src" "${SOURCE_DIR}/src/posenc/*.h")
  else()
    file(GLOB headers RELATIVE "${SOURCE_DIR}/src" "${SOURCE_DIR}/src/posenc/${dir}/*.h")
  endif()
  list(APPEND expected ${headers})
endforeach()
foreach(internal IN LISTS INTERNAL)
  if(NOT EXISTS "${SOURCE_DIR}/src/posenc/${internal}")
    list(APPEND failures "the internal header ${internal} named by the package's rules does not exist")
  endif()
  list(REMOVE_ITEM expected "posenc/${internal}")
endforeach()
list(SORT installed)
list(SORT expected)
if(NOT installed STREQUAL expected)
  list(APPEND failures
       "installed headers differ from the public rooms' headers:\n  installed: ${installed}\n  expected: ${expected}")
endif()

set(n_checked 0)
file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")
foreach(header IN LISTS installed)
  string(MAKE_C_IDENTIFIER "${header}" stem)
  set(tu "${WORK_DIR}/${stem}.cc")
  file(WRITE "${tu}" "#include <${header}>\n")  # a translation unit that includes only this header
  execute_process(COMMAND "${CXX}" -std=c++20 -fsyntax-only -Wall -Wextra -Werror -H -I "${include_dir}" "${tu}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    list(APPEND failures "${header} does not compile alone against the installed tree:\n${err}")
    continue()
  endif()
  string(REGEX MATCHALL "[^\n]*/hwy/[^\n]*" hwy_lines "${err}")
  if(hwy_lines)
    list(APPEND failures "${header} includes Highway: ${hwy_lines}")
  endif()
  if(header MATCHES "c_api\\.h$")
    file(WRITE "${WORK_DIR}/${stem}.c" "#include <${header}>\n")
    execute_process(COMMAND "${CC}" -std=c99 -pedantic -fsyntax-only -Wall -Wextra -Werror
                            -I "${include_dir}" "${WORK_DIR}/${stem}.c"
                    RESULT_VARIABLE rc ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
      list(APPEND failures "${header} does not compile as C99:\n${err}")
    endif()
  endif()
  math(EXPR n_checked "${n_checked} + 1")
endforeach()

if(failures)
  list(JOIN failures "\n" text)
  message(FATAL_ERROR "${text}")
endif()
message(STATUS "${n_checked} public headers compile alone, none includes Highway")
