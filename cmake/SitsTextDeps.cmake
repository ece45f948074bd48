# The libraries the text interface (runtime/tokenizer, runtime/chat,
# runtime/text) is built with, found once for every target that uses them:
#
#   sits::pcre2     PCRE2 (8-bit), the tokenizer's split regexes
#   sits::utf8proc  utf8proc, Unicode normalization and properties
#   sits::json      nlohmann-json (header-only), reading the JSON files
#
# All three are Debian packages (scripts/install-deps.sh). PCRE2 and
# utf8proc are linked from their static archives where those exist (Debian's
# are position-independent), so that sitsc stays a libc/libm-only binary and
# the runtime tools and the Python module run on machines without them. A
# machine without the packages (the GPU machines) can be pointed at copied
# headers and archives with CMAKE_PREFIX_PATH (bench/device/prepare.sh).

if(TARGET sits::json)
  return()
endif()

function(sits_find_c_library target header archive shared)
  string(MAKE_C_IDENTIFIER ${target} _var)
  find_path(SITS_${_var}_INCLUDE ${header} REQUIRED)
  find_library(SITS_${_var}_LIBRARY NAMES ${archive} ${shared} REQUIRED)
  add_library(${target} INTERFACE IMPORTED GLOBAL)
  set_target_properties(${target} PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES ${SITS_${_var}_INCLUDE}
    INTERFACE_LINK_LIBRARIES ${SITS_${_var}_LIBRARY})
endfunction()

sits_find_c_library(sits::pcre2 pcre2.h libpcre2-8.a pcre2-8)
sits_find_c_library(sits::utf8proc utf8proc.h libutf8proc.a utf8proc)

find_package(nlohmann_json 3 QUIET CONFIG)
add_library(sits::json INTERFACE IMPORTED GLOBAL)
if(nlohmann_json_FOUND)
  set_target_properties(sits::json PROPERTIES
    INTERFACE_LINK_LIBRARIES nlohmann_json::nlohmann_json)
else()
  find_path(SITS_NLOHMANN_INCLUDE nlohmann/json.hpp REQUIRED)
  set_target_properties(sits::json PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES ${SITS_NLOHMANN_INCLUDE})
endif()
