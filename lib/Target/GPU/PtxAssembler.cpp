//===- PtxAssembler.cpp - run ptxas over emitted PTX ----------------------===//
#include "h20/Target/PtxAssembler.h"

#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"

#include <cstdlib>
#include <optional>

namespace h20 {

std::string findPtxas() {
  if (llvm::ErrorOr<std::string> p = llvm::sys::findProgramByName("ptxas"))
    return *p;
  llvm::SmallVector<std::string, 2> dirs;
  if (const char *home = std::getenv("CUDA_HOME"); home && *home)
    dirs.push_back(std::string(home) + "/bin");
  dirs.push_back("/usr/local/cuda/bin");
  for (const std::string &d : dirs) {
    llvm::SmallString<256> path(d);
    llvm::sys::path::append(path, "ptxas");
    if (llvm::sys::fs::can_execute(path))
      return std::string(path);
  }
  return "";
}

namespace {

bool readWhole(llvm::StringRef path, std::string &out) {
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buf = llvm::MemoryBuffer::getFile(
      path, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buf)
    return false;
  out = (*buf)->getBuffer().str();
  return true;
}

bool writeWhole(llvm::StringRef path, llvm::StringRef data) {
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return false;
  os << data;
  os.close();
  return !os.has_error();
}

} // namespace

PtxasStatus assemblePtx(const std::string &ptx, const std::string &arch, std::string &cubin,
                        std::string &report, std::string &error) {
  cubin.clear();
  report.clear();
  error.clear();
  std::string ptxas = findPtxas();
  if (ptxas.empty()) {
    error = "ptxas not found (searched PATH, $CUDA_HOME/bin, /usr/local/cuda/bin)";
    return PtxasStatus::NotFound;
  }
  if (arch.rfind("sm_", 0) != 0) {
    error = "ptxas: architecture '" + arch + "' is not an SM name such as sm_90";
    return PtxasStatus::Failed;
  }
  llvm::SmallString<256> dir;
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory("h20-ptxas", dir)) {
    error = "ptxas: cannot create a temporary directory: " + ec.message();
    return PtxasStatus::Failed;
  }
  auto inDir = [&](const char *name) {
    llvm::SmallString<256> p(dir);
    llvm::sys::path::append(p, name);
    return std::string(p);
  };
  const std::string in = inDir("in.ptx"), out = inDir("out.cubin"), log = inDir("ptxas.log");
  PtxasStatus status = PtxasStatus::Failed;
  if (!writeWhole(in, ptx)) {
    error = "ptxas: cannot write " + in;
  } else {
    const std::string archArg = "-arch=" + arch;
    const llvm::StringRef args[] = {ptxas, archArg, "-v", in, "-o", out};
    // Both streams into one file: ptxas writes its -v lines and its errors
    // to different streams depending on the version.
    std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(log),
                                                  llvm::StringRef(log)};
    std::string execError;
    int rc = llvm::sys::ExecuteAndWait(ptxas, args, /*Env=*/std::nullopt, redirects,
                                       /*SecondsToWait=*/0, /*MemoryLimit=*/0, &execError);
    std::string text;
    readWhole(log, text);
    if (rc != 0) {
      error = "ptxas " + archArg + " failed" +
              (rc < 0 ? " to run (" + execError + ")" : " (exit " + std::to_string(rc) + ")") +
              ":\n" + text;
    } else if (!readWhole(out, cubin)) {
      error = "ptxas: no output file " + out;
    } else {
      report = std::move(text);
      status = PtxasStatus::Ok;
    }
  }
  llvm::sys::fs::remove_directories(dir);
  return status;
}

std::vector<PtxasFunctionStats> parsePtxasReport(const std::string &report) {
  std::vector<PtxasFunctionStats> out;
  auto current = [&](llvm::StringRef name) -> PtxasFunctionStats & {
    for (PtxasFunctionStats &f : out)
      if (f.name == name)
        return f;
    out.push_back({});
    out.back().name = name.str();
    return out.back();
  };
  // Numbers before a phrase: "<N> bytes spill stores" -> N.
  auto numberBefore = [](llvm::StringRef line, llvm::StringRef phrase, int64_t &value) {
    size_t at = line.find(phrase);
    if (at == llvm::StringRef::npos)
      return;
    llvm::StringRef head = line.take_front(at).rtrim();
    size_t start = head.find_last_of(" ,:");
    llvm::StringRef digits = start == llvm::StringRef::npos ? head : head.drop_front(start + 1);
    int64_t v;
    if (!digits.getAsInteger(10, v))
      value = v;
  };
  std::string fn;
  llvm::SmallVector<llvm::StringRef, 64> lines;
  llvm::StringRef(report).split(lines, '\n');
  for (llvm::StringRef line : lines) {
    if (size_t at = line.find("Compiling entry function '"); at != llvm::StringRef::npos) {
      llvm::StringRef rest = line.drop_front(at + 26);
      fn = rest.take_until([](char c) { return c == '\''; }).str();
      current(fn);
      continue;
    }
    if (size_t at = line.find("Function properties for "); at != llvm::StringRef::npos) {
      fn = line.drop_front(at + 24).trim().str();
      current(fn);
      continue;
    }
    if (fn.empty())
      continue;
    PtxasFunctionStats &f = current(fn);
    numberBefore(line, " bytes stack frame", f.stackFrame);
    numberBefore(line, " bytes spill stores", f.spillStores);
    numberBefore(line, " bytes spill loads", f.spillLoads);
    if (size_t at = line.find("Used "); at != llvm::StringRef::npos) {
      int64_t regs = -1;
      numberBefore(line.drop_front(at), " registers", regs);
      f.registers = int(regs);
    }
  }
  return out;
}

} // namespace h20
