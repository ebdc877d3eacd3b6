# reach.cmake: builds one target of the layer-reach check (tests/CMakeLists.txt) and checks the
# outcome. -DBUILD=<build dir> -DTARGET=<target> -DHEADER=<header it includes>
# -DEXPECT=ok|missing: ok, the build succeeds; missing, it fails because HEADER is not found from
# that layer (and for no other reason).
cmake_minimum_required(VERSION 3.25)
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD} --target ${TARGET}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
# gcc: "kir.h: No such file or directory"; clang: "'kir.h' file not found".
string(REGEX MATCH "${HEADER}'?:? (No such file or directory|file not found)" not_found "${out}")
if(EXPECT STREQUAL "ok")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${TARGET}: expected to build, but:\n${out}")
  endif()
  message(STATUS "${TARGET}: ${HEADER} found, as it should be")
elseif(EXPECT STREQUAL "missing")
  if(rc EQUAL 0)
    message(FATAL_ERROR "${TARGET}: ${HEADER} reached up a layer and built:\n${out}")
  endif()
  if(NOT not_found)
    message(FATAL_ERROR "${TARGET}: failed, but not for a missing ${HEADER}:\n${out}")
  endif()
  message(STATUS "${TARGET}: ${HEADER} not found, as it should not be")
else()
  message(FATAL_ERROR "EXPECT must be ok or missing")
endif()
