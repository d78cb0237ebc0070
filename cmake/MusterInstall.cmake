# Install rules of the binaries, the only things muster installs. `cmake --install build
# --prefix P` puts muster and muster-probe in P/bin; a wheel build (scikit-build-core, see
# pyproject.toml) puts them in the wheel's scripts, which pip installs into the venv's bin/.
#
# MUSTER_INSTALL_TORCHRUN=ON adds `torchrun` beside muster: muster started by that name is
# `muster run` (agent/cli/main.cc), so scripts and tools that call torchrun run muster. A
# symbolic link in a prefix, a copy in a wheel (a wheel holds no links). Off by default: in
# a training venv it takes the place of torch's own torchrun.
option(MUSTER_INSTALL_TORCHRUN "Install torchrun beside muster: muster by that name is muster run"
       OFF)
if(SKBUILD)
  set(MUSTER_INSTALL_BINDIR "${SKBUILD_SCRIPTS_DIR}")
else()
  include(GNUInstallDirs)
  set(MUSTER_INSTALL_BINDIR "${CMAKE_INSTALL_BINDIR}")
endif()

# torchrun beside the installed muster, when MUSTER_INSTALL_TORCHRUN asks for it. Call it
# after the rule that installs muster (install rules run in the order they are written).
function(muster_install_torchrun_alias)
  if(NOT MUSTER_INSTALL_TORCHRUN)
    return()
  endif()
  install(CODE "
    set(dir \"${MUSTER_INSTALL_BINDIR}\")
    if(NOT IS_ABSOLUTE \"\${dir}\")
      set(dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/\${dir}\")
    endif()
    message(STATUS \"Installing: \${dir}/torchrun (muster run by torchrun's name)\")
    file(REMOVE \"\${dir}/torchrun\")
    if(\"${SKBUILD}\")
      file(COPY_FILE \"\${dir}/muster\" \"\${dir}/torchrun\")
    else()
      file(CREATE_LINK muster \"\${dir}/torchrun\" SYMBOLIC)
    endif()
  ")
endfunction()
