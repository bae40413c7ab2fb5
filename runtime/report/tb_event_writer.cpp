#include "runtime/report/tb_event_writer.hpp"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <system_error>

#include "runtime/report/crc32c.hpp"

namespace asyncrl {

namespace {

// Protobuf's wire format, the few parts the event messages need. Plain fields at their proto3
// default (0, empty) are left out, as protobuf's own serializer does, so that a message
// re-serialized by protobuf gives the same bytes (tests/report/tensorboard_test.py checks it);
// the members of a oneof (Event.what, Value.value) are always written.
// Field numbers: tensorboard/compat/proto/{event,summary,tensor,tensor_shape}.proto.
enum wire : uint32_t { varint = 0, fixed64 = 1, length_delimited = 2, fixed32 = 5 };

void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}

void put_key(std::string& out, uint32_t field, wire w) {
  put_varint(out, (field << 3) | w);
}

template <class T>
void put_le(std::string& out, T v) {  // the host is little-endian (x86-64, aarch64)
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));
  out.append(bytes, sizeof(T));
}

// A double or float field: left out at +0 only (-0 has other bits, so protobuf writes it).
void put_double(std::string& out, uint32_t field, double v) {
  if (v == 0 && !std::signbit(v)) return;
  put_key(out, field, fixed64);
  put_le(out, v);
}

void put_int64(std::string& out, uint32_t field, int64_t v) {
  if (v == 0) return;
  put_key(out, field, varint);
  put_varint(out, static_cast<uint64_t>(v));  // negative: ten bytes, two's complement
}

void put_bytes(std::string& out, uint32_t field, const std::string& v) {
  put_key(out, field, length_delimited);
  put_varint(out, v.size());
  out += v;
}

// A repeated double, packed (proto3's default for scalar numeric fields).
void put_packed_doubles(std::string& out, uint32_t field, const std::vector<double>& v) {
  if (v.empty()) return;
  put_key(out, field, length_delimited);
  put_varint(out, v.size() * sizeof(double));
  for (double x : v)
    put_le(out, x);
}

// Event{wall_time = 1, step = 2, ...}: the part every event starts with.
std::string event_head(double wall_time, int64_t step) {
  std::string e;
  put_double(e, 1, wall_time);
  put_int64(e, 2, step);
  return e;
}

// Event.summary = 5 of Summary{value = 1: the encoded Summary.Value messages}.
std::string event_with_values(double wall_time, int64_t step,
                              const std::vector<std::string>& values) {
  std::string summary;
  for (const auto& v : values)
    put_bytes(summary, 1, v);
  auto e = event_head(wall_time, step);
  put_bytes(e, 5, summary);
  return e;
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "localhost";
  return buf;
}

double now_s() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

}  // namespace

tb_histogram make_tb_histogram(const std::vector<double>& values, int buckets) {
  tb_histogram h;
  h.min = *std::min_element(values.begin(), values.end());
  h.max = *std::max_element(values.begin(), values.end());
  h.num = static_cast<double>(values.size());
  for (double v : values) {
    h.sum += v;
    h.sum_squares += v * v;
  }
  // Equal widths from min to max; the last limit is DBL_MAX, as in TensorFlow's histograms, so
  // the max lands in the last bucket. TensorBoard draws bucket i from its lower limit (min for
  // the first) to its upper one (max for the last).
  const int k = h.max > h.min ? std::max(1, buckets) : 1;
  const double width = (h.max - h.min) / k;
  for (int i = 1; i < k; ++i)
    h.bucket_limit.push_back(h.min + width * i);
  h.bucket_limit.push_back(std::numeric_limits<double>::max());
  h.bucket.assign(h.bucket_limit.size(), 0.0);
  for (double v : values) {
    const auto i =
        std::upper_bound(h.bucket_limit.begin(), h.bucket_limit.end(), v) - h.bucket_limit.begin();
    h.bucket[std::min<size_t>(i, h.bucket.size() - 1)] += 1;
  }
  return h;
}

std::string tb_record(const std::string& data) {
  std::string header;
  put_le(header, static_cast<uint64_t>(data.size()));
  std::string out = header;
  put_le(out, masked_crc32c(header));
  out += data;
  put_le(out, masked_crc32c(data));
  return out;
}

std::string tb_file_version_event(double wall_time) {
  auto e = event_head(wall_time, 0);
  put_bytes(e, 3, "brain.Event:2");
  return e;
}

std::string tb_scalars_event(double wall_time, int64_t step,
                             const std::vector<std::pair<std::string, double>>& scalars) {
  std::vector<std::string> values;
  for (const auto& [tag, x] : scalars) {
    std::string v;
    put_bytes(v, 1, tag);  // Value.tag
    // Value.simple_value = 2 (float). Written even when 0: it is in Value's oneof, where
    // presence is what tells a scalar from an empty value.
    put_key(v, 2, fixed32);
    put_le(v, static_cast<float>(x));
    values.push_back(std::move(v));
  }
  return event_with_values(wall_time, step, values);
}

std::string tb_text_event(double wall_time, int64_t step, const std::string& tag,
                          const std::string& text) {
  std::string plugin_data;
  put_bytes(plugin_data, 1, "text");  // PluginData.plugin_name; content: empty (version 0)
  std::string metadata;
  put_bytes(metadata, 1, plugin_data);  // SummaryMetadata.plugin_data
  std::string tensor;
  put_key(tensor, 1, varint);  // TensorProto.dtype = DT_STRING (7)
  put_varint(tensor, 7);
  put_bytes(tensor, 2, "");    // tensor_shape: no dims, a scalar
  put_bytes(tensor, 8, text);  // string_val
  std::string v;
  put_bytes(v, 1, tag);
  put_bytes(v, 8, tensor);    // Value.tensor
  put_bytes(v, 9, metadata);  // Value.metadata
  return event_with_values(wall_time, step, {v});
}

std::string tb_histogram_event(double wall_time, int64_t step, const std::string& tag,
                               const tb_histogram& h) {
  std::string histo;
  put_double(histo, 1, h.min);
  put_double(histo, 2, h.max);
  put_double(histo, 3, h.num);
  put_double(histo, 4, h.sum);
  put_double(histo, 5, h.sum_squares);
  put_packed_doubles(histo, 6, h.bucket_limit);
  put_packed_doubles(histo, 7, h.bucket);
  std::string v;
  put_bytes(v, 1, tag);
  put_bytes(v, 5, histo);  // Value.histo
  return event_with_values(wall_time, step, {v});
}

std::string tb_session_start_event(double wall_time, int64_t step) {
  std::string log;
  put_key(log, 1, varint);  // SessionLog.status = START (1)
  put_varint(log, 1);
  auto e = event_head(wall_time, step);
  put_bytes(e, 7, log);  // Event.session_log
  return e;
}

tb_event_writer::tb_event_writer(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw std::runtime_error(dir + ": cannot create the directory: " + ec.message());
  const double t = now_s();
  const auto base = dir + "/events.out.tfevents." + std::to_string(static_cast<int64_t>(t)) + "." +
                    host_name() + "." + std::to_string(getpid());
  path_ = base;
  for (int n = 1; std::filesystem::exists(path_); ++n)
    path_ = base + "." + std::to_string(n);
  out_.open(path_, std::ios::binary | std::ios::trunc);
  if (!out_) throw std::runtime_error(path_ + ": cannot create the file: " + std::strerror(errno));
  append(tb_file_version_event(t));
}

void tb_event_writer::scalars(int64_t step,
                              const std::vector<std::pair<std::string, double>>& scalars) {
  if (!scalars.empty()) append(tb_scalars_event(now_s(), step, scalars));
}

void tb_event_writer::text(int64_t step, const std::string& tag, const std::string& text) {
  append(tb_text_event(now_s(), step, tag, text));
}

void tb_event_writer::histogram(int64_t step, const std::string& tag,
                                const std::vector<double>& values) {
  if (!values.empty()) append(tb_histogram_event(now_s(), step, tag, make_tb_histogram(values)));
}

void tb_event_writer::session_start(int64_t step) {
  append(tb_session_start_event(now_s(), step));
}

void tb_event_writer::append(const std::string& event) {
  out_ << tb_record(event) << std::flush;
  if (!out_) throw std::runtime_error(path_ + ": write failed: " + std::strerror(errno));
}

}  // namespace asyncrl
