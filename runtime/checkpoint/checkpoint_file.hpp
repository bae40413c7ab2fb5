#pragma once

// Checkpoint files for lossless resume (issue 11): one file per optimizer step, written
// atomically, verified by a checksum before anything in it is used. Torch-free and CAF-free:
// the sections are opaque bytes that their owners (trainer, controller...) encode.
//
// File layout, all integers little-endian whatever the host:
//   offset  size  field
//        0     8  magic "ASYNCRLC"
//        8     4  u32 format version (kCheckpointFormat)
//       12     4  u32 reserved, 0
//       16     8  i64 step
//       24     8  u64 payload length P
//       32    32  SHA-256 of the payload
//       64     P  payload:
//                   u32 section count, then per section (in name order):
//                   u32 name length, name bytes, u64 data length, data bytes
// A file is exactly 64 + P bytes. The reader trusts no length: each is checked against the
// bytes that are really there before it is used, so a damaged file is a checkpoint_error,
// never a crash or a huge allocation.

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace asyncrl {

/// One checkpoint: the optimizer step it was taken after, and named sections of bytes (the
/// trainer's state, the controller's run state...). Opaque to this layer.
struct checkpoint_file {
  int64_t step = 0;
  std::map<std::string, std::string> sections;
};

// 2: scored samples carry their floats as raw bits (messages/float_bits.hpp).
// 3: reward_counts gained the external scorer's counts; 4: and the injected faults.
// 5: trainer_counts and queue_stats gained the refills (algorithm.refill).
constexpr uint32_t kCheckpointFormat = 5;

/// A checkpoint that cannot be used: what is wrong and with which file.
struct checkpoint_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// <dir>/step-00000012.ckpt (8 digits, zero padded; more digits past 99999999). Throws
/// std::invalid_argument for a negative step.
std::string checkpoint_path(const std::string& dir, int64_t step);

/// Writes atomically: a temporary file in `dir`, fsync, rename over the final name, fsync of
/// the directory. Then deletes all but the newest `keep` checkpoints (keep >= 1). Creates dir.
/// Throws std::runtime_error naming the path and errno text on any I/O failure (disk full...).
/// Retention counts only checkpoints up to c.step and never deletes c itself: files of later
/// steps (left by a run that got further, e.g. a corrupt newest one that a resume skipped) are
/// neither counted nor deleted, so keep = 1 cannot delete what was just written.
/// std::invalid_argument for keep < 1 or a negative step.
void write_checkpoint(const std::string& dir, const checkpoint_file& c, int64_t keep);

/// Reads and verifies one file. Throws checkpoint_error naming the path and the problem:
/// not a checkpoint (magic), format version N unsupported (names both), truncated (expected
/// vs actual bytes), checksum mismatch; also unreadable files and malformed payloads.
checkpoint_file read_checkpoint(const std::string& path);

/// Checkpoint files in dir, oldest first (by step); ignores temporaries and other files.
/// Empty if dir does not exist; std::runtime_error if it cannot be listed.
std::vector<std::string> list_checkpoints(const std::string& dir);

/// The newest checkpoint that verifies. Every newer one that does not is skipped and its
/// "path: reason" appended to `skipped` (if not null) so the caller can report it. nullopt if
/// dir has none that verifies (or does not exist).
std::optional<checkpoint_file> load_latest_checkpoint(const std::string& dir,
                                                      std::vector<std::string>* skipped);

/// Fault injection: damages the file in place so read_checkpoint must reject it (flips bytes in
/// the payload when `truncate` is false, else cuts the file to half its length).
void corrupt_checkpoint_file(const std::string& path, bool truncate);

}  // namespace asyncrl
