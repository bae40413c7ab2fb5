#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace asyncrl {

/// A safetensors file that is truncated, corrupt or not what was expected. The message names
/// the file and the problem.
class safetensors_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

enum class st_dtype { f64, f32, f16, bf16, i64, i32, i16, i8, u8, boolean };

/// "F32", "BF16", ... as in the format's header.
const char* st_dtype_name(st_dtype t);
size_t st_dtype_size(st_dtype t);

struct st_tensor_info {
  std::string name;
  st_dtype dtype = st_dtype::f32;
  std::vector<int64_t> shape;
  size_t begin = 0;  // byte offsets into the data section
  size_t end = 0;
  int64_t numel() const;
};

/// A parsed safetensors file held in memory. Layout: 8-byte little-endian header length N,
/// N bytes of JSON header {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__":
/// {str: str}}, then the raw little-endian data. Every offset and size is validated on parse.
class safetensors_file {
 public:
  /// Reads and validates `path`. Throws safetensors_error; never crashes on bad input.
  static safetensors_file read(const std::string& path);
  /// Validates bytes already in memory; `source` names them in errors.
  static safetensors_file parse(std::vector<uint8_t> bytes, const std::string& source);

  const std::vector<st_tensor_info>& tensors() const { return tensors_; }
  /// nullptr when absent.
  const st_tensor_info* find(const std::string& name) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const std::string& source() const { return source_; }

  /// Raw bytes of a tensor (little-endian, dtype as stored).
  const uint8_t* data(const st_tensor_info& t) const;
  /// The tensor's values as float32: F32 as is, F16/BF16/F64 converted. Throws for integer
  /// and boolean dtypes.
  std::vector<float> to_f32(const st_tensor_info& t) const;

 private:
  std::string source_;
  std::vector<uint8_t> bytes_;
  size_t data_start_ = 0;
  std::vector<st_tensor_info> tensors_;
  std::map<std::string, std::string> metadata_;
};

/// One tensor to write; `data` points at numel * dtype size little-endian bytes.
struct st_write_tensor {
  std::string name;
  st_dtype dtype = st_dtype::f32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
};

/// Writes a safetensors file (tensors in the given order, header padded with spaces to a
/// multiple of 8 bytes) atomically via a temp file and rename. Throws safetensors_error.
void write_safetensors(const std::string& path, const std::vector<st_write_tensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

/// Serialises to bytes in memory (the same layout as the file).
std::vector<uint8_t> serialize_safetensors(const std::vector<st_write_tensor>& tensors,
                                           const std::map<std::string, std::string>& metadata);

/// IEEE half and bfloat16 conversions (round-to-nearest-even when narrowing).
float f16_to_f32(uint16_t h);
float bf16_to_f32(uint16_t b);
uint16_t f32_to_f16(float f);
uint16_t f32_to_bf16(float f);

}  // namespace asyncrl
