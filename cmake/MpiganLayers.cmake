# Include roots: how a target may see another target's headers, and nothing more.
#
# Every header of this project is reached through an include root: a directory in the build tree
# (build/include-roots/<root>/) holding symlinks named the way the headers are included. A root is
# a PUBLIC include directory of the one target that owns those headers, so a target sees them
# only by linking that target, and an #include of anything else fails to compile:
#
#   root            owner                  spelling                      links
#   <layer>         mpigan_<layer>         <mpigan/LAYER/...>            mpigan/LAYER -> <repo>/LAYER
#   core-public     mpigan_core            <mpigan/core/x.hpp>,          one per core/*.hpp, and
#                                          <mpigan/core/mpi/x.hpp>       mpigan/core/mpi -> core/mpi
#   kernels         mpigan_kernels         <mpigan/kernels/...>          -> <repo>/core/kernels
#   backend-<b>     mpigan_backend_<b>     <mpigan/backend/<b>/...>      -> <repo>/core/backend/<b>
#                   (b = reference, cpu, cuda)
#
# core is sealed: its root has no backend/ or kernels/ entry, so <mpigan/core/backend/cpu/...>
# does not exist for anyone. A backend's internals are visible only to the targets that link that
# backend directly: the backend itself, the registry mpigan_backends (which links the backends
# PRIVATE: static libraries still link, their include roots stop there) and core's unit tests.
# Layers above create backends with make_backend() and use the Backend interface only. An upward
# include (nn/ including <mpigan/master/...>) fails the same way. The ctest entries seal.*
# (tests/CMakeLists.txt) compile sources that include backend internals from a target linking
# mpigan_nn and mpigan_backends, and pass only when the compiler says the header is not found.
include_guard(GLOBAL)

# mpigan_include_root(ROOT <root> PREFIX <mpigan/...> SOURCE <dir> [ENTRIES <name>...] OUT <var>)
#
# Makes include root build/include-roots/<root> and stores its path in <var>. Without ENTRIES,
# <root>/<PREFIX> is one symlink to SOURCE (the whole directory is visible). With ENTRIES,
# <root>/<PREFIX> is a directory with one symlink per entry (a file or a directory of SOURCE) and
# nothing else: links to entries no longer listed are removed.
function(mpigan_include_root)
  cmake_parse_arguments(ARG "" "ROOT;PREFIX;SOURCE;OUT" "ENTRIES" ${ARGN})
  set(root "${PROJECT_BINARY_DIR}/include-roots/${ARG_ROOT}")
  set(dir "${root}/${ARG_PREFIX}")
  get_filename_component(parent "${dir}" DIRECTORY)
  file(MAKE_DIRECTORY "${parent}")
  if(NOT ARG_ENTRIES)
    set(links "${dir}=${ARG_SOURCE}")
  else()
    if(IS_SYMLINK "${dir}")
      file(REMOVE "${dir}")  # the link itself (a root made whole-directory before), not its target
    endif()
    file(MAKE_DIRECTORY "${dir}")
    file(GLOB existing LIST_DIRECTORIES true "${dir}/*")
    foreach(path IN LISTS existing)
      get_filename_component(entry "${path}" NAME)
      if(IS_SYMLINK "${path}" AND NOT entry IN_LIST ARG_ENTRIES)
        file(REMOVE "${path}")
      endif()
    endforeach()
    set(links "")
    foreach(entry IN LISTS ARG_ENTRIES)
      list(APPEND links "${dir}/${entry}=${ARG_SOURCE}/${entry}")
    endforeach()
  endif()
  foreach(pair IN LISTS links)
    string(REPLACE "=" ";" pair "${pair}")
    list(GET pair 0 link)
    list(GET pair 1 target)
    set(current "")
    if(IS_SYMLINK "${link}")
      file(READ_SYMLINK "${link}" current)
    endif()
    if(NOT current STREQUAL target)
      file(CREATE_LINK "${target}" "${link}" SYMBOLIC)
    endif()
  endforeach()
  set(${ARG_OUT} "${root}" PARENT_SCOPE)
endfunction()

# mpigan_add_layer(NAME SOURCES ... LINKS ... [PRIVATE_LINKS ...] [PUBLIC_ENTRIES ...])
#
# Creates library target mpigan_<NAME> from the sources in <repo>/<NAME>/. Its headers are
# included as <mpigan/NAME/file.hpp> through include root <NAME> (PUBLIC on this target only):
# the whole directory <repo>/NAME, or with PUBLIC_ENTRIES only those files and subdirectories of
# it (root <NAME>-public; core uses it to keep its backends out of sight).
function(mpigan_add_layer name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LINKS;PRIVATE_LINKS;PUBLIC_ENTRIES" ${ARGN})
  if(ARG_PUBLIC_ENTRIES)
    mpigan_include_root(ROOT ${name}-public PREFIX mpigan/${name} SOURCE "${PROJECT_SOURCE_DIR}/${name}"
                        ENTRIES ${ARG_PUBLIC_ENTRIES} OUT root)
  else()
    mpigan_include_root(ROOT ${name} PREFIX mpigan/${name} SOURCE "${PROJECT_SOURCE_DIR}/${name}" OUT root)
  endif()
  add_library(mpigan_${name} STATIC ${ARG_SOURCES})
  target_include_directories(mpigan_${name} PUBLIC "${root}")
  target_link_libraries(mpigan_${name} PUBLIC ${ARG_LINKS} PRIVATE mpigan_build_flags ${ARG_PRIVATE_LINKS})
  set_target_properties(mpigan_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endfunction()
