#include "apps/asyncrl/line_editor.hpp"

#include <editline/readline.h>
#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

namespace asyncrl {

namespace {

constexpr size_t k_history_max = 1000;

// libedit calls back through plain C function pointers, hence globals (one editor a process).
completion_fn g_complete;
std::vector<std::string> g_matches;  // of the completion under way, found at state 0
size_t g_next = 0;

// The history file is plain text, one entry a line (not libedit's vis-encoded format), so
// that a line can be appended the moment it is entered. Returns the newest `k_history_max`.
std::vector<std::string> load_history(const std::string& path) {
  std::vector<std::string> lines;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) lines.push_back(l);
  if (lines.size() > k_history_max) lines.erase(lines.begin(), lines.end() - k_history_max);
  return lines;
}

char* next_match(const char* word, int state) {
  if (state == 0) {
    g_matches.clear();
    g_next = 0;
    const size_t n = std::strlen(word);
    for (auto& c : g_complete(std::string(rl_line_buffer, rl_point), word))
      if (c.compare(0, n, word) == 0) g_matches.push_back(std::move(c));
  }
  // libedit frees what it is given, so it must come from malloc
  return g_next < g_matches.size() ? strdup(g_matches[g_next++].c_str()) : nullptr;
}

char** attempt_completion(const char* word, int, int) {
  rl_attempted_completion_over = 1;  // no candidates means none, not file names
  if (!g_complete) return nullptr;
  try {
    return rl_completion_matches(word, next_match);
  } catch (...) {  // an exception must not unwind through libedit's C frames
    return nullptr;
  }
}

}  // namespace

line_editor::line_editor(std::string prompt, std::string history_path, completion_fn complete)
    : prompt_(std::move(prompt)), history_path_(std::move(history_path)) {
  g_complete = std::move(complete);
  rl_readline_name = "asyncrl";  // the section name in ~/.editrc
  // only blanks separate words, so "trainer.lr" or "a=b" complete as one word
  rl_basic_word_break_characters = " \t";
  rl_attempted_completion_function = attempt_completion;
  stifle_history(static_cast<int>(k_history_max));
  const auto lines = load_history(history_path_);
  for (const auto& l : lines)
    add_history(l.c_str());
  if (!lines.empty()) last_ = lines.back();
}

line_editor::~line_editor() {
  // Lines were appended as they came; here the file is only cut back to its newest entries
  // (re-read, so lines appended meanwhile by another process are kept).
  try {
    const auto lines = load_history(history_path_);
    const std::string tmp = history_path_ + ".tmp";
    std::ofstream out(tmp, std::ios::trunc);
    for (const auto& l : lines)
      out << l << '\n';
    out.close();
    if (out) std::rename(tmp.c_str(), history_path_.c_str());
  } catch (...) {  // history is a convenience: never worth a crash at exit
  }
  rl_attempted_completion_function = nullptr;
  g_complete = nullptr;
}

std::optional<std::string> line_editor::read() {
  char* raw = readline(prompt_.c_str());
  if (!raw) return std::nullopt;
  std::string line(raw);
  std::free(raw);
  // completion leaves a trailing blank: "status " and "status" are one history entry
  const std::string entry = line.substr(0, line.find_last_not_of(" \t") + 1);
  if (!entry.empty() && entry != last_) {
    add_history(entry.c_str());
    last_ = entry;
    std::ofstream(history_path_, std::ios::app) << entry << '\n';  // a failure only loses history
  }
  return line;
}

bool key_pressed(int ms) {
  termios old{};
  if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &old) != 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    return false;
  }
  termios raw = old;
  raw.c_lflag &= ~(ICANON | ECHO);  // a key counts without Enter and is not shown
  raw.c_cc[VMIN] = 0;
  raw.c_cc[VTIME] = 0;
  tcsetattr(STDIN_FILENO, TCSANOW, &raw);
  pollfd p{STDIN_FILENO, POLLIN, 0};
  const bool got = poll(&p, 1, ms) > 0 && (p.revents & POLLIN);
  char buf[64];  // an arrow key is several bytes: take them all in one read
  if (got) (void)!::read(STDIN_FILENO, buf, sizeof buf);
  tcsetattr(STDIN_FILENO, TCSANOW, &old);
  return got;
}

std::string default_history_path() {
  if (const char* p = std::getenv("ASYNCRL_HISTORY"); p && *p) return p;
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.asyncrl_history";
}

}  // namespace asyncrl
