#pragma once

// Whole-file writes that a full disk or a crash cannot leave truncated: the reports of a run
// (summary.json, ledger.json, cluster.json) are read by scripts that would take an empty or
// half-written file for a result.

#include <string>

namespace asyncrl {

/// Writes `bytes` to a temporary file next to `path`, then renames it over `path`: a reader
/// sees the old file or the new one, never part of one. On failure (ENOSPC, EACCES ...) the
/// temporary is removed, `path` is left as it was, and std::runtime_error names the file and
/// the system's reason.
void write_file_atomically(const std::string& path, const std::string& bytes);

/// The whole file as bytes; std::runtime_error "PATH: cannot open" or "PATH: read failed".
std::string read_file_bytes(const std::string& path);

/// Writes all of `bytes` to `fd`, through short writes and EINTR; throws std::runtime_error
/// "PATH: write failed: REASON" naming `path` (the file behind `fd`).
void write_all_fd(int fd, const std::string& bytes, const std::string& path);

}  // namespace asyncrl
