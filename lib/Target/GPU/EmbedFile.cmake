# Writes the text of IN into OUT as a C++ raw string literal:
#   static const char NAME[] = R"h20embed(...)h20embed";
# Run as: cmake -DIN=file -DOUT=file.inc -DNAME=identifier -P EmbedFile.cmake
file(READ "${IN}" content)
string(FIND "${content}" ")h20embed\"" clash)
if(NOT clash EQUAL -1)
  message(FATAL_ERROR "EmbedFile: ${IN} contains the raw-string delimiter )h20embed\"")
endif()
set(text "// Generated from ${IN} by EmbedFile.cmake; do not edit.\n")
string(APPEND text "static const char ${NAME}[] = R\"h20embed(${content})h20embed\";\n")
# Rewrite only on change, so dependants are not rebuilt needlessly.
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
  if(old STREQUAL text)
    return()
  endif()
endif()
file(WRITE "${OUT}" "${text}")
