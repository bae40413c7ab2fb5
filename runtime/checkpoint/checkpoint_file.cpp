#include "runtime/checkpoint/checkpoint_file.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "runtime/common/atomic_file.hpp"

namespace asyncrl {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'A', 'S', 'Y', 'N', 'C', 'R', 'L', 'C'};
constexpr size_t kDigestSize = 32;
constexpr size_t kHeaderSize = 8 + 4 + 4 + 8 + 8 + kDigestSize;  // 64
// Temporaries start with '.' so that nothing that lists the directory mistakes them for
// checkpoints; the suffix is mkstemp's.
constexpr const char* kTempPrefix = ".step-";
constexpr const char* kTempMarker = ".ckpt.tmp-";

using digest = std::array<unsigned char, kDigestSize>;

std::string errno_text(int err) {
  return std::generic_category().message(err);
}

[[noreturn]] void io_fail(const std::string& path, const std::string& what, int err) {
  throw std::runtime_error(path + ": " + what + ": " + errno_text(err));
}

[[noreturn]] void bad_file(const std::string& path, const std::string& what) {
  throw checkpoint_error(path + ": " + what);
}

digest sha256(const std::string& bytes) {
  digest md{};
  unsigned int len = 0;
  if (EVP_Digest(bytes.data(), bytes.size(), md.data(), &len, EVP_sha256(), nullptr) != 1 ||
      len != kDigestSize)
    throw std::runtime_error("checkpoint: OpenSSL SHA-256 failed");
  return md;
}

// Explicit little-endian encoding, so a checkpoint moves between hosts unchanged.
void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_u64(std::string& out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t get_le(const char* p, int n) {
  uint64_t v = 0;
  for (int i = 0; i < n; ++i)
    v |= uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

// Reads the payload's fields; every length is checked against the bytes left first.
class payload_reader {
 public:
  payload_reader(const std::string& path, const std::string& bytes) : path_(path), b_(bytes) {}
  uint64_t left() const { return b_.size() - pos_; }
  uint32_t u32(const char* what) { return static_cast<uint32_t>(get_le(take(4, what), 4)); }
  uint64_t u64(const char* what) { return get_le(take(8, what), 8); }
  std::string bytes(uint64_t n, const char* what) {
    const char* p = take(n, what);
    return std::string(p, static_cast<size_t>(n));
  }

 private:
  const char* take(uint64_t n, const char* what) {
    if (n > left())
      bad_file(path_, std::string("malformed payload: ") + what + " needs " + std::to_string(n) +
                          " bytes at payload offset " + std::to_string(pos_) + ", only " +
                          std::to_string(left()) + " left");
    const char* p = b_.data() + pos_;
    pos_ += static_cast<size_t>(n);
    return p;
  }

  const std::string& path_;
  const std::string& b_;
  size_t pos_ = 0;
};

std::string encode_payload(const checkpoint_file& c) {
  size_t size = 4;
  for (auto& [name, data] : c.sections)
    size += 4 + name.size() + 8 + data.size();
  std::string out;
  out.reserve(size);
  if (c.sections.size() > UINT32_MAX) throw std::invalid_argument("checkpoint: too many sections");
  put_u32(out, static_cast<uint32_t>(c.sections.size()));
  for (auto& [name, data] : c.sections) {
    if (name.size() > UINT32_MAX)
      throw std::invalid_argument("checkpoint: section name longer than 4 GiB");
    put_u32(out, static_cast<uint32_t>(name.size()));
    out += name;
    put_u64(out, data.size());
    out += data;
  }
  return out;
}

std::map<std::string, std::string> decode_payload(const std::string& path,
                                                  const std::string& payload) {
  payload_reader r(path, payload);
  const uint32_t count = r.u32("section count");
  // Each section takes at least 12 bytes: a count beyond that is damage, not a big file.
  if (count > r.left() / 12)
    bad_file(path, "malformed payload: " + std::to_string(count) + " sections cannot fit in " +
                       std::to_string(r.left()) + " bytes");
  std::map<std::string, std::string> out;
  for (uint32_t i = 0; i < count; ++i) {
    std::string name = r.bytes(r.u32("section name length"), "section name");
    std::string data = r.bytes(r.u64("section data length"), "section data");
    if (!out.emplace(name, std::move(data)).second)
      bad_file(path, "malformed payload: section '" + name + "' appears twice");
  }
  if (r.left() != 0)
    bad_file(path,
             "malformed payload: " + std::to_string(r.left()) + " bytes after the last section");
  return out;
}

// The step a canonical checkpoint file name stands for ("step-00000012.ckpt" -> 12), or -1
// for anything else (temporaries, other files, non-canonical padding).
int64_t step_of_name(const std::string& name) {
  const std::string pre = "step-", post = ".ckpt";
  if (name.size() < pre.size() + 8 + post.size() || name.compare(0, pre.size(), pre) != 0 ||
      name.compare(name.size() - post.size(), post.size(), post) != 0)
    return -1;
  const std::string digits = name.substr(pre.size(), name.size() - pre.size() - post.size());
  if (digits.size() > 18 ||
      !std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; }))
    return -1;
  const int64_t step = std::stoll(digits);
  return fs::path(checkpoint_path(".", step)).filename() == name ? step : -1;
}

// Closes the descriptor on every path out of write_checkpoint.
struct fd_guard {
  int fd = -1;
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
};

// Makes the directory entries of `dir` (a rename, a new file) durable.
void fsync_dir(const std::string& dir) {
  fd_guard d;
  d.fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d.fd < 0) io_fail(dir, "cannot open directory to fsync it", errno);
  if (::fsync(d.fd) != 0) io_fail(dir, "directory fsync failed", errno);
}

// Temporaries of an earlier writer that died before its rename. One writer per directory is
// assumed, so anything matching is garbage.
void remove_stale_temporaries(const std::string& dir) {
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const auto name = it->path().filename().string();
    if (name.rfind(kTempPrefix, 0) == 0 && name.find(kTempMarker) != std::string::npos)
      fs::remove(it->path(), ec);  // best effort: a leftover is only wasted space
  }
}

}  // namespace

std::string checkpoint_path(const std::string& dir, int64_t step) {
  if (step < 0)
    throw std::invalid_argument("checkpoint_path: negative step " + std::to_string(step));
  char name[40];
  std::snprintf(name, sizeof(name), "step-%08lld.ckpt", static_cast<long long>(step));
  return (fs::path(dir) / name).string();
}

void write_checkpoint(const std::string& dir, const checkpoint_file& c, int64_t keep) {
  if (keep < 1)
    throw std::invalid_argument("write_checkpoint: keep must be >= 1, not " + std::to_string(keep));
  const std::string final_path = checkpoint_path(dir, c.step);

  const std::string payload = encode_payload(c);
  const digest md = sha256(payload);
  std::string header;
  header.append(kMagic, sizeof(kMagic));
  put_u32(header, kCheckpointFormat);
  put_u32(header, 0);  // reserved
  put_u64(header, static_cast<uint64_t>(c.step));
  put_u64(header, payload.size());
  header.append(reinterpret_cast<const char*>(md.data()), md.size());

  std::error_code ec;
  if (fs::create_directories(dir, ec)) {
    // A new directory's own entry must survive a crash too.
    const auto parent = fs::absolute(dir).parent_path().string();
    fsync_dir(parent);
  }
  if (ec) throw std::runtime_error(dir + ": cannot create checkpoint directory: " + ec.message());
  remove_stale_temporaries(dir);

  // .step-NNNNNNNN.ckpt.tmp-XXXXXX next to the final name: rename is only atomic within one
  // file system.
  const auto base = fs::path(final_path).filename().string();  // step-NNNNNNNN.ckpt
  std::string tmp =
      (fs::path(dir) / ("." + base.substr(0, base.size() - 5) + kTempMarker + "XXXXXX")).string();
  std::vector<char> tmpl(tmp.begin(), tmp.end());
  tmpl.push_back('\0');
  fd_guard f;
  f.fd = ::mkstemp(tmpl.data());
  if (f.fd < 0) io_fail(tmp, "cannot create temporary checkpoint file", errno);
  tmp = tmpl.data();
  try {
    (void)::fchmod(f.fd, 0644);       // mkstemp's 0600 would hide checkpoints from other readers
    write_all_fd(f.fd, header, tmp);  // apart from the payload: no second copy of a large state
    write_all_fd(f.fd, payload, tmp);
    if (::fsync(f.fd) != 0) io_fail(tmp, "fsync failed", errno);
    const int fd = f.fd;
    f.fd = -1;
    if (::close(fd) != 0) io_fail(tmp, "close failed", errno);
    if (::rename(tmp.c_str(), final_path.c_str()) != 0)
      io_fail(final_path, "cannot rename " + tmp + " to it", errno);
  } catch (...) {
    ::unlink(tmp.c_str());
    throw;
  }
  fsync_dir(dir);

  // Retention: the newest `keep` of the checkpoints up to c.step; c itself is the newest of
  // those, so it always stays.
  std::vector<std::string> older;
  for (auto& p : list_checkpoints(dir))
    if (step_of_name(fs::path(p).filename().string()) <= c.step) older.push_back(p);
  const auto excess = static_cast<int64_t>(older.size()) - keep;
  for (int64_t i = 0; i < excess; ++i)
    if (::unlink(older[static_cast<size_t>(i)].c_str()) != 0 && errno != ENOENT)
      io_fail(older[static_cast<size_t>(i)],
              "checkpoint " + final_path + " was written, but this old one cannot be deleted",
              errno);
}

checkpoint_file read_checkpoint(const std::string& path) {
  fd_guard f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (f.fd < 0) bad_file(path, "cannot open: " + errno_text(errno));
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) bad_file(path, "cannot stat: " + errno_text(errno));
  if (!S_ISREG(st.st_mode)) bad_file(path, "not a regular file");
  // The real size bounds every allocation below; the header's lengths are only compared to it.
  std::string bytes(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < bytes.size()) {
    const ssize_t n = ::read(f.fd, bytes.data() + got, bytes.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) bad_file(path, "read failed: " + errno_text(errno));
    if (n == 0) break;  // shrank under us: checked as truncation below
    got += static_cast<size_t>(n);
  }
  bytes.resize(got);

  const size_t size = bytes.size();
  const auto truncated_header = [&] {
    bad_file(path, "truncated: the header needs " + std::to_string(kHeaderSize) +
                       " bytes, the file has " + std::to_string(size));
  };
  if (std::memcmp(bytes.data(), kMagic, std::min(size, sizeof(kMagic))) != 0)
    bad_file(path, "not a checkpoint (bad magic)");
  if (size < 12) truncated_header();
  const auto version = static_cast<uint32_t>(get_le(bytes.data() + 8, 4));
  if (version != kCheckpointFormat)
    bad_file(path, "format version " + std::to_string(version) +
                       " unsupported (this build reads version " +
                       std::to_string(kCheckpointFormat) + ")");
  if (size < kHeaderSize) truncated_header();
  // Version 1 writes 0; anything else is damage to a header the checksum does not cover.
  const auto reserved = static_cast<uint32_t>(get_le(bytes.data() + 12, 4));
  if (reserved != 0)
    bad_file(path, "corrupt header: reserved field is " + std::to_string(reserved) + ", not 0");
  const auto step = static_cast<int64_t>(get_le(bytes.data() + 16, 8));
  const uint64_t payload_len = get_le(bytes.data() + 24, 8);
  const uint64_t have = size - kHeaderSize;
  if (payload_len > have)
    bad_file(path, "truncated: expected " + std::to_string(payload_len) +
                       " payload bytes (file size " + std::to_string(kHeaderSize + payload_len) +
                       "), the file has " + std::to_string(size) + " bytes");
  if (payload_len < have)
    bad_file(path, "corrupt: " + std::to_string(have - payload_len) +
                       " bytes after the payload (expected file size " +
                       std::to_string(kHeaderSize + payload_len) + ", actual " +
                       std::to_string(size) + ")");
  digest want{};
  std::memcpy(want.data(), bytes.data() + 32, kDigestSize);
  std::string payload = bytes.substr(kHeaderSize);
  bytes.clear();
  bytes.shrink_to_fit();
  if (sha256(payload) != want) bad_file(path, "checksum mismatch: the payload is damaged");
  // The step is outside the checksum; a canonical file name is a second witness for it.
  const int64_t named = step_of_name(fs::path(path).filename().string());
  if (step < 0 || (named >= 0 && named != step))
    bad_file(path, "corrupt header: step " + std::to_string(step) +
                       (named >= 0 ? " but the file name says " + std::to_string(named) : ""));
  checkpoint_file c;
  c.step = step;
  c.sections = decode_payload(path, payload);
  return c;
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return {};
  std::vector<std::pair<int64_t, std::string>> found;
  fs::directory_iterator it(dir, ec);
  if (ec) throw std::runtime_error(dir + ": cannot list checkpoint directory: " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) throw std::runtime_error(dir + ": cannot list checkpoint directory: " + ec.message());
    const int64_t step = step_of_name(it->path().filename().string());
    if (step >= 0 && it->is_regular_file(ec)) found.emplace_back(step, it->path().string());
  }
  if (ec) throw std::runtime_error(dir + ": cannot list checkpoint directory: " + ec.message());
  std::sort(found.begin(), found.end());
  std::vector<std::string> out;
  for (auto& [step, p] : found)
    out.push_back(p);
  return out;
}

std::optional<checkpoint_file> load_latest_checkpoint(const std::string& dir,
                                                      std::vector<std::string>* skipped) {
  const auto all = list_checkpoints(dir);
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      return read_checkpoint(*it);
    } catch (const checkpoint_error& e) {
      if (skipped != nullptr) skipped->push_back(e.what());  // already "path: reason"
    }
  }
  return std::nullopt;
}

void corrupt_checkpoint_file(const std::string& path, bool truncate) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  if (ec) throw std::runtime_error(path + ": cannot corrupt: " + ec.message());
  if (truncate) {
    fs::resize_file(path, size / 2, ec);
    if (ec) throw std::runtime_error(path + ": cannot truncate: " + ec.message());
    return;
  }
  if (size == 0) throw std::runtime_error(path + ": cannot corrupt an empty file");
  // The middle of the payload, so only the checksum can notice.
  const uint64_t at = size > kHeaderSize ? kHeaderSize + (size - kHeaderSize) / 2 : size / 2;
  fd_guard f;
  f.fd = ::open(path.c_str(), O_RDWR | O_CLOEXEC);
  if (f.fd < 0) io_fail(path, "cannot open to corrupt", errno);
  unsigned char b = 0;
  if (::pread(f.fd, &b, 1, static_cast<off_t>(at)) != 1) io_fail(path, "read failed", errno);
  b ^= 0xff;
  if (::pwrite(f.fd, &b, 1, static_cast<off_t>(at)) != 1) io_fail(path, "write failed", errno);
}

}  // namespace asyncrl
