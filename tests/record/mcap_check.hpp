// Runs MCAP's own readers (npm @mcap/core, through check_mcap.cjs) on a
// file, for the record tests. Without node or the package the checks skip,
// saying so.
#pragma once

#include <gtest/gtest.h>
#include <stdio.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace sluice_test {

// What check_mcap.cjs printed, by key ("messages", "topic /a", "kind x",
// "record Schema"); empty, with `*skip` set, without node or @mcap/core.
inline std::map<std::string, std::uint64_t> ReadWithMcapsOwnReader(const std::string& path,
                                                                   std::string* skip) {
  const std::string node = SLUICE_NODE_BINARY;
  const std::string modules = SLUICE_NODE_MODULES;
  std::ifstream package(modules + "/@mcap/core/package.json");
  if (node.empty() || modules.empty() || !package) {
    *skip =
        "node or the npm package @mcap/core not found (Debian: nodejs; then "
        "tools/install_node_packages.sh DIR and SLUICE_NODE_MODULES=DIR/node_modules)";
    return {};
  }
  const std::string command = "NODE_PATH='" + modules + "' '" + node + "' '" +
                              SLUICE_MCAP_CHECK_SCRIPT + "' '" + path + "' 2>&1";
  std::FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) {
    ADD_FAILURE() << "cannot run " << command;
    return {};
  }
  std::string output;
  char buffer[512];
  while (std::fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  const int status = pclose(pipe);
  EXPECT_EQ(status, 0) << output;
  std::map<std::string, std::uint64_t> found;
  std::istringstream lines(output);
  for (std::string line; std::getline(lines, line);) {
    const std::size_t space = line.rfind(' ');
    if (space == std::string::npos || space + 1 == line.size() ||
        line.find_first_not_of("0123456789", space + 1) != std::string::npos) {
      continue;  // not "key number": an error's text, printed above on failure
    }
    found[line.substr(0, space)] = std::stoull(line.substr(space + 1));
  }
  return found;
}

// MCAP's own readers read each of `files` that exists (a test's whole
// files, before it removes them); nothing without node or @mcap/core. The count of messages
// they read, over all the files.
inline std::uint64_t ReadEachWithMcapsOwnReader(const std::vector<std::string>& files) {
  std::uint64_t messages = 0;
  for (const std::string& file : files) {
    if (!std::ifstream(file)) continue;  // removed by the test already
    std::string skip;
    const auto found = ReadWithMcapsOwnReader(file, &skip);
    if (!skip.empty()) return 0;
    const auto read = found.find("messages");
    EXPECT_NE(read, found.end()) << file;
    if (read != found.end()) messages += read->second;
  }
  return messages;
}

}  // namespace sluice_test
