//===- RankLauncher.cpp - start one h20-run process per GPU --------------===//
#include "h20/Runtime/Parallel/RankLauncher.h"

#include "h20/Runtime/Parallel/ContextParallel.h"
#include "h20/Runtime/Format/FileUtil.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include <dirent.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace h20::runtime {
namespace {

volatile std::sig_atomic_t gStopSignal = 0;
extern "C" void onStopSignal(int sig) { gStopSignal = sig; }

std::string describe(int status) {
  if (WIFEXITED(status))
    return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    const char *name = strsignal(sig);
    return "was killed by signal " + std::to_string(sig) + " (" + (name ? name : "?") + ")";
  }
  return "ended with status " + std::to_string(status);
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Child {
  pid_t pid = -1;
  bool running = false;
  int status = 0;
};

/// SIGTERM to every running child, SIGKILL to those alive after `graceS`;
/// reaps them all.
void stopAll(std::vector<Child> &children, double graceS) {
  // Each rank leads its own process group: the signal reaches what it started.
  for (Child &c : children)
    if (c.running)
      kill(-c.pid, SIGTERM);
  auto t0 = std::chrono::steady_clock::now();
  bool killed = false;
  for (;;) {
    bool any = false;
    for (Child &c : children) {
      if (!c.running)
        continue;
      int st = 0;
      pid_t r = waitpid(c.pid, &st, WNOHANG);
      if (r == c.pid || (r < 0 && errno == ECHILD)) {
        c.running = false;
        c.status = st;
      } else {
        any = true;
      }
    }
    if (!any)
      return;
    if (!killed && secondsSince(t0) > graceS) {
      for (Child &c : children)
        if (c.running)
          kill(-c.pid, SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

/// Removes the launcher's temporary directory and every file in it (the
/// ranks' logs, the id file, temporaries a killed rank left).
void removeDir(const std::string &dir) {
  if (DIR *d = opendir(dir.c_str())) {
    while (dirent *e = readdir(d)) {
      std::string name = e->d_name;
      if (name != "." && name != "..")
        unlink((dir + "/" + name).c_str());
    }
    closedir(d);
  }
  rmdir(dir.c_str());
}

} // namespace

nlohmann::json collectivesToJson(const std::vector<CpCollective> &log) {
  nlohmann::json out = nlohmann::json::array();
  for (const CpCollective &c : log)
    out.push_back({{"layer", c.layer},
                   {"step", c.step},
                   {"send_to", c.sendTo},
                   {"send_block_of", c.sendOrigin},
                   {"send_bytes", c.sendBytes},
                   {"recv_from", c.recvFrom},
                   {"recv_block_of", c.recvOrigin},
                   {"recv_bytes", c.recvBytes}});
  return out;
}

std::vector<CpCollective> collectivesFromJson(const nlohmann::json &array) {
  std::vector<CpCollective> out;
  if (!array.is_array())
    return out;
  for (const nlohmann::json &c : array) {
    if (!c.is_object())
      continue;
    CpCollective x;
    x.layer = c.value("layer", -1);
    x.step = c.value("step", -1);
    x.sendTo = c.value("send_to", -1);
    x.recvFrom = c.value("recv_from", -1);
    x.sendOrigin = c.value("send_block_of", -1);
    x.recvOrigin = c.value("recv_block_of", -1);
    x.sendBytes = c.value("send_bytes", int64_t(-1));
    x.recvBytes = c.value("recv_bytes", int64_t(-1));
    out.push_back(x);
  }
  return out;
}

nlohmann::json tpCollectivesToJson(const std::vector<TpCollective> &log) {
  nlohmann::json out = nlohmann::json::array();
  for (const TpCollective &c : log)
    out.push_back({{"step", c.step}, {"chunk", c.chunk}, {"bytes", c.bytes}, {"dtype", c.dtype}});
  return out;
}

std::vector<TpCollective> tpCollectivesFromJson(const nlohmann::json &array) {
  std::vector<TpCollective> out;
  if (!array.is_array())
    return out;
  for (const nlohmann::json &c : array) {
    if (!c.is_object())
      continue;
    TpCollective x;
    auto integer = [&](const char *key) {
      auto it = c.find(key);
      return it != c.end() && it->is_number_integer() ? it->get<int64_t>() : int64_t(-1);
    };
    x.step = integer("step");
    x.chunk = integer("chunk");
    x.bytes = integer("bytes");
    auto dt = c.find("dtype");
    x.dtype = dt != c.end() && dt->is_string() ? dt->get<std::string>() : std::string();
    out.push_back(x);
  }
  return out;
}

bool checkRankLogs(const std::string &dir, int ranks, std::string &summary, std::string &error) {
  std::vector<std::vector<CpCollective>> logs(ranks);
  std::vector<std::vector<TpCollective>> tpLogs(ranks);
  std::string ttfts;
  for (int r = 0; r < ranks; ++r) {
    std::string path = dir + "/rank-" + std::to_string(r) + ".json", text;
    if (!readFile(path, text, error)) {
      error = "rank " + std::to_string(r) + " left no log: " + error;
      return false;
    }
    nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || !j.contains("collectives") ||
        !j["collectives"].is_array()) {
      error = "rank " + std::to_string(r) + "'s log '" + path + "' is not a rank log";
      return false;
    }
    logs[r] = collectivesFromJson(j["collectives"]);
    if (j.contains("tp_collectives"))
      tpLogs[r] = tpCollectivesFromJson(j["tp_collectives"]);
    char buf[64];
    double ttft = -1.0;
    if (auto it = j.find("ttft_ms"); it != j.end() && it->is_number())
      ttft = it->get<double>();
    std::snprintf(buf, sizeof buf, "%s%.1f", r ? " / " : "", ttft);
    ttfts += buf;
  }
  std::string why;
  if (!collectivesMatch(logs, why)) {
    error = "the ranks' collectives differ: " + why;
    return false;
  }
  if (!tpCollectivesMatch(tpLogs, why)) {
    error = "the ranks' all-reduces differ: " + why;
    return false;
  }
  const bool tp = ranks > 0 && !tpLogs[0].empty();
  summary = std::string(tp ? "tensor parallel (NCCL): " : "context parallel (NCCL): ") +
            std::to_string(ranks) + " ranks, " +
            (tp ? "all-reduces match (" + std::to_string(tpLogs[0].size())
                : "collectives match (" + std::to_string(ranks ? logs[0].size() : 0)) +
            " per rank); TTFT per rank " + ttfts + " ms";
  return true;
}

bool writeRankLog(int rank, const std::string &json, std::string &error) {
  const char *dir = std::getenv(kRankLogDirEnv);
  if (!dir || !*dir)
    return true;
  return writeFileAtomically(std::string(dir) + "/rank-" + std::to_string(rank) + ".json", json,
                             error);
}

int launchRanks(int ranks, const std::string &exeName, char **argv, double graceS) {
  auto fail = [](const std::string &m) {
    std::fprintf(stderr, "h20-run: error: %s\n", m.c_str());
    return 1;
  };
  // The path, resolved now: /proc/self/exe means the launcher itself.
  char exe[PATH_MAX];
  if (!realpath(exeName.c_str(), exe))
    return fail("cannot find the program '" + exeName + "': " + std::strerror(errno));
  const char *tmp = std::getenv("TMPDIR");
  std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/h20-run-XXXXXX";
  std::vector<char> dirBuf(tmpl.begin(), tmpl.end());
  dirBuf.push_back('\0');
  if (!mkdtemp(dirBuf.data()))
    return fail("cannot make a temporary directory '" + tmpl + "': " + std::strerror(errno));
  std::string dir = dirBuf.data();

  struct sigaction sa {};
  sa.sa_handler = onStopSignal;
  sigemptyset(&sa.sa_mask);
  struct sigaction old[3];
  const int stopSignals[3] = {SIGINT, SIGTERM, SIGHUP};
  for (int i = 0; i < 3; ++i)
    sigaction(stopSignals[i], &sa, &old[i]);
  auto restoreSignals = [&] {
    for (int i = 0; i < 3; ++i)
      sigaction(stopSignals[i], &old[i], nullptr);
  };

  // Each rank's environment, made before fork: the child only calls
  // async-signal-safe functions until execve (this process may already
  // have threads, e.g. the CUDA driver's).
  std::vector<std::vector<std::string>> envs(ranks);
  std::vector<std::vector<char *>> envps(ranks);
  for (int r = 0; r < ranks; ++r) {
    std::string rs = std::to_string(r), ws = std::to_string(ranks);
    const std::vector<std::pair<std::string, std::string>> set = {
        {"RANK", rs}, {"LOCAL_RANK", rs}, {"WORLD_SIZE", ws}, {"LOCAL_WORLD_SIZE", ws},
        {"H20_NCCL_ID_FILE", dir + "/nccl-id"}, {kRankLogDirEnv, dir}};
    for (char **e = environ; *e; ++e) {
      std::string kv = *e;
      std::string key = kv.substr(0, kv.find('='));
      if (std::none_of(set.begin(), set.end(), [&](const auto &p) { return p.first == key; }))
        envs[r].push_back(kv);
    }
    for (const auto &[k, v] : set)
      envs[r].push_back(k + "=" + v);
    for (std::string &e : envs[r])
      envps[r].push_back(e.data());
    envps[r].push_back(nullptr);
  }
  std::fflush(stdout);
  std::fflush(stderr);
  pid_t launcher = getpid();
  std::vector<Child> children(ranks);
  for (int r = 0; r < ranks; ++r) {
    pid_t pid = fork();
    if (pid < 0) {
      std::string why = std::strerror(errno);
      stopAll(children, graceS);
      removeDir(dir);
      restoreSignals();
      return fail("cannot start rank " + std::to_string(r) + ": fork: " + why);
    }
    if (pid == 0) {
      // The rank dies with the launcher (SIGKILL to the launcher included).
      prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (getppid() != launcher)
        _exit(1);
      setpgid(0, 0);
      for (int i = 0; i < 3; ++i)
        sigaction(stopSignals[i], &old[i], nullptr);
      execve(exe, argv, envps[r].data());
      const char msg[] = "h20-run: error: a rank could not be started (execve failed)\n";
      ssize_t ignored = write(STDERR_FILENO, msg, sizeof msg - 1);
      (void)ignored;
      _exit(127);
    }
    setpgid(pid, pid); // also here: no race with the first kill
    children[r].pid = pid;
    children[r].running = true;
  }

  // Wait for all; the first failure stops the others.
  int code = 0;
  for (;;) {
    if (gStopSignal) {
      int sig = gStopSignal;
      stopAll(children, graceS);
      fail(std::string("stopped by signal ") + std::to_string(sig) + " (" + strsignal(sig) +
           "); the " + std::to_string(ranks) + " ranks were stopped");
      code = 128 + sig;
      break;
    }
    int status = 0;
    pid_t pid = waitpid(-1, &status, WNOHANG);
    if (pid > 0) {
      int r = -1;
      for (int i = 0; i < ranks; ++i)
        if (children[i].pid == pid)
          r = i;
      if (r < 0)
        continue;
      children[r].running = false;
      children[r].status = status;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        int others = 0;
        for (const Child &c : children)
          others += c.running;
        auto t0 = std::chrono::steady_clock::now();
        stopAll(children, graceS);
        code = WIFEXITED(status) ? WEXITSTATUS(status) : 1;
        char took[32];
        std::snprintf(took, sizeof took, "%.1f", secondsSince(t0));
        fail("rank " + std::to_string(r) + " (pid " + std::to_string(pid) + ") " +
             describe(status) + "; stopped the other " + std::to_string(others) +
             " running rank(s) in " + took + " s");
        break;
      }
      bool all = true;
      for (const Child &c : children)
        all = all && !c.running;
      if (all)
        break;
      continue;
    }
    if (pid < 0 && errno != EINTR)
      break; // no children left
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  restoreSignals();
  if (code == 0) {
    std::string summary, error;
    if (!checkRankLogs(dir, ranks, summary, error))
      code = fail(error);
    else
      std::printf("%s\n", summary.c_str());
  }
  removeDir(dir);
  return code;
}

} // namespace h20::runtime
