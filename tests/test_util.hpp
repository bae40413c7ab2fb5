#pragma once

#include <filesystem>
#include <string>

namespace asyncrl::test {

/// A fresh, empty directory under the system temp dir; removed when the object dies.
class temp_dir {
 public:
  explicit temp_dir(const std::string& tag = "asyncrl");
  ~temp_dir();
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

/// Writes `text` to `path`, replacing it.
void write_text(const std::string& path, const std::string& text);

/// Reads a whole file.
std::string read_text(const std::string& path);

/// Runs a shell command, returns its exit status and captures stdout (stderr goes to the log).
int run_command(const std::string& cmd, std::string* out = nullptr);

}  // namespace asyncrl::test
