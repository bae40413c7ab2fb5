#include "runtime/cluster/weight_chunks.hpp"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>

namespace asyncrl {

std::string sha256_hex(const char* data, size_t n) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(data, n, md, &len, EVP_sha256(), nullptr) != 1)
    throw std::runtime_error("SHA-256 failed");
  static const char* hex = "0123456789abcdef";
  std::string s;
  for (unsigned int i = 0; i < len; ++i) {
    s += hex[md[i] >> 4];
    s += hex[md[i] & 15];
  }
  return s;
}

int32_t chunk_count(int64_t total, int64_t chunk_bytes) {
  if (chunk_bytes <= 0) throw std::invalid_argument("chunk size must be positive");
  if ((total + chunk_bytes - 1) / chunk_bytes > INT32_MAX)
    throw std::invalid_argument("too many chunks: raise cluster.chunk_bytes");
  return static_cast<int32_t>(std::max<int64_t>(1, (total + chunk_bytes - 1) / chunk_bytes));
}

chunk_span chunk_at(int64_t total, int64_t chunk_bytes, int32_t index) {
  chunk_span s;
  s.offset = std::min<int64_t>(total, int64_t{index} * chunk_bytes);
  s.size = std::min<int64_t>(chunk_bytes, total - s.offset);
  return s;
}

std::string weight_assembler::add(int64_t version, int32_t index, int32_t count, int64_t offset,
                                  int64_t total, const std::string& digest,
                                  const std::vector<char>& bytes) {
  auto where = [&] {
    return "chunk " + std::to_string(index) + "/" + std::to_string(count) + " of v" +
           std::to_string(version);
  };
  if (count <= 0 || index < 0 || index >= count || total < 0)
    return where() + ": index, count or size out of range";
  if (version < version_) return where() + ": older than v" + std::to_string(version_);
  if (version > version_ || (index == 0 && version == version_ && !complete_)) {
    // A new version (or the same one sent again from the start after a failed attempt).
    if (index != 0) return where() + ": expected chunk 0 first";
    version_ = version;
    next_ = 0;
    count_ = count;
    total_ = total;
    digest_ = digest;
    data_.clear();
    data_.reserve(static_cast<size_t>(std::max<int64_t>(0, total)));
    complete_ = false;
  }
  if (complete_) return where() + ": the version is already complete";
  if (index != next_) return where() + ": expected chunk " + std::to_string(next_);
  if (count != count_ || total != total_ || digest != digest_)
    return where() + ": count, size or digest differ from chunk 0's";
  if (offset != received() || received() + static_cast<int64_t>(bytes.size()) > total_)
    return where() + ": bytes at offset " + std::to_string(offset) + " do not continue the " +
           std::to_string(received()) + " received (total " + std::to_string(total_) + ")";
  data_.insert(data_.end(), bytes.begin(), bytes.end());
  ++next_;
  if (next_ < count_) return {};
  if (received() != total_)
    return where() + ": " + std::to_string(received()) + " bytes, expected " +
           std::to_string(total_);
  const auto got = sha256_hex(data_.data(), data_.size());
  if (got != digest_) {
    data_.clear();
    next_ = 0;
    return where() + ": SHA-256 " + got + " differs from the sender's " + digest_;
  }
  complete_ = true;
  return {};
}

std::vector<char> weight_assembler::take() {
  complete_ = false;
  next_ = 0;
  return std::move(data_);
}

}  // namespace asyncrl
