//===- FileUtil.cpp - whole-file reads and atomic writes -----------------===//
#include "h20/Runtime/FileUtil.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace h20::runtime {

bool readFile(const std::string &path, std::string &out, std::string &error) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    error = "'" + path + "' is not a regular file";
    close(fd);
    return false;
  }
  out.resize(static_cast<size_t>(st.st_size));
  size_t done = 0;
  while (done < out.size()) {
    ssize_t n = read(fd, out.data() + done, out.size() - done);
    if (n <= 0) {
      error = "cannot read '" + path + "': " + (n == 0 ? "unexpected end" : std::strerror(errno));
      close(fd);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  close(fd);
  return true;
}

bool readFileRange(const std::string &path, uint64_t offset, uint64_t length, void *dst,
                   std::string &error) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot open weight file '" + path + "': " + std::strerror(errno);
    return false;
  }
  uint64_t done = 0;
  auto *p = static_cast<char *>(dst);
  while (done < length) {
    ssize_t n = pread(fd, p + done, length - done, static_cast<off_t>(offset + done));
    if (n <= 0) {
      error = "weight file '" + path + "' ends before byte " + std::to_string(offset + length);
      close(fd);
      return false;
    }
    done += static_cast<uint64_t>(n);
  }
  close(fd);
  return true;
}

namespace {
/// Writes all of `contents` to `fd`; false with `error` naming `path`.
bool writeAll(int fd, const std::string &contents, const std::string &path,
              std::string &error) {
  size_t done = 0;
  while (done < contents.size()) {
    ssize_t n = write(fd, contents.data() + done, contents.size() - done);
    if (n <= 0) {
      error = "cannot write '" + path + "': " + std::strerror(errno);
      return false;
    }
    done += static_cast<size_t>(n);
  }
  return true;
}

/// Writes through an existing non-regular file (/dev/null, a FIFO, a tty):
/// replacing those would break the machine, and they have no partial state.
bool writeThrough(const std::string &path, const std::string &contents, std::string &error) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot open '" + path + "': " + std::strerror(errno);
    return false;
  }
  bool ok = writeAll(fd, contents, path, error);
  close(fd);
  return ok;
}
} // namespace

bool writeFileAtomically(const std::string &requested, const std::string &contents,
                         std::string &error) {
  // A symlink is followed: the file it names is replaced, the link stays.
  std::string path = requested;
  struct stat st;
  if (lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
    char *real = realpath(path.c_str(), nullptr);
    if (real) {
      path = real;
      std::free(real);
    }
  }
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      error = "'" + requested + "' is a directory";
      return false;
    }
    if (!S_ISREG(st.st_mode))
      return writeThrough(path, contents, error);
  }
  std::string tmp = path + ".tmp-XXXXXX";
  int fd = mkstemp(tmp.data());
  if (fd < 0) {
    error = "cannot create a temporary file beside '" + path + "': " + std::strerror(errno);
    return false;
  }
  fchmod(fd, 0644); // mkstemp creates 0600; outputs are ordinary files
  if (!writeAll(fd, contents, path, error)) {
    close(fd);
    unlink(tmp.c_str());
    return false;
  }
  if (fsync(fd) != 0 || close(fd) != 0) {
    error = "cannot flush '" + path + "': " + std::strerror(errno);
    unlink(tmp.c_str());
    return false;
  }
  if (rename(tmp.c_str(), path.c_str()) != 0) {
    error = "cannot rename the temporary file to '" + path + "': " + std::strerror(errno);
    unlink(tmp.c_str());
    return false;
  }
  return true;
}

bool sameFile(const std::string &a, const std::string &b) {
  struct stat sa, sb;
  return stat(a.c_str(), &sa) == 0 && stat(b.c_str(), &sb) == 0 && sa.st_dev == sb.st_dev &&
         sa.st_ino == sb.st_ino && S_ISREG(sa.st_mode);
}

bool checkWritable(const std::string &path, std::string &error) {
  struct stat st;
  if (stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) {
      error = "output '" + path + "' is a directory";
      return false;
    }
    if (!S_ISREG(st.st_mode))
      return true; // written through (e.g. /dev/null)
  }
  std::string dir = ".";
  size_t slash = path.find_last_of('/');
  if (slash != std::string::npos)
    dir = slash == 0 ? "/" : path.substr(0, slash);
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    error = "cannot write '" + path + "': directory '" + dir + "' does not exist";
    return false;
  }
  if (access(dir.c_str(), W_OK) != 0) {
    error = "cannot write '" + path + "': directory '" + dir + "' is not writable";
    return false;
  }
  return true;
}

int64_t fileSize(const std::string &path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0)
    return -1;
  return static_cast<int64_t>(st.st_size);
}

} // namespace h20::runtime
