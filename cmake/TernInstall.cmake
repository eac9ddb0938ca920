# tern_install_generated(SOURCE DESTINATION dir COMPONENT c [REPLACE from to ...])
# Installs SOURCE (its name without .in) into DESTINATION, written at install time: that is
# when CMAKE_INSTALL_PREFIX is the prefix really installed to (cmake --install --prefix P,
# CPack's /usr), which configure time cannot know. In the text, @prefix@, @bindir@, @libdir@,
# @includedir@ (absolute), @libdir_in_prefix@ and @includedir_in_prefix@ (${prefix}/... when
# under the prefix), @prefix_from_pcfiledir@ (the prefix relative to DESTINATION, for a
# relocatable pkg-config file) and @PROJECT_VERSION@ are replaced, then each REPLACE pair (whose `to`
# may use the same @names@).
function(tern_install_generated source)
  cmake_parse_arguments(G "" "DESTINATION;COMPONENT" "REPLACE" ${ARGN})
  get_filename_component(name ${source} NAME)
  string(REGEX REPLACE "\\.in$" "" name ${name})
  install(CODE "
    set(TERN_GENERATED_SOURCE \"${source}\")
    set(TERN_GENERATED_FILE \"${G_DESTINATION}/${name}\")
    set(TERN_GENERATED_REPLACE \"${G_REPLACE}\")
    set(TERN_GENERATED_DIRS \"${CMAKE_INSTALL_BINDIR};${CMAKE_INSTALL_LIBDIR};${CMAKE_INSTALL_INCLUDEDIR}\")
    set(TERN_GENERATED_VERSION \"${PROJECT_VERSION}\")
    include(\"${PROJECT_SOURCE_DIR}/cmake/install_generated.cmake\")" COMPONENT ${G_COMPONENT})
endfunction()

# What the installed (and packaged) binaries are built with.
include(${CMAKE_CURRENT_LIST_DIR}/TernHardening.cmake)
