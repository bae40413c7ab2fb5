#pragma once

// The run secret: what a console or worker in another process presents to a run without TLS
// (docs/cluster.md, "Who may steer a run"). The run writes it to <run_dir>/run.secret, readable
// only by its owner; a client reads it from there, from a file it is given, or from the
// environment (a worker on another machine).

#include <cstddef>
#include <string>

namespace asyncrl {

/// `bytes` from OpenSSL's generator, in hex (2 * bytes characters).
std::string random_hex(size_t bytes);

/// Writes a fresh random secret (32 bytes from OpenSSL's generator, in hex) to
/// <run_dir>/run.secret with mode 0600, replacing an older one; returns it. Throws naming the
/// file on an I/O error.
std::string write_run_secret(const std::string& run_dir);

/// The secret a client presents: the file `secret_file` when given, else $ASYNCRL_RUN_SECRET,
/// else `fallback_file` when it exists; "" when there is none. Throws naming the file when
/// a given one cannot be read (as for another user's run.secret).
std::string read_run_secret(const std::string& secret_file, const std::string& fallback_file);

}  // namespace asyncrl
