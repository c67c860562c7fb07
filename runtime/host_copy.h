// Copying weights between two host buffers when staging onto a virtual GPU: the copy stands in
// for a GPU's copy engine, so it runs on the calling thread alone and writes with streaming
// stores. The destination is read later by another block's compute, not by the copier, so
// streaming stores skip reading it into the cache first; the copy takes one core and less
// memory traffic away from compute than libtorch's copy_ (two threads, cached stores) does.
#pragma once

#include <cstddef>

namespace placer::runtime {

// memcpy semantics (no overlap); any alignment and size.
void CopyHostBytes(void* destination, const void* source, size_t bytes);

}  // namespace placer::runtime
