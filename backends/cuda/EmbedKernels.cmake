# Writes the kernel-library headers as C++ raw string literals, one
# `{"sits/<name>", R"...(<text>)..."}` initializer per header, for
# KernelLibrary.cpp. Run at build time: cmake -DINPUT_DIR=... -DOUTPUT=...
# -DHEADERS=a.cuh,b.cuh -P EmbedKernels.cmake

string(REPLACE "," ";" HEADERS "${HEADERS}")
set(_text "// Generated from backends/cuda/kernels by EmbedKernels.cmake.\n")
foreach(_header ${HEADERS})
  file(READ "${INPUT_DIR}/${_header}" _content)
  string(FIND "${_content}" ")sits_cuh\"" _clash)
  if(NOT _clash EQUAL -1)
    message(FATAL_ERROR "${_header} contains the raw-string delimiter")
  endif()
  string(APPEND _text "{\"sits/${_header}\", R\"sits_cuh(${_content})sits_cuh\"},\n")
endforeach()
# Only touch the output when it changes, so that nothing rebuilds needlessly.
if(EXISTS "${OUTPUT}")
  file(READ "${OUTPUT}" _old)
  if(_old STREQUAL _text)
    return()
  endif()
endif()
file(WRITE "${OUTPUT}" "${_text}")
