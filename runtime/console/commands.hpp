#pragma once

// The console's commands (`asyncrl repl`, docs/repl.md): their names, usage and help, and the
// parser that turns a line into a validated command. Shared by the client (help, completion,
// --read-only) and the controller (which checks every request again). No CAF, no torch.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace asyncrl {

enum class console_cmd : int32_t {
  help,
  status,
  metrics,
  watch,
  workers,
  get,
  set,
  pause,
  resume,
  checkpoint,
  eval,
  generate,
  add_rollouter,
  remove_rollouter,
  kill,
  hang,
  delay_sync,
  stop,
  quit,
};

/// Where a command runs: in the client only, or in the run (sent to the controller).
enum class command_site { client, run };

struct command_info {
  console_cmd cmd;
  const char* name;
  const char* usage;    // e.g. "set KEY VALUE"
  const char* summary;  // one line, for `help`
  const char* details;  // more lines, for `help CMD`
  int min_args, max_args;
  bool changes_run;  // refused under --read-only
  command_site site;
};

/// Every command, in the order `help` lists them.
const std::vector<command_info>& console_commands();
/// The command called `name`, or nullptr.
const command_info* find_command(std::string_view name);
const command_info& command_of(console_cmd cmd);

struct parsed_command {
  console_cmd cmd = console_cmd::help;
  std::vector<std::string> args;
};

/// Parses one line ("set trainer.lr 1e-5", "generate 12+7=", "kill rollouter 1"). Words are
/// separated by blanks; "double quotes" group words. `generate` takes the rest of the line.
/// Throws std::invalid_argument naming the command and what is wrong (unknown command, wrong
/// number of arguments, a number that is not one).
parsed_command parse_command(const std::string& line);

/// Checks a command's arguments (their number, the numbers among them, the actor names of
/// kill and hang). Throws std::invalid_argument like parse_command; the run checks again.
void check_command(console_cmd cmd, const std::vector<std::string>& args);

/// Splits an --exec script at ';' (outside quotes) into trimmed, non-empty commands.
std::vector<std::string> split_script(const std::string& script);

/// The `help` text: every command with its summary, or one command's usage and details.
std::string help_text(const std::string& command = "");

}  // namespace asyncrl
