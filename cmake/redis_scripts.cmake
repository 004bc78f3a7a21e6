# The Redis backend's script table, made from its Lua files: every line
# "-- @script name" of src/store/redis/lua/FILE.lua becomes X(NAME) of
# REDIS_SCRIPTS, in file order, so a new script is written in its Lua file
# only. REDIS_LUA_FILES lists the files that hold scripts (not the prelude).
#   cmake -DDIR=lua-dir -DFILES="core;jobs;..." -DOUT=header -P redis_scripts.cmake
set(scripts "")
set(files "")
foreach(f ${FILES})
  file(STRINGS "${DIR}/${f}.lua" marks REGEX "^-- @script ")
  string(APPEND scripts "  /* lua/${f}.lua */ \\\n")
  foreach(m ${marks})
    string(REGEX REPLACE "^-- @script +([A-Za-z0-9_]+).*$" "\\1" name "${m}")
    string(TOUPPER "${name}" name)
    string(APPEND scripts "  X(${name}) \\\n")
  endforeach()
  string(APPEND files "  X(${f}) \\\n")
endforeach()
set(text "/* Generated from the files of src/store/redis/lua by cmake/redis_scripts.cmake: do not edit. */\n"
  "#define REDIS_SCRIPTS(X) \\\n${scripts}\n"
  "#define REDIS_LUA_FILES(X) \\\n${files}\n")
string(CONCAT text ${text})
# Written only when it changed: every file that includes it would build again.
set(old "")
if(EXISTS "${OUT}")
  file(READ "${OUT}" old)
endif()
if(NOT old STREQUAL text)
  file(WRITE "${OUT}" "${text}")
endif()
