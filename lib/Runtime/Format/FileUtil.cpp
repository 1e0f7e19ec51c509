//===- FileUtil.cpp - whole-file reads and atomic writes -----------------===//
#include "h20/Runtime/Format/FileUtil.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <sstream>
#include <mutex>
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

// --- Removing the temporary file of an interrupted atomic write -------------
//
// Between mkstemp and rename a fatal signal (Ctrl-C, kill, a closed terminal,
// the file-size limit) would leave "<path>.tmp-XXXXXX" behind. While that
// window is open, handlers for those signals unlink the temporary file (the
// output itself is never partial: it only appears by rename), restore the
// previous disposition and raise the signal again, so the process ends as it
// would have (or the previous handler runs). Signals the process ignores stay
// ignored. The handler uses only async-signal-safe calls (unlink, sigaction,
// raise) and state written before the window opens.

constexpr int kFatalSignals[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGXFSZ};
constexpr size_t kMaxTempPath = 4096;
char tempPath[kMaxTempPath];          ///< mkstemp's template, filled in place
std::atomic<bool> tempActive{false};  ///< tempPath names our file
struct sigaction previous[NSIG];      ///< dispositions before the window
bool installed[NSIG];
std::mutex writeMutex;                ///< one guarded write at a time

void removeTempOnSignal(int sig) {
  if (tempActive.load())
    unlink(tempPath);
  sigaction(sig, &previous[sig], nullptr);
  raise(sig); // pending until this handler returns, then handled as before
}

/// Opens the window: `path` becomes mkstemp's template in `tempPath` and the
/// handlers are installed. Closing it (destructor) restores the dispositions.
class TempFileGuard {
public:
  explicit TempFileGuard(const std::string &tmpl) : lock(writeMutex) {
    if (tmpl.size() >= kMaxTempPath)
      return; // no path that long can be created; mkstemp reports it
    std::memcpy(tempPath, tmpl.c_str(), tmpl.size() + 1);
    for (int sig : kFatalSignals) {
      struct sigaction old;
      if (sigaction(sig, nullptr, &old) != 0 || old.sa_handler == SIG_IGN)
        continue;
      previous[sig] = old;
      struct sigaction sa;
      std::memset(&sa, 0, sizeof sa);
      sa.sa_handler = removeTempOnSignal;
      sigfillset(&sa.sa_mask); // one cleanup at a time
      installed[sig] = sigaction(sig, &sa, nullptr) == 0;
    }
    tempActive.store(true);
    usable = true;
  }
  /// The buffer to pass to mkstemp (the template, rewritten in place).
  char *name() { return usable ? tempPath : nullptr; }
  /// The temporary file is gone (renamed or removed): nothing to clean.
  void disarm() { tempActive.store(false); }
  ~TempFileGuard() {
    tempActive.store(false);
    for (int sig : kFatalSignals)
      if (installed[sig]) {
        sigaction(sig, &previous[sig], nullptr);
        installed[sig] = false;
      }
  }

private:
  std::lock_guard<std::mutex> lock;
  bool usable = false;
};

/// Test hook: H20_TEST_PAUSE_IN_ATOMIC_WRITE_MS=N sleeps N ms after half of
/// the temporary file is written, so a test can interrupt the write there.
void pauseForTest() {
  const char *ms = std::getenv("H20_TEST_PAUSE_IN_ATOMIC_WRITE_MS");
  if (!ms || !*ms)
    return;
  long n = std::strtol(ms, nullptr, 10);
  if (n > 0)
    usleep(static_cast<useconds_t>(std::min(n, 600000L)) * 1000);
}

/// Writes all of `contents` to `fd`; false with `error` naming `path`.
bool writeAll(int fd, const char *data, size_t size, const std::string &path,
              std::string &error) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = write(fd, data + done, size - done);
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
  bool ok = writeAll(fd, contents.data(), contents.size(), path, error);
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
  TempFileGuard guard(tmp);
  int fd = mkstemp(guard.name() ? guard.name() : tmp.data());
  if (guard.name())
    tmp = guard.name();
  if (fd < 0) {
    error = "cannot create a temporary file beside '" + path + "': " + std::strerror(errno);
    return false;
  }
  fchmod(fd, 0644); // mkstemp creates 0600; outputs are ordinary files
  size_t half = contents.size() / 2;
  bool written = writeAll(fd, contents.data(), half, path, error);
  if (written) {
    pauseForTest();
    written = writeAll(fd, contents.data() + half, contents.size() - half, path, error);
  }
  if (!written) {
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
  guard.disarm();
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

namespace {
/// `path` with its directory resolved (realpath), so that "o.npy",
/// "./o.npy" and "/cwd/o.npy" compare equal before the file exists; the
/// path itself when its directory does not resolve.
std::string resolvedPath(const std::string &path) {
  size_t slash = path.rfind('/');
  std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  char *real = realpath(dir.c_str(), nullptr);
  if (!real)
    return path;
  std::string out = std::string(real) + (std::string(real) == "/" ? "" : "/") + base;
  std::free(real);
  return out;
}
bool samePath(const std::string &a, const std::string &b) {
  return a == b || sameFile(a, b) || resolvedPath(a) == resolvedPath(b);
}
} // namespace

bool checkOutputFiles(const std::vector<std::string> &outputs,
                      const std::vector<std::string> &inputs, std::string &error) {
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!checkWritable(outputs[i], error))
      return false;
    for (const std::string &in : inputs)
      if (samePath(outputs[i], in)) {
        error = "output '" + outputs[i] + "' is an input file; refusing to overwrite it";
        return false;
      }
    struct stat st;
    bool special = stat(outputs[i].c_str(), &st) == 0 && !S_ISREG(st.st_mode);
    for (size_t j = 0; j < i && !special; ++j)
      if (samePath(outputs[i], outputs[j])) {
        error = "output '" + outputs[i] + "' is named twice";
        return false;
      }
  }
  return true;
}

int64_t memAvailableBytes(const std::string &meminfo) {
  const std::string key = "MemAvailable:";
  size_t at = meminfo.find(key);
  if (at == std::string::npos || (at > 0 && meminfo[at - 1] != '\n'))
    return -1;
  at += key.size();
  while (at < meminfo.size() && meminfo[at] == ' ')
    ++at;
  int64_t kb = 0;
  size_t digits = 0;
  for (; at < meminfo.size() && meminfo[at] >= '0' && meminfo[at] <= '9'; ++at, ++digits) {
    if (kb > (INT64_MAX / 1024 - 9) / 10)
      return -1;
    kb = kb * 10 + (meminfo[at] - '0');
  }
  if (digits == 0 || meminfo.compare(at, 3, " kB") != 0)
    return -1;
  return kb * 1024;
}

int64_t hostMemAvailableBytes() {
  std::ifstream in("/proc/meminfo");
  if (!in)
    return -1;
  std::stringstream text;
  text << in.rdbuf();
  return memAvailableBytes(text.str());
}

} // namespace h20::runtime
