#pragma once

// TensorBoard event files written by hand: TFRecord framing around a few fields of the Event,
// Summary, HistogramProto and TensorProto messages (tensorboard/compat/proto/*.proto), so no
// protobuf library is needed. What runtime.tensorboard writes: scalars, the config as text, and
// histograms (docs/architecture.md, "TensorBoard").

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace asyncrl {

/// A HistogramProto's fields: the values' min, max, count, sum and sum of squares, and counts
/// in buckets; bucket i holds the values in [bucket_limit[i-1], bucket_limit[i]) (the first from
/// -inf), as TensorFlow's own histograms do.
struct tb_histogram {
  double min = 0, max = 0, num = 0, sum = 0, sum_squares = 0;
  std::vector<double> bucket_limit;
  std::vector<double> bucket;
};

/// The histogram of `values` in at most `buckets` equal-width buckets between their min and
/// max (one bucket when they are all equal). `values` must not be empty.
tb_histogram make_tb_histogram(const std::vector<double>& values, int buckets = 30);

/// One TFRecord: uint64 LE length, masked CRC-32C of those 8 bytes, `data`, masked CRC-32C of
/// `data` (uint32 LE each).
std::string tb_record(const std::string& data);

/// The encoded Event messages (without framing); `wall_time` in seconds since the epoch.
std::string tb_file_version_event(double wall_time);
/// An Event of one Summary with a simple_value per (tag, value), all at `step`.
std::string tb_scalars_event(double wall_time, int64_t step,
                             const std::vector<std::pair<std::string, double>>& scalars);
/// A text-plugin Summary: a scalar DT_STRING tensor holding `text` (rendered as Markdown).
std::string tb_text_event(double wall_time, int64_t step, const std::string& tag,
                          const std::string& text);
/// A Summary with one HistogramProto.
std::string tb_histogram_event(double wall_time, int64_t step, const std::string& tag,
                               const tb_histogram& h);
/// SessionLog{status: START} at `step`: a (re)start. TensorBoard's readers drop every event with
/// a step >= `step` read before it (the server's reader only from the second START it sees on,
/// taking the first as the start), as they do for a TensorFlow job restarted from a checkpoint.
std::string tb_session_start_event(double wall_time, int64_t step);

/// Appends events to a new file <dir>/events.out.tfevents.<unix time>.<host>.<pid> (a `.N`
/// suffix if that exists); each write is flushed, so a crash loses at most the record being
/// written.
class tb_event_writer {
 public:
  /// Creates `dir` if needed and the file, starting with the file_version event. Throws
  /// std::runtime_error naming the path when either cannot be created.
  explicit tb_event_writer(const std::string& dir);

  /// One Event holding every (tag, value) of `scalars` (non-finite values are kept: TensorBoard
  /// shows NaN and inf).
  void scalars(int64_t step, const std::vector<std::pair<std::string, double>>& scalars);
  /// `text` under `tag` for the text plugin.
  void text(int64_t step, const std::string& tag, const std::string& text);
  /// The histogram of `values` under `tag`; nothing when `values` is empty.
  void histogram(int64_t step, const std::string& tag, const std::vector<double>& values);
  /// Marks a restart at `step` (tb_session_start_event).
  void session_start(int64_t step);

  /// The events file's path.
  const std::string& path() const { return path_; }

 private:
  void append(const std::string& event);

  std::string path_;
  std::ofstream out_;
};

}  // namespace asyncrl
