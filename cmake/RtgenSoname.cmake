# rtgen_dlopen_names(<lib> <fallback-soname> <out-soname> <out-path>): what a backend that
# dlopens <lib> at run time instead of linking it should open. <out-soname> is the DT_SONAME
# recorded in <lib> (the name the loader finds through ld.so.cache, LD_LIBRARY_PATH or RUNPATH;
# never the unversioned development symlink, which only -dev packages ship), or
# <fallback-soname> when objdump cannot read it. <out-path> is that soname in <lib>'s directory,
# for libraries outside the loader's search path (the CUDA toolkit is often installed so).
function(rtgen_dlopen_names lib fallback out_soname out_path)
  set(soname "")
  if(CMAKE_OBJDUMP AND EXISTS "${lib}")
    execute_process(COMMAND ${CMAKE_OBJDUMP} -p "${lib}" OUTPUT_VARIABLE dump
                    ERROR_QUIET RESULT_VARIABLE rc)
    if(rc EQUAL 0 AND dump MATCHES "SONAME +([^ \t\r\n]+)")
      set(soname "${CMAKE_MATCH_1}")
    endif()
  endif()
  if(NOT soname)
    set(soname "${fallback}")
  endif()
  get_filename_component(dir "${lib}" DIRECTORY)
  set(${out_soname} "${soname}" PARENT_SCOPE)
  set(${out_path} "${dir}/${soname}" PARENT_SCOPE)
endfunction()
