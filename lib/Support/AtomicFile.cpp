//===- AtomicFile.cpp - write a file all at once or not at all -----------===//
#include "h20/Support/AtomicFile.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

bool h20::writeFileAtomically(StringRef path, StringRef contents,
                              std::string &error) {
  if (path == "-") {
    outs() << contents;
    outs().flush();
    return true;
  }
  SmallString<256> model(path);
  model += ".tmp-%%%%%%%%";
  int fd = -1;
  SmallString<256> temp;
  if (std::error_code ec = sys::fs::createUniqueFile(model, fd, temp)) {
    error = "cannot create a temporary file beside '" + path.str() +
            "': " + ec.message();
    return false;
  }
  {
    raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << contents;
    os.flush();
    if (os.has_error()) {
      error = "cannot write '" + path.str() + "': " + os.error().message();
      os.clear_error();
      sys::fs::remove(temp);
      return false;
    }
  }
  if (std::error_code ec = sys::fs::rename(temp, path)) {
    error = "cannot rename the temporary file to '" + path.str() +
            "': " + ec.message();
    sys::fs::remove(temp);
    return false;
  }
  return true;
}
