# RUMOR_CHECK_CUDA: --with-cuda[=guess|no|PATH].
# guess (the default): CUDA is built when nvcc, the runtime and cuBLAS are all
# found; a missing part is fine. An explicit PATH or "yes" makes a missing part
# an error. Sets NVCC, CUDA_CPPFLAGS, CUDA_LDFLAGS, CUDA_LIBS, HAVE_CUDA.
AC_DEFUN([RUMOR_CHECK_CUDA], [
  AC_ARG_WITH([cuda],
    [AS_HELP_STRING([--with-cuda@<:@=PATH|no@:>@],
      [build the CUDA backend (default: detect, looking in /usr/local/cuda)])],
    [], [with_cuda=guess])
  AC_ARG_WITH([cuda-arch],
    [AS_HELP_STRING([--with-cuda-arch=LIST],
      [GPU architectures to build for, as compute capabilities without the dot
       (default: 80,90: A100 and H100 machine code, and PTX of the newest for later GPUs)])],
    [], [with_cuda_arch=80,90])
  AC_ARG_WITH([cuda-emu],
    [AS_HELP_STRING([--with-cuda-emu=HIPCPU_DIR],
      [developers without a GPU: build the CUDA backend's kernels with g++ over the HIP-CPU
       runtime in HIPCPU_DIR and cuBLAS over CBLAS, so they run on the CPU as device cuda:0
       (tests/cuda-emu/README.md); never for real use])],
    [], [with_cuda_emu=no])
  rumor_have_cuda=no
  rumor_cuda_emu=no
  CUDA_HOME=
  AS_CASE([$with_cuda],
    [no], [],
    [guess|yes], [CUDA_HOME=/usr/local/cuda],
    [CUDA_HOME=$with_cuda])
  AS_IF([test "x$with_cuda_emu" != xno], [
    AS_IF([test ! -f "$with_cuda_emu/include/hip/hip_runtime.h"],
      [AC_MSG_ERROR([--with-cuda-emu=$with_cuda_emu: no include/hip/hip_runtime.h there (the HIP-CPU runtime)])])
    AC_CHECK_LIB([tbb], [main], [], [AC_MSG_ERROR([--with-cuda-emu needs TBB (Debian: apt-get install libtbb-dev)])])
    rumor_have_cuda=yes
    rumor_cuda_emu=yes
    CUDA_HOME="emulated by HIP-CPU in $with_cuda_emu"
    NVCC="\$(top_srcdir)/tests/cuda-emu/nvcc-emu"
    NVCCFLAGS="-O1 -I$with_cuda_emu/include -I\$(top_srcdir)/tests/cuda-emu"
    CUDA_CPPFLAGS=
    CUDA_LDFLAGS=
    CUDA_LIBS="-ltbb -lstdc++"
    AC_DEFINE([HAVE_CUDA], [1], [Define if the CUDA backend is built])
    AC_DEFINE([RUMOR_CUDA_EMU], [1], [Define if the CUDA backend runs emulated on the CPU])
  ], [test -n "$CUDA_HOME"], [
    AC_PATH_PROG([NVCC], [nvcc], [], [$CUDA_HOME/bin$PATH_SEPARATOR$PATH])
    rumor_cuda_ok=yes
    AS_IF([test -z "$NVCC"], [rumor_cuda_ok="no (nvcc not found)"])
    save_CPPFLAGS=$CPPFLAGS; save_LDFLAGS=$LDFLAGS; save_LIBS=$LIBS
    CPPFLAGS="$CPPFLAGS -I$CUDA_HOME/include"
    LDFLAGS="$LDFLAGS -L$CUDA_HOME/lib64"
    AS_IF([test "x$rumor_cuda_ok" = xyes],
      [AC_CHECK_HEADER([cuda_runtime.h], [], [rumor_cuda_ok="no (cuda_runtime.h not found)"])])
    AS_IF([test "x$rumor_cuda_ok" = xyes],
      [AC_CHECK_HEADER([cublas_v2.h], [], [rumor_cuda_ok="no (cublas_v2.h not found)"])])
    AS_IF([test "x$rumor_cuda_ok" = xyes],
      [AC_CHECK_LIB([cublas], [cublasCreate_v2], [], [rumor_cuda_ok="no (libcublas not found)"])])
    AS_IF([test "x$rumor_cuda_ok" = xyes],
      [AC_CHECK_HEADER([cublasLt.h], [], [rumor_cuda_ok="no (cublasLt.h not found)"])])
    AS_IF([test "x$rumor_cuda_ok" = xyes],
      [AC_CHECK_LIB([cublasLt], [cublasLtCreate], [], [rumor_cuda_ok="no (libcublasLt not found)"])])
    CPPFLAGS=$save_CPPFLAGS; LDFLAGS=$save_LDFLAGS; LIBS=$save_LIBS
    AS_IF([test "x$rumor_cuda_ok" = xyes], [rumor_have_cuda=yes],
      [AS_IF([test "x$with_cuda" != xguess],
        [AC_MSG_ERROR([--with-cuda=$with_cuda given but CUDA is unusable: $rumor_cuda_ok])])
       AC_MSG_NOTICE([CUDA backend not built: $rumor_cuda_ok])])
  ])
  AS_IF([test "x$rumor_have_cuda" = xyes && test "x$rumor_cuda_emu" = xno], [
    CUDA_CPPFLAGS="-I$CUDA_HOME/include"
    CUDA_LDFLAGS="-L$CUDA_HOME/lib64 -Wl,-rpath,$CUDA_HOME/lib64"
    dnl The static runtime keeps the binary free of libcudart.so; with no GPU
    dnl or driver, device discovery reports zero devices and the CPU is used.
    CUDA_LIBS="-lcublas -lcublasLt -lcudart_static -ldl -lrt -lstdc++"
    AC_ARG_VAR([NVCCFLAGS], [flags for nvcc (default: -O3 and a fat binary for --with-cuda-arch)])
    AS_IF([test -z "$NVCCFLAGS"], [
      NVCCFLAGS="-O3 -lineinfo"
      rumor_last_arch=
      for a in `echo "$with_cuda_arch" | tr ',' ' '`; do
        AS_CASE([$a], [*[[!0-9]]*|""], [AC_MSG_ERROR([--with-cuda-arch=$with_cuda_arch: expected compute capabilities such as 80,90])])
        NVCCFLAGS="$NVCCFLAGS -gencode arch=compute_$a,code=sm_$a"
        rumor_last_arch=$a
      done
      AS_IF([test -z "$rumor_last_arch"], [AC_MSG_ERROR([--with-cuda-arch: no architecture])])
      NVCCFLAGS="$NVCCFLAGS -gencode arch=compute_$rumor_last_arch,code=compute_$rumor_last_arch"])
    AC_DEFINE([HAVE_CUDA], [1], [Define if the CUDA backend is built])
  ])
  AC_SUBST([CUDA_HOME])
  AC_SUBST([CUDA_CPPFLAGS])
  AC_SUBST([CUDA_LDFLAGS])
  AC_SUBST([CUDA_LIBS])
  AC_SUBST([NVCCFLAGS])
  AM_CONDITIONAL([HAVE_CUDA], [test "x$rumor_have_cuda" = xyes])
  AM_CONDITIONAL([CUDA_EMU], [test "x$rumor_cuda_emu" = xyes])
])

# RUMOR_CHECK_NCCL: --with-nccl[=guess|no|PATH], only when CUDA is built.
AC_DEFUN([RUMOR_CHECK_NCCL], [
  AC_ARG_WITH([nccl],
    [AS_HELP_STRING([--with-nccl@<:@=PATH|no@:>@],
      [use NCCL between a peer's local GPUs (default: detect with CUDA)])],
    [], [with_nccl=guess])
  rumor_have_nccl=no
  NCCL_CPPFLAGS=; NCCL_LDFLAGS=; NCCL_LIBS=
  AS_IF([test "x$with_nccl" != xno], [
    AS_IF([test "x$rumor_have_cuda" != xyes || test "x$rumor_cuda_emu" = xyes],
      [AS_IF([test "x$with_nccl" != xguess], [AC_MSG_ERROR([--with-nccl needs the CUDA backend (--with-cuda)])])],
      [nccl_home=$CUDA_HOME
       AS_CASE([$with_nccl], [guess|yes], [], [nccl_home=$with_nccl])
       save_CPPFLAGS=$CPPFLAGS; save_LDFLAGS=$LDFLAGS; save_LIBS=$LIBS
       CPPFLAGS="$CPPFLAGS -I$nccl_home/include $CUDA_CPPFLAGS"
       LDFLAGS="$LDFLAGS -L$nccl_home/lib64 -L$nccl_home/lib"
       AC_CHECK_HEADER([nccl.h],
         [AC_CHECK_LIB([nccl], [ncclGetVersion], [rumor_have_nccl=yes])])
       CPPFLAGS=$save_CPPFLAGS; LDFLAGS=$save_LDFLAGS; LIBS=$save_LIBS
       AS_IF([test "x$rumor_have_nccl" = xyes],
         [NCCL_CPPFLAGS="-I$nccl_home/include"
          NCCL_LDFLAGS="-L$nccl_home/lib64 -L$nccl_home/lib -Wl,-rpath,$nccl_home/lib64"
          NCCL_LIBS="-lnccl"
          AC_DEFINE([HAVE_NCCL], [1], [Define if NCCL is available])],
         [AS_IF([test "x$with_nccl" != xguess], [AC_MSG_ERROR([--with-nccl=$with_nccl given but NCCL was not found])])])])
  ])
  AC_SUBST([NCCL_CPPFLAGS])
  AC_SUBST([NCCL_LDFLAGS])
  AC_SUBST([NCCL_LIBS])
  AM_CONDITIONAL([HAVE_NCCL], [test "x$rumor_have_nccl" = xyes])
])
