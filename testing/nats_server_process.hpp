// Child processes for the bridge's tests and benchmark table: a nats-server
// on a free loopback port (started, killed, restarted on the same port), and
// a helper binary whose standard output is read line by line. POSIX only.
// Every wait has a deadline, as a guard against hangs only.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "child_process.hpp"

namespace sluice_nats_test {

// The path of `name` on PATH, or "" when it is not there.
inline std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  if (path == nullptr) return "";
  std::string dirs(path);
  std::size_t start = 0;
  while (start <= dirs.size()) {
    const std::size_t end = dirs.find(':', start);
    const std::string dir =
        dirs.substr(start, end == std::string::npos ? std::string::npos : end - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + name;
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return "";
}

// A TCP port on 127.0.0.1 that nothing listened on a moment ago.
inline int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = 0;
  socklen_t length = sizeof address;
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0) {
    port = ntohs(address.sin_port);
  }
  close(fd);
  return port;
}

inline bool AcceptsConnections(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  close(fd);
  return ok;
}

using sluice_test::ChildProcess;

// `nats-server -a 127.0.0.1 -p <port>`, on a port found free at Start and
// kept across Kill and Restart.
class NatsServer {
 public:
  // On PATH, else where CMake found it (Debian installs it in /usr/sbin,
  // which is not on every user's PATH), else "".
  static std::string Binary() {
    std::string found = FindOnPath("nats-server");
#ifdef SLUICE_NATS_SERVER_FOUND
    if (found.empty() && access(SLUICE_NATS_SERVER_FOUND, X_OK) == 0) {
      found = SLUICE_NATS_SERVER_FOUND;
    }
#endif
    return found;
  }

  // `extra`: more arguments, after the address and port (a configuration
  // file "-c", cluster "--cluster" and "--routes"), kept for Restart.
  bool Start(std::vector<std::string> extra = {}) {
    if (port_ == 0) port_ = FreeLoopbackPort();
    extra_ = std::move(extra);
    return Launch();
  }
  // SIGKILL: no goodbye to the clients, as a crash.
  void Kill() { process_.Kill(SIGKILL); }
  bool Restart() {
    Kill();
    return Launch();
  }
  void Stop() {
    process_.Kill(SIGTERM);
    std::remove(LogPath().c_str());
  }

  // The server's log so far: what a test prints when the server refused
  // what it should not have.
  std::string LogText() const {
    std::string content;
    if (std::FILE* file = std::fopen(LogPath().c_str(), "r")) {
      char chunk[4096];
      std::size_t got = 0;
      while ((got = std::fread(chunk, 1, sizeof chunk, file)) > 0) content.append(chunk, got);
      std::fclose(file);
    }
    return content;
  }

  int Port() const { return port_; }
  pid_t Pid() const { return process_.Pid(); }
  std::string Url() const { return "nats://127.0.0.1:" + std::to_string(port_); }

 private:
  // Started when its own log says it is ready (a port that accepts could
  // be another process's, and a server may accept before it has loaded
  // all of its configuration).
  bool Launch() {
    const std::string binary = Binary();
    if (binary.empty() || port_ == 0) return false;
    const std::string log = LogPath();
    // The port may still be held for a moment by the killed server.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      std::remove(log.c_str());
      std::vector<std::string> argv = {binary, "-a", "127.0.0.1", "-p", std::to_string(port_),
                                       "-l",   log};
      argv.insert(argv.end(), extra_.begin(), extra_.end());
      if (!process_.Start(argv, false)) return false;
      while (std::chrono::steady_clock::now() < deadline) {
        if (LogSays(log, "Server is ready") && AcceptsConnections(port_)) return true;
        if (process_.Wait(std::chrono::milliseconds(20)) != -1) break;  // exited: retry
      }
    }
    return false;
  }

  std::string LogPath() const {
    const char* base = std::getenv("TMPDIR");
    return std::string(base != nullptr ? base : "/tmp") + "/sluice-nats-server-" +
           std::to_string(getpid()) + "-" + std::to_string(port_) + ".log";
  }

  static bool LogSays(const std::string& path, const std::string& text) {
    std::FILE* file = std::fopen(path.c_str(), "r");
    if (file == nullptr) return false;
    std::string content;
    char chunk[4096];
    std::size_t got = 0;
    while ((got = std::fread(chunk, 1, sizeof chunk, file)) > 0) content.append(chunk, got);
    std::fclose(file);
    return content.find(text) != std::string::npos;
  }

  int port_ = 0;
  std::vector<std::string> extra_;
  ChildProcess process_;
};

}  // namespace sluice_nats_test
