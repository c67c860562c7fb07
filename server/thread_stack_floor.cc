// Why this exists: civetweb (under prometheus-cpp's /metrics exposer) creates its threads
// with a fixed ~100 KiB stack. glibc carves each thread's static TLS out of its stack, and
// libtorch's dependencies (OpenBLAS alone ~60 KiB, glog ~30 KiB) need more than that, so
// pthread_create fails with EINVAL and the exposer cannot start. Linked into placerd only,
// this raises any explicitly requested stack size to a floor; threads that take the default
// size are untouched.
#include <dlfcn.h>
#include <pthread.h>

#include <algorithm>
#include <cstddef>

namespace {
constexpr size_t kMinimumThreadStackBytes = size_t{1} << 20;
using SetStackSize = int (*)(pthread_attr_t*, size_t);
}  // namespace

extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, size_t stack_size) {
  static const auto real =
      reinterpret_cast<SetStackSize>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  return real(attr, std::max(stack_size, kMinimumThreadStackBytes));
}
