# Protobuf and the ONNX schema. The C++ classes are generated from the
# onnx.proto that Debian's libonnx-dev installs; the compiler links protobuf
# statically when SITS_STATIC_TOOLS is on.

find_program(SITS_PROTOC protoc REQUIRED)
find_path(SITS_ONNX_PROTO_DIR onnx/onnx.proto
  HINTS /usr/include
  DOC "Folder holding onnx/onnx.proto (package libonnx-dev)")
if(NOT SITS_ONNX_PROTO_DIR)
  message(FATAL_ERROR "onnx/onnx.proto not found: install libonnx-dev")
endif()
find_path(SITS_PROTOBUF_INCLUDE_DIR google/protobuf/message.h REQUIRED)
if(SITS_STATIC_TOOLS)
  find_library(SITS_PROTOBUF_LIBRARY NAMES libprotobuf.a REQUIRED)
else()
  find_library(SITS_PROTOBUF_LIBRARY NAMES protobuf REQUIRED)
endif()
