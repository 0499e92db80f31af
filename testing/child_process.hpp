// A helper binary run as a child process (fork and exec), its standard
// output read line by line; killed (SIGKILL) and reaped when it goes out of
// scope. For the tests that need real processes (the NATS bridge's and the
// shared-memory bus's) and the NATS benchmark tables. POSIX only; every
// wait has a deadline.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

namespace sluice_test {

// A child process; its standard output is a pipe read with ReadLine.
class ChildProcess {
 public:
  ChildProcess() = default;
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;
  ~ChildProcess() { Kill(SIGKILL); }

  // Starts argv[0] with `argv`; stdout is piped when `capture`, else
  // discarded. False when fork or pipe failed.
  bool Start(const std::vector<std::string>& argv, bool capture) {
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    int fds[2] = {-1, -1};
    if (capture && pipe(fds) != 0) return false;
    const pid_t pid = fork();
    if (pid < 0) return false;
    if (pid == 0) {
      // The child: only async-signal-safe calls until exec.
      const int null = open("/dev/null", O_RDWR);
      if (capture) {
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        close(fds[1]);
      } else if (null >= 0) {
        dup2(null, STDOUT_FILENO);
      }
      if (null >= 0) dup2(null, STDERR_FILENO);
      execv(args[0], args.data());
      _exit(127);
    }
    pid_ = pid;
    if (capture) {
      close(fds[1]);
      out_ = fds[0];
    }
    return true;
  }

  // The next line of output (without the newline), or false at the
  // deadline or end of output.
  bool ReadLine(std::string* line, std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const std::size_t newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        *line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        return true;
      }
      if (out_ < 0) return false;
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) return false;
      pollfd readable{out_, POLLIN, 0};
      if (poll(&readable, 1, static_cast<int>(left.count())) <= 0) continue;
      char chunk[512];
      const ssize_t got = read(out_, chunk, sizeof chunk);
      if (got <= 0) {
        close(out_);
        out_ = -1;
        continue;
      }
      buffer_.append(chunk, static_cast<std::size_t>(got));
    }
  }

  // Reads lines until one starts with `prefix`; returns it.
  bool WaitForLine(const std::string& prefix, std::string* line,
                   std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !ReadLine(line, left)) return false;
      if (line->compare(0, prefix.size(), prefix) == 0) return true;
    }
  }

  void Signal(int signal) {
    if (pid_ > 0) kill(pid_, signal);
  }

  // Waits for the exit; its status (as waitpid gives it), or -1 at the
  // deadline.
  int Wait(std::chrono::milliseconds timeout) {
    if (pid_ <= 0) return status_;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        status_ = status;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return -1;
  }

  // Sends `signal` and reaps the child; one still there 10 s later (it
  // ignores the signal, or it is stopped) is killed with SIGKILL.
  void Kill(int signal) {
    if (pid_ <= 0) return;
    kill(pid_, signal);
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    for (;;) {
      const pid_t got = waitpid(pid_, &status, WNOHANG);
      if (got == pid_ || got < 0) break;
      if (std::chrono::steady_clock::now() >= deadline) {
        kill(pid_, SIGKILL);
        waitpid(pid_, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    pid_ = -1;
    status_ = status;
    if (out_ >= 0) {
      close(out_);
      out_ = -1;
    }
  }

  bool Running() const { return pid_ > 0; }
  pid_t Pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  int status_ = -1;
  std::string buffer_;
};

}  // namespace sluice_test
