# mpigan_add_layer(NAME SOURCES ... LINKS ...)
#
# Creates library target mpigan_<NAME> from the sources in <repo>/<NAME>/. Its headers are
# included as <mpigan/NAME/file.hpp>. The include root is a directory in the build tree holding a
# single symlink mpigan/NAME -> <repo>/NAME, and it is a PUBLIC include directory of this target
# only; a layer reaches another layer's headers only by linking it. An upward include (nn/
# including <mpigan/master/...>) therefore fails to compile.
include_guard(GLOBAL)

function(mpigan_layer_include_root name out_var)
  set(root "${PROJECT_BINARY_DIR}/include-roots/${name}")
  if(NOT EXISTS "${root}/mpigan/${name}")
    file(MAKE_DIRECTORY "${root}/mpigan")
    file(CREATE_LINK "${PROJECT_SOURCE_DIR}/${name}" "${root}/mpigan/${name}" SYMBOLIC)
  endif()
  set(${out_var} "${root}" PARENT_SCOPE)
endfunction()

function(mpigan_add_layer name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LINKS;PRIVATE_LINKS" ${ARGN})
  mpigan_layer_include_root(${name} root)
  add_library(mpigan_${name} STATIC ${ARG_SOURCES})
  target_include_directories(mpigan_${name} PUBLIC "${root}")
  target_link_libraries(mpigan_${name} PUBLIC ${ARG_LINKS} PRIVATE mpigan_build_flags ${ARG_PRIVATE_LINKS})
  set_target_properties(mpigan_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()
