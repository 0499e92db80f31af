// The subjects the NATS bridge uses: the grammar it accepts for Forward and
// Receive, and the priority suffix each frame travels under
// ("<subject>.<low|medium|high>"). Standard library only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>

#include "sluice/config.hpp"
#include "sluice/message.hpp"

namespace sluice {
inline namespace SLUICE_ABI_NAMESPACE {
namespace nats {

// Subject suffixes, by priority.
inline constexpr std::string_view kPrioritySubjects[kPriorityCount] = {"low", "medium", "high"};

// Whether the bridge accepts `subject` for Forward and Receive: a literal
// NATS subject, tokens of one or more characters separated by '.', without
// whitespace, control characters or the wildcard characters '*' and '>'. A
// wildcard could overlap another inbound subject of the same bridge, and the
// client would then hand one frame to two subscriptions: twice into the bus.
inline bool IsLiteralSubject(std::string_view subject) noexcept {
  bool token_empty = true;
  for (const char c : subject) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '.') {
      if (token_empty) return false;
      token_empty = true;
    } else if (byte <= 0x20 || byte == 0x7F || c == '*' || c == '>') {
      return false;
    } else {
      token_empty = false;
    }
  }
  return !token_empty;  // also false for an empty subject
}

// Whether the bridge accepts `subject` for Receive: IsLiteralSubject, or
// tokens of which some are exactly "*" (one token, any value). ">" is never
// accepted: the priority suffix follows the subject.
inline bool IsReceiveSubject(std::string_view subject) noexcept {
  std::string literal(subject);
  std::size_t start = 0;
  while (start <= literal.size()) {
    std::size_t end = literal.find('.', start);
    if (end == std::string::npos) end = literal.size();
    if (end - start == 1 && literal[start] == '*') literal[start] = 'w';
    start = end + 1;
  }
  return IsLiteralSubject(literal);
}

// Whether one subject could match both patterns (IsReceiveSubject): the
// same number of tokens, each pair equal or one of them "*".
inline bool SubjectsOverlap(std::string_view a, std::string_view b) noexcept {
  for (;;) {
    const std::size_t a_end = std::min(a.find('.'), a.size());
    const std::size_t b_end = std::min(b.find('.'), b.size());
    const std::string_view a_token = a.substr(0, a_end);
    const std::string_view b_token = b.substr(0, b_end);
    if (a_token != b_token && a_token != "*" && b_token != "*") return false;
    const bool a_last = a_end == a.size();
    const bool b_last = b_end == b.size();
    if (a_last || b_last) return a_last && b_last;
    a.remove_prefix(a_end + 1);
    b.remove_prefix(b_end + 1);
  }
}

// "<subject>.<low|medium|high>": where a message of `priority` travels.
inline std::string SubjectFor(std::string_view subject, MessagePriority priority) {
  std::string result(subject);
  result += '.';
  result += kPrioritySubjects[static_cast<std::size_t>(priority)];
  return result;
}

namespace detail {

// Whether a subject ends in a priority suffix (SubjectFor), and which.
inline bool NamesPriority(std::string_view subject, std::size_t* priority) noexcept {
  for (std::size_t p = 0; p < kPriorityCount; ++p) {
    const std::string_view suffix = kPrioritySubjects[p];
    if (subject.size() > suffix.size() && subject[subject.size() - suffix.size() - 1] == '.' &&
        subject.substr(subject.size() - suffix.size()) == suffix) {
      *priority = p;
      return true;
    }
  }
  return false;
}

// The priority a subject's suffix names (SubjectFor), MEDIUM if none.
inline std::size_t PriorityIndexOf(std::string_view subject) noexcept {
  std::size_t priority = static_cast<std::size_t>(MessagePriority::MEDIUM);
  (void)NamesPriority(subject, &priority);
  return priority;
}

}  // namespace detail

}  // namespace nats
}  // namespace SLUICE_ABI_NAMESPACE
}  // namespace sluice
