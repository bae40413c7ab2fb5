#pragma once

// Shared bits of the benchmark executables: timing, medians, and JSON output to stdout and,
// with `--out FILE`, to a file.

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace asyncrl::bench {

inline double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Value of `--name X` in argv, or `fallback`.
inline std::string arg(int argc, char** argv, const char* name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return argv[i + 1];
  return fallback;
}

/// "a,b,,c" -> {"a", "b", "c"}: a comma-separated option's items, empty ones left out.
inline std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

inline bool flag(int argc, char** argv, const char* name) {
  for (int i = 1; i < argc; ++i)
    if (std::strcmp(argv[i], name) == 0) return true;
  return false;
}

/// The machine, so that every result says where it was measured.
inline nlohmann::ordered_json machine() {
  std::string model = "unknown";
  std::ifstream cpu("/proc/cpuinfo");
  for (std::string line; std::getline(cpu, line);)
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  return {{"cpu", model}, {"cores", std::thread::hardware_concurrency()}};
}

/// Prints the result and writes it to --out when given.
inline void emit(int argc, char** argv, const nlohmann::ordered_json& j) {
  std::cout << j.dump(2) << std::endl;
  auto out = arg(argc, argv, "--out", "");
  if (!out.empty()) std::ofstream(out) << j.dump(2) << "\n";
}

}  // namespace asyncrl::bench
