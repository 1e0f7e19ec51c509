//===- Npy.cpp - NumPy .npy arrays and token-id files --------------------===//
#include "h20/Runtime/Format/Npy.h"

#include "h20/Runtime/Format/FileUtil.h"

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace h20::runtime {
namespace {

/// Value of key `key` in the header dict, as raw text up to the next
/// top-level comma or closing brace.
bool headerField(const std::string &h, const std::string &key, std::string &value) {
  size_t k = h.find("'" + key + "'");
  if (k == std::string::npos)
    return false;
  size_t colon = h.find(':', k);
  if (colon == std::string::npos)
    return false;
  size_t i = colon + 1;
  while (i < h.size() && std::isspace(static_cast<unsigned char>(h[i])))
    ++i;
  int depth = 0;
  size_t start = i;
  for (; i < h.size(); ++i) {
    char c = h[i];
    if (c == '(' || c == '[')
      ++depth;
    else if (c == ')' || c == ']')
      --depth;
    else if ((c == ',' || c == '}') && depth == 0)
      break;
  }
  value = h.substr(start, i - start);
  return true;
}

/// Bytes per element of a numpy descr without byte order ("f4" -> 4), or 0
/// when it does not end in a plausible size (1 to 64 bytes).
int64_t itemSize(const std::string &dtype) {
  if (dtype.size() < 2)
    return 0;
  char *end = nullptr;
  long long n = std::strtoll(dtype.c_str() + 1, &end, 10);
  if (*end != '\0' || n < 1 || n > 64)
    return 0;
  return n;
}

} // namespace

bool parseNpy(const std::string &bytes, NpyArray &out, std::string &error) {
  if (bytes.size() < 10 || std::memcmp(bytes.data(), "\x93NUMPY", 6) != 0) {
    error = "not a .npy file (bad magic)";
    return false;
  }
  uint8_t major = static_cast<uint8_t>(bytes[6]);
  size_t headerLen, headerStart;
  if (major == 1) {
    headerLen = static_cast<uint8_t>(bytes[8]) | (static_cast<uint8_t>(bytes[9]) << 8);
    headerStart = 10;
  } else if ((major == 2 || major == 3) && bytes.size() >= 12) {
    uint32_t n;
    std::memcpy(&n, bytes.data() + 8, 4);
    headerLen = n;
    headerStart = 12;
  } else {
    error = "unsupported .npy version " + std::to_string(major);
    return false;
  }
  if (headerStart + headerLen > bytes.size()) {
    error = ".npy header is truncated";
    return false;
  }
  std::string h = bytes.substr(headerStart, headerLen);
  std::string descr, fortran, shape;
  if (!headerField(h, "descr", descr) || !headerField(h, "fortran_order", fortran) ||
      !headerField(h, "shape", shape)) {
    error = ".npy header lacks descr/fortran_order/shape";
    return false;
  }
  if (descr.size() < 4 || descr.front() != '\'' || descr.back() != '\'') {
    error = ".npy descr " + descr + " is not a simple dtype";
    return false;
  }
  descr = descr.substr(1, descr.size() - 2);
  char order = descr[0]; // '<' little, '>' big, '|' not applicable
  out.dtype = descr.substr(1);
  int64_t size = itemSize(out.dtype);
  if (size == 0) {
    error = ".npy descr '" + descr + "' has no element size h20 reads (1 to 64 bytes)";
    return false;
  }
  if (order == '>' && size > 1) {
    error = ".npy data is big-endian ('" + descr + "'); only little-endian is read";
    return false;
  }
  if (fortran.find("True") != std::string::npos) {
    error = ".npy data is in Fortran order; only C order is read";
    return false;
  }
  out.shape.clear();
  const char *p = shape.c_str();
  while (*p) {
    if (std::isdigit(static_cast<unsigned char>(*p))) {
      char *end;
      out.shape.push_back(std::strtoll(p, &end, 10));
      p = end;
    } else {
      ++p;
    }
  }
  int64_t count = 1;
  for (int64_t d : out.shape) {
    if (d > 0 && count > (int64_t(1) << 40) / d) {
      error = ".npy shape is too large";
      return false;
    }
    count *= d;
  }
  size_t dataStart = headerStart + headerLen;
  if (bytes.size() - dataStart != static_cast<size_t>(count * size)) {
    error = ".npy data holds " + std::to_string(bytes.size() - dataStart) +
            " bytes but shape and dtype need " + std::to_string(count * size);
    return false;
  }
  out.data.assign(bytes.begin() + dataStart, bytes.end());
  return true;
}

std::string encodeNpy(const std::string &descr, const std::vector<int64_t> &shape,
                      const void *data, size_t bytes) {
  // Python tuple syntax: "(4,)" for rank 1, "(1, 2, 3)" otherwise.
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i)
    dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1)
    dims += ",";
  std::string order = descr[0] == 'b' || descr == "i1" ? "|" : "<";
  std::string header = "{'descr': '" + order + descr + "', 'fortran_order': False, 'shape': (" +
                       dims + "), }";
  // Pad so the data starts at a multiple of 64 bytes; the header ends in \n.
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out("\x93NUMPY\x01\x00", 8);
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  out += header;
  out.append(static_cast<const char *>(data), bytes);
  return out;
}

std::string encodeNpyF32(const std::vector<int64_t> &shape, const float *data) {
  int64_t count = 1;
  for (int64_t d : shape)
    count *= d;
  return encodeNpy("f4", shape, data, count * sizeof(float));
}

bool readTokenIds(const std::string &path, std::vector<int64_t> &ids, std::string &error) {
  std::string bytes;
  if (!readFile(path, bytes, error))
    return false;
  return parseTokenIds(bytes, path, ids, error);
}

bool parseTokenIds(const std::string &bytes, const std::string &path, std::vector<int64_t> &ids,
                   std::string &error) {
  ids.clear();
  if (bytes.size() >= 6 && std::memcmp(bytes.data(), "\x93NUMPY", 6) == 0) {
    NpyArray a;
    if (!parseNpy(bytes, a, error)) {
      error = "ids file '" + path + "': " + error;
      return false;
    }
    if (a.dtype != "i8" && a.dtype != "i4") {
      error = "ids file '" + path + "' has dtype '" + a.dtype +
              "'; token ids must be int64 ('<i8') or int32 ('<i4')";
      return false;
    }
    if (a.shape.size() != 1 && !(a.shape.size() == 2 && a.shape[0] == 1)) {
      std::string s;
      for (int64_t d : a.shape)
        s += std::to_string(d) + ",";
      error = "ids file '" + path + "' has shape [" + s +
              "]; token ids must be [S] or [1, S] (one sequence)";
      return false;
    }
    int64_t n = a.shape.back();
    for (int64_t i = 0; i < n; ++i) {
      if (a.dtype == "i8") {
        int64_t v;
        std::memcpy(&v, a.data.data() + 8 * i, 8);
        ids.push_back(v);
      } else {
        int32_t v;
        std::memcpy(&v, a.data.data() + 4 * i, 4);
        ids.push_back(v);
      }
    }
  } else {
    if (bytes.find('\0') != std::string::npos) {
      error = "ids file '" + path + "' is neither a .npy file nor text (it holds NUL bytes)";
      return false;
    }
    const char *p = bytes.c_str();
    while (*p) {
      if (std::isspace(static_cast<unsigned char>(*p))) {
        ++p;
        continue;
      }
      char *end;
      errno = 0;
      long long v = std::strtoll(p, &end, 10);
      if (end == p || errno == ERANGE ||
          (*end && !std::isspace(static_cast<unsigned char>(*end)))) {
        std::string tok(p, std::strcspn(p, " \t\r\n"));
        error = "ids file '" + path + "': '" + tok.substr(0, 40) +
                "' is not an integer token id";
        return false;
      }
      ids.push_back(v);
      p = end;
    }
  }
  if (ids.empty()) {
    error = "ids file '" + path + "' holds no token ids";
    return false;
  }
  return true;
}

} // namespace h20::runtime
