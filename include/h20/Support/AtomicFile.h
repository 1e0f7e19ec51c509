//===- AtomicFile.h - write a file all at once or not at all ----*- C++ -*-===//
#ifndef H20_SUPPORT_ATOMICFILE_H
#define H20_SUPPORT_ATOMICFILE_H

#include "llvm/ADT/StringRef.h"

#include <string>

namespace h20 {

/// Writes `contents` to `path` atomically: into a unique temporary file in
/// the same directory, flushed, then renamed over `path`. On any failure the
/// temporary is removed, `path` is left as it was, and false is returned with
/// `error` naming the path and the reason. `path` "-" writes to stdout.
bool writeFileAtomically(llvm::StringRef path, llvm::StringRef contents,
                         std::string &error);

} // namespace h20

#endif // H20_SUPPORT_ATOMICFILE_H
