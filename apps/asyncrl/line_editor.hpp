#pragma once

// Interactive line input for `asyncrl repl`: line editing, history kept across sessions in a
// file, and tab completion, over libedit's readline emulation (BSD-licensed, unlike GNU
// readline). Torch-free.

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace asyncrl {

/// Candidates for the word being completed: `line` is the whole line up to the cursor, `word`
/// the partial word under the cursor (possibly empty).
using completion_fn =
    std::function<std::vector<std::string>(const std::string& line, const std::string& word)>;

/// Interactive input from a terminal: line editing (libedit), history persisted to a file, and
/// tab completion. One per process (libedit keeps global state).
class line_editor {
 public:
  line_editor(std::string prompt, std::string history_path, completion_fn complete);
  ~line_editor();  // writes the history file
  line_editor(const line_editor&) = delete;
  line_editor& operator=(const line_editor&) = delete;

  /// The next line (without the newline), or nullopt at end of input (Ctrl-D on an empty
  /// line). A non-empty line that differs from the previous one is added to the history and
  /// appended to the history file at once (so a crash loses nothing).
  std::optional<std::string> read();

 private:
  std::string prompt_;
  std::string history_path_;
  std::string last_;  // the newest history entry, to skip repeats
};

/// Waits up to `ms` milliseconds for a key on stdin (a terminal; put in non-canonical,
/// no-echo mode meanwhile and restored after); consumes it. True if a key came.
bool key_pressed(int ms);

/// The default history file: $ASYNCRL_HISTORY if set, else $HOME/.asyncrl_history.
std::string default_history_path();

}  // namespace asyncrl
