// `wick launch -n N CMD [ARGS...]`: N processes of CMD, one per rank, each told its rank, the
// group's size and a fresh rendezvous path (WICK_RANK, WICK_LOCAL_RANK, WICK_WORLD_SIZE,
// WICK_RENDEZVOUS), as dist::Communicator::from_env reads them; then waits for all of them. A rank
// that fails is reported as it ends; the others are left to see it (their calls raise DistError)
// and end by themselves. The exit status is the first failing rank's (128 + the signal for one
// killed), or 0.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "args.h"
#include "launch.h"

namespace wick::cli {

namespace {

std::vector<pid_t> g_children;

// SIGINT and SIGTERM reach every rank, then the launcher waits for them as usual.
void forward(int sig) {
  for (pid_t p : g_children) ::kill(p, sig);
}

}  // namespace

int cmd_launch(int argc, char** argv) {
  int64_t n = 0;
  int i = 0;
  for (; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-n" || a == "--nproc") {
      if (i + 1 >= argc) throw std::runtime_error("launch: " + a + " needs a value");
      char* end = nullptr;
      n = std::strtoll(argv[++i], &end, 10);
      if (*end != '\0' || n < 1 || n > 64) throw std::runtime_error(std::string("launch: -n ") + argv[i] + " (1 to 64 ranks)");
    } else if (a == "--help" || a == "-h") {
      std::fputs(command_usage("launch").c_str(), stdout);
      return 0;
    } else if (a == "--") {
      ++i;
      break;
    } else if (a.starts_with("-")) {
      throw std::runtime_error("launch: unknown option '" + a + "'");
    } else {
      break;
    }
  }
  if (n == 0) throw std::runtime_error("launch: -n N (the number of ranks) is required");
  if (i >= argc) throw std::runtime_error("launch: no command to run");
  char** command = argv + i;

  const char* tmp = std::getenv("TMPDIR");
  std::string dir = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/wick-launch-XXXXXX";
  if (::mkdtemp(dir.data()) == nullptr) throw std::runtime_error("launch: cannot make a directory in " + dir + ": " + std::strerror(errno));
  const std::string rendezvous = dir + "/rendezvous";

  struct sigaction sa {};
  sa.sa_handler = forward;
  ::sigaction(SIGINT, &sa, nullptr);
  ::sigaction(SIGTERM, &sa, nullptr);
  std::fflush(nullptr);
  for (int64_t r = 0; r < n; ++r) {
    const pid_t pid = ::fork();
    if (pid < 0) {
      forward(SIGTERM);
      throw std::runtime_error(std::string("launch: fork: ") + std::strerror(errno));
    }
    if (pid == 0) {
      const std::string rank = std::to_string(r), size = std::to_string(n);
      ::setenv("WICK_RANK", rank.c_str(), 1);
      ::setenv("WICK_LOCAL_RANK", rank.c_str(), 1);
      ::setenv("WICK_WORLD_SIZE", size.c_str(), 1);
      ::setenv("WICK_RENDEZVOUS", rendezvous.c_str(), 1);
      ::execvp(command[0], command);
      std::fprintf(stderr, "wick launch: rank %s: cannot run %s: %s\n", rank.c_str(), command[0], std::strerror(errno));
      std::_Exit(127);
    }
    g_children.push_back(pid);
  }

  int status_out = 0;
  for (size_t left = g_children.size(); left > 0;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      break;
    }
    size_t rank = 0;
    while (rank < g_children.size() && g_children[rank] != pid) ++rank;
    if (rank == g_children.size()) continue;
    --left;
    int code = 0;
    if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
      code = WEXITSTATUS(status);
      std::fprintf(stderr, "wick launch: rank %zu (process %d) exited with status %d\n", rank, pid, code);
    } else if (WIFSIGNALED(status)) {
      code = 128 + WTERMSIG(status);
      std::fprintf(stderr, "wick launch: rank %zu (process %d) was killed by signal %d (%s)\n", rank, pid, WTERMSIG(status),
                   strsignal(WTERMSIG(status)));
    }
    if (code != 0 && status_out == 0) status_out = code;
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);  // what a rank 0 that died early left
  return status_out;
}

}  // namespace wick::cli
