//===- FileUtil.h - whole-file reads and atomic writes ----------*- C++ -*-===//
#ifndef H20_RUNTIME_FILEUTIL_H
#define H20_RUNTIME_FILEUTIL_H

#include <cstdint>
#include <string>
#include <vector>

namespace h20::runtime {

/// Reads all of `path` into `out`; false with `error` naming the file.
bool readFile(const std::string &path, std::string &out, std::string &error);

/// Reads `length` bytes at `offset` of `path` into `dst`; false with `error`
/// naming the file when it is missing or too short.
bool readFileRange(const std::string &path, uint64_t offset, uint64_t length, void *dst,
                   std::string &error);

/// Writes `contents` to `path` via a temporary in the same directory and
/// rename(2): readers see the old file or the whole new one, never a part.
/// A symlink is followed (its target is replaced); an existing non-regular
/// file (/dev/null, a FIFO) is written through, never replaced.
/// A fatal signal during the write (SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGXFSZ;
/// those not ignored) removes the temporary file before the process ends, so
/// an interrupted write leaves neither it nor a partial output. Test hook:
/// the environment variable H20_TEST_PAUSE_IN_ATOMIC_WRITE_MS=N pauses N ms
/// halfway through writing the temporary file.
bool writeFileAtomically(const std::string &path, const std::string &contents,
                         std::string &error);

/// True when both paths exist and name the same file (device and inode).
bool sameFile(const std::string &a, const std::string &b);

/// Checks, before any work, that `path` can be written: not a directory, its
/// directory exists and is writable. False with `error` naming the path.
bool checkWritable(const std::string &path, std::string &error);

/// Size of `path` in bytes, or -1 if it cannot be stat'ed.
int64_t fileSize(const std::string &path);

/// Checks a run's output files before any work, so that a bad path cannot
/// leave some outputs written and others not: each of `outputs` must be
/// writable (checkWritable), none may be one of `inputs` and none may be
/// named twice (the same file, or the same name in the same directory
/// before it exists: "o.npy" and "./o.npy"; special files such as
/// /dev/null excepted). False with `error` naming the path.
bool checkOutputFiles(const std::vector<std::string> &outputs,
                      const std::vector<std::string> &inputs, std::string &error);

/// Bytes of host memory available for new allocations without swapping:
/// the "MemAvailable:" line (kB) of a /proc/meminfo text (Linux 3.14+,
/// Documentation/filesystems/proc.rst). -1 when the text has no such line
/// or its value does not parse.
int64_t memAvailableBytes(const std::string &meminfo);

/// memAvailableBytes of this machine's /proc/meminfo (read as a stream:
/// procfs files report size 0); -1 where there is none.
int64_t hostMemAvailableBytes();

} // namespace h20::runtime

#endif // H20_RUNTIME_FILEUTIL_H
