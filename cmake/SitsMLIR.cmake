# Finds LLVM/MLIR 22 and, with SITS_STATIC_TOOLS, makes every MLIR library link
# the static LLVM libraries instead of Debian's libLLVM dylib, so that sitsc and
# sits-opt run on machines without LLVM (the GPU machine has none).

find_package(MLIR REQUIRED CONFIG
  HINTS /usr/lib/llvm-22/lib/cmake/mlir)
message(STATUS "Using MLIRConfig.cmake in: ${MLIR_DIR}")
message(STATUS "Using LLVMConfig.cmake in: ${LLVM_DIR}")
if(NOT LLVM_VERSION_MAJOR EQUAL 22)
  message(FATAL_ERROR "sits needs LLVM/MLIR 22, found ${LLVM_PACKAGE_VERSION}")
endif()

list(APPEND CMAKE_MODULE_PATH ${MLIR_CMAKE_DIR} ${LLVM_CMAKE_DIR})
include(TableGen)
include(AddLLVM)
include(AddMLIR)

include_directories(SYSTEM ${LLVM_INCLUDE_DIRS} ${MLIR_INCLUDE_DIRS})
# Sources include each other relative to the repository root; generated
# TableGen files land at the same relative path under the build tree.
include_directories(${PROJECT_SOURCE_DIR} ${PROJECT_BINARY_DIR})
add_definitions(${LLVM_DEFINITIONS})
if(NOT LLVM_ENABLE_RTTI)
  add_compile_options($<$<COMPILE_LANGUAGE:CXX>:-fno-rtti>)
endif()

if(SITS_STATIC_TOOLS)
  # Debian's MLIR static libraries all name the imported target `LLVM` (the
  # dylib) for their LLVM symbols. Point that target at the static LLVM
  # archives MLIR needs, in link order, and static zstd/zlib. LLVMSupport also
  # names libz3.so, but only its SMT solver needs z3 and MLIR never references
  # it, so that archive member is never pulled in.
  find_library(SITS_ZSTD_STATIC NAMES libzstd.a REQUIRED)
  find_library(SITS_ZLIB_STATIC NAMES libz.a REQUIRED)
  set(_sits_llvm_archives)
  foreach(_component Remarks BitstreamReader Support Demangle)
    set(_lib "${LLVM_LIBRARY_DIR}/libLLVM${_component}.a")
    if(NOT EXISTS ${_lib})
      message(FATAL_ERROR "SITS_STATIC_TOOLS needs ${_lib} (package llvm-22-dev)")
    endif()
    list(APPEND _sits_llvm_archives ${_lib})
  endforeach()
  list(POP_FRONT _sits_llvm_archives _sits_llvm_first)
  get_target_property(_sits_llvm_configs LLVM IMPORTED_CONFIGURATIONS)
  foreach(_cfg ${_sits_llvm_configs})
    set_target_properties(LLVM PROPERTIES
      IMPORTED_LOCATION_${_cfg} ${_sits_llvm_first}
      IMPORTED_SONAME_${_cfg} ""
      IMPORTED_NO_SONAME_${_cfg} TRUE)
  endforeach()
  set_target_properties(LLVM PROPERTIES
    IMPORTED_LOCATION ${_sits_llvm_first}
    IMPORTED_NO_SONAME TRUE
    INTERFACE_LINK_LIBRARIES
      "${_sits_llvm_archives};${SITS_ZSTD_STATIC};${SITS_ZLIB_STATIC};pthread;dl;rt;m")
  # libstdc++ and libgcc from the build machine, so only libc/libm stay dynamic.
  set(SITS_STATIC_TOOL_LINK_OPTIONS -static-libstdc++ -static-libgcc)
else()
  set(SITS_STATIC_TOOL_LINK_OPTIONS)
endif()

# sits_tool(<name> SOURCES ... LIBS ...): a compiler-side executable that links
# statically when SITS_STATIC_TOOLS is on.
function(sits_tool name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_LIBS})
  target_link_options(${name} PRIVATE ${SITS_STATIC_TOOL_LINK_OPTIONS})
endfunction()
